"""Precompute a static DIG-style dataset: `python -m dig_jax.data.build --source SPEC --out DIR`.

For every region (>= 300 non-void px): creation samples for every part, and the whole region
when it has several (DIG Table 4), x gesture kind (each
with a multi-region variant, same gesture, when another disjoint region exists: that region is
the correct previous mask and joins the local target, which keeps its void, written as `mul_gt`
+ `mul_gt_void`, and the global GT), and one synthetic prior whose every correction x kind is a
refinement sample. Writes `DIR/dig.json` (DIG release format, masks as COCO RLE),
`DIR/images/` (original bytes, or PNG when resized / procedural) and `DIR/summary.json`, and
prints a summary like Table 4 of DIG; `--tfds-dir D` also packs the samples as ArrayRecord
files of the TFDS builder `dig_jax.data.tfds_builder.DigSamples`. Bad items are reported with
their file name, skipped and counted: unreadable or inconsistent files (every source raises
ValueError for them) and items a COCO JSON file cannot list. Read the result back with
`dig_jax.data.sources.dig_json(DIR/dig.json, DIR/images)` or the source spec
"dig_json:DIR/dig.json:DIR/images".
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import re
import shutil
import sys
from pathlib import Path

import cv2
import numpy as np
from tqdm import tqdm

from dig_jax.data.pipeline import resolve_source
from dig_jax.data.priors import PriorUnreachableError, find_corrections, synthesize_prior
from dig_jax.data.regions import creation_targets, record_regions
from dig_jax.data.samples import creation_sample, join_region, refinement_sample
from dig_jax.data.sources.benchmark_folder import scan_benchmark_folder
from dig_jax.data.sources.coco_json import scan_coco_json
from dig_jax.data.sources.dig_json import DigRowWriter, write_dig_json
from dig_jax.data.sources.record import LoadedRecord, Record, resize_loaded
from dig_jax.gestures.types import Context, GestureKind
from dig_jax.outputs import check_out_dir, record_written, replace_with, staging_dir
from dig_jax.paths import dataset_dir

KIND_NAMES = [k.name.lower() for k in GestureKind]
OUTPUTS = ["images/", "dig.json", "summary.json"]  # what a build writes into --out


def _records_and_problems(spec: str, size: tuple[int, int]) -> tuple[list, list[str]]:
    kind, _, rest = spec.partition(":")
    if kind in ("grabcut", "berkeley", "coco_mval"):
        return scan_benchmark_folder(dataset_dir(kind))
    if kind == "folder":
        return scan_benchmark_folder(Path(rest))
    if kind == "coco_json":
        path, sep, image_dir = rest.rpartition(":")
        if not sep or not path:
            raise ValueError(f"sources: {spec!r} must be coco_json:FILE.json:IMAGE_DIR")
        return scan_coco_json(path, image_dir)
    return resolve_source(spec, image_size=size), []


def _write_image(
    record: Record, loaded: LoadedRecord, resized: bool, out: Path, img_id: str
) -> str:
    src = record.image
    if isinstance(src, (str, Path)) and not resized:
        name = f"{img_id}{Path(src).suffix}"
        shutil.copyfile(src, out / name)
    else:
        name = f"{img_id}.png"
        cv2.imwrite(str(out / name), loaded.image[..., ::-1])
    return name


def build_record(
    loaded: LoadedRecord,
    rng: np.random.Generator,
    writer: DigRowWriter,
    stats: collections.Counter,
    *,
    kinds: tuple[int, ...],
    refinement: bool = True,
    multi: bool = True,
) -> None:
    """Append every sample of one loaded record to `writer`, counting them in `stats`."""
    regions = record_regions(loaded.instances, loaded.instance_ids, void=loaded.void)
    stats["regions"] += len(regions)
    writer.set_void(loaded.void)
    stats["parts"] += sum(e.region.num_parts for e in regions if e.region.num_parts > 1)
    image, void, image_id = loaded.image, loaded.void, loaded.image_id
    for entry in regions:
        region = entry.region
        prior = corrections = None
        if refinement:
            try:
                prior = synthesize_prior(image, region.mask, rng, void=void)
                corrections = find_corrections(prior, region.mask, void)
            except (PriorUnreachableError, ValueError):  # ValueError: e.g. void where it matters
                stats["prior unreachable"] += 1
        writer.set_object(region.instance_id, region.mask, prior if corrections else None)
        others = entry.disjoint
        for part in creation_targets(region):  # the whole of an occluded region, each part
            for kind in kinds:
                s = creation_sample(image, region, part, kind, rng, void=void, image_id=image_id)
                mul = None
                if multi and others:
                    other = others[int(rng.integers(len(others)))]
                    joined = join_region(s, other.mask)  # local target keeps its void
                    mul = dict(obj_id=other.instance_id, gesture=kind, annotation=s["gesture"],
                               gt=joined["target"], prior=joined["prev_mask"])  # fmt: skip
                    stats["multi-region"] += 1
                writer.add_sample(obj_id=region.instance_id, target=s["target"],
                                  annotation=s["gesture"], gesture=kind, mode=Context.ADD,
                                  has_prior=False, multi=mul)  # fmt: skip
                stats["creation"] += 1
                stats[KIND_NAMES[kind]] += 1
        for corr_id, corr in enumerate(corrections or []):
            for kind in kinds:
                s = refinement_sample(image, region, prior, corr, kind, rng, void=void,
                                      image_id=image_id)  # fmt: skip
                writer.add_sample(obj_id=region.instance_id, target=s["target"],
                                  annotation=s["gesture"], gesture=kind, mode=corr.context,
                                  has_prior=True, corr_id=corr_id)  # fmt: skip
                stats["refinement"] += 1
                stats["additions" if corr.context == Context.ADD else "subtractions"] += 1
                stats[KIND_NAMES[kind]] += 1


@dataclasses.dataclass(frozen=True, eq=False)
class BuiltRecord:
    """One record's build: the (possibly resized) record, its DIG JSON row and its counters."""

    loaded: LoadedRecord
    resized: bool
    writer: DigRowWriter
    counts: collections.Counter


def build_one(
    record: Record, index: int, *, source_index: int, seed: int, image_size: int | None,
    kinds: tuple[int, ...], refinement: bool = True, multi: bool = True,
) -> BuiltRecord:  # fmt: skip
    """Every sample of record number `index` of source number `source_index`, drawn from
    `numpy.random.default_rng([seed, source_index, index])`: the same bytes whichever process
    builds it (`build` here, a Beam worker in `dig_jax.data.beam_build`). ValueError naming
    the file when the record cannot be read or no gesture can be simulated on it."""
    try:
        loaded = record.load()
    except ValueError as err:
        where = "" if record.describe in str(err) else f"{record.describe}: "
        raise ValueError(f"{where}{err}") from None
    size = (image_size, image_size) if image_size else loaded.shape
    resized = loaded.shape != size
    if resized:
        loaded = resize_loaded(loaded, size)
    img_id = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{record.source}-{record.image_id}")
    writer = DigRowWriter(img_id, loaded.shape)
    rng = np.random.default_rng([seed, source_index, index])
    counts = collections.Counter()
    try:
        build_record(loaded, rng, writer, counts, kinds=kinds, refinement=refinement,
                     multi=multi)  # fmt: skip
    except ValueError as err:  # e.g. a mask no gesture can be simulated on
        raise ValueError(f"{record.describe}: {err}") from None
    return BuiltRecord(loaded, resized, writer, counts)


def format_summary(table: dict[str, collections.Counter]) -> str:
    """A Table-4-like text table: one row per source plus the total."""
    cols = ["images", "regions", "parts", "creation", "refinement", "multi-region",
            *KIND_NAMES, "additions", "subtractions", "prior unreachable", "bad items"]  # fmt: skip
    total = collections.Counter()
    for c in table.values():
        total.update(c)
    rows = [(name, c) for name, c in table.items()] + [("total", total)]
    width = max(len(n) for n, _ in rows) + 2
    lines = ["source".ljust(width) + " ".join(f"{c:>12}" for c in cols)]
    for name, c in rows:
        lines.append(name.ljust(width) + " ".join(f"{c.get(k, 0):>12}" for k in cols))
    return "\n".join(lines)


def build(
    sources: list[str],
    out: str | Path,
    *,
    image_size: int | None = None,
    seed: int = 0,
    limit: int | None = None,
    kinds: tuple[int, ...] = tuple(range(5)),
    refinement: bool = True,
    multi: bool = True,
    progress: bool = True,
) -> dict[str, collections.Counter]:
    """Build the dataset into `out`; returns the per-source counters (also in summary.json).

    Everything is built in a staging folder beside `out`, then `images/`, `dig.json` and
    `summary.json` replace those in `out`; a build that produced no sample raises ValueError
    and leaves `out` as it was. `limit`: at most this many records per source (None = all).
    `out` may hold earlier builds' outputs only: files of the user's own under those names (not
    in `outputs.MANIFEST`), a file as `out` or a read-only `out` raise ValueError before any work.
    """
    out = Path(out)
    if limit is not None and limit < 0:
        raise ValueError(f"limit: must be >= 0 or None, got {limit}")
    if seed < 0:
        raise ValueError(f"seed: must be >= 0, got {seed}")
    check_out_dir(out, OUTPUTS, flag="out")
    check_out_dir(out.resolve().parent, [], flag="out's parent")  # the build is staged there
    stage = staging_dir(out)
    try:
        rows, table = _build_rows(sources, stage / "images", image_size=image_size, seed=seed,
                                  limit=limit, kinds=kinds, refinement=refinement, multi=multi,
                                  progress=progress)  # fmt: skip
        if not rows:
            raise ValueError(
                f"no sample was built from sources {sources} (see the bad items reported); "
                f"{out} was left as it was"
            )
        write_dig_json(stage / "dig.json", rows)
        summary = json.dumps({k: dict(v) for k, v in table.items()}, indent=1)
        (stage / "summary.json").write_text(summary)
        images = [f"images/{p.name}" for p in (stage / "images").iterdir()]
        record_written(out, ["dig.json", "summary.json", *images], forget=("images/",))
        for name in ("images", "dig.json", "summary.json"):
            replace_with(stage / name, out / name)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return table


def _build_rows(
    sources: list[str], images: Path, *, image_size: int | None, seed: int, limit: int | None,
    kinds: tuple[int, ...], refinement: bool, multi: bool, progress: bool,
) -> tuple[list[dict], dict[str, collections.Counter]]:  # fmt: skip
    """DIG JSON rows of every source (images written into `images`) and per-source counters."""
    images.mkdir(parents=True, exist_ok=True)
    size = (image_size, image_size) if image_size else (256, 256)
    rows, table = [], {}
    for source_index, spec in enumerate(sources):
        stats = table.setdefault(spec, collections.Counter())
        records, problems = _records_and_problems(spec, size)
        for problem in problems:
            print(f"bad item: {problem}", file=sys.stderr)
        stats["bad items"] += len(problems)
        records = records if limit is None else records[:limit]
        for i, record in enumerate(tqdm(records, desc=spec, disable=not progress)):
            if not isinstance(record, Record):
                raise ValueError(f"sources: {spec} holds prebuilt samples, not records")
            try:
                built = build_one(record, i, source_index=source_index, seed=seed,
                                  image_size=image_size, kinds=kinds, refinement=refinement,
                                  multi=multi)  # fmt: skip
            except ValueError as err:
                print(f"bad item: {err}", file=sys.stderr)
                stats["bad items"] += 1
                continue
            writer = built.writer
            file_name = _write_image(record, built.loaded, built.resized, images,
                                     writer.row["img_id"])  # fmt: skip
            writer.row["file_name"] = file_name
            stats.update(built.counts)
            stats["images"] += 1
            rows.append(writer.row)
    return rows, table


def parse_kinds(text: str) -> tuple[int, ...]:
    """Gesture kinds from "0,4" or "click,rectangle" (codes or names, comma separated)."""
    names = {k.name.lower(): int(k) for k in GestureKind}
    kinds = []
    for item in (t.strip().lower() for t in text.split(",")):
        if item.isdigit() and int(item) in names.values():
            kinds.append(int(item))
        elif item in names:
            kinds.append(names[item])
        else:
            raise ValueError(
                f"--kinds: {item!r} is not a gesture kind; use codes 0..4 or names {list(names)}"
            )
    return tuple(dict.fromkeys(kinds))


def add_build_flags(parser: argparse.ArgumentParser, *, image_size: str, limit: str) -> None:
    """`--image-size`, `--seed`, `--limit`, `--kinds`, `--no-refinement` and `--no-multi`
    (shared by `build` and `beam_build`); `image_size` and `limit` are their flags' help."""
    parser.add_argument("--image-size", type=int, default=None, help=image_size)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=int, default=None, help=limit)
    parser.add_argument(
        "--kinds", default="0,1,2,3,4", help="gesture kinds, comma separated (codes or names)"
    )
    parser.add_argument("--no-refinement", action="store_true")
    parser.add_argument("--no-multi", action="store_true")


def check_build_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[int, ...]:
    """The gesture kinds of `--kinds`; a parser error (one line, exit 2) for a bad `--kinds`,
    `--limit`, `--image-size` or `--seed` (shared by `build` and `beam_build`)."""
    try:
        kinds = parse_kinds(args.kinds)
    except ValueError as error:
        parser.error(str(error))
    if args.limit is not None and args.limit < 1:
        parser.error(f"--limit must be >= 1, got {args.limit}")
    if args.image_size is not None and not 16 <= args.image_size <= 8192:
        parser.error(f"--image-size must be in 16..8192 px, got {args.image_size}")
    if args.seed < 0:
        parser.error(f"--seed must be >= 0, got {args.seed}")
    return kinds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--source",
        action="append",
        required=True,
        help="source spec, repeatable (see dig_jax.data.pipeline.resolve_source)",
    )
    parser.add_argument("--out", required=True, help="output folder")
    add_build_flags(
        parser,
        image_size="resize to a square (px); procedural scenes are rendered at it (default 256)",
        limit="at most this many records per source (>= 1)",
    )
    parser.add_argument(
        "--tfds-dir",
        default=None,
        help="also pack the samples as a TFDS array_record dataset (dig_samples) under this folder",
    )
    args = parser.parse_args(argv)
    kinds = check_build_flags(parser, args)
    try:
        check_out_dir(args.out, OUTPUTS)
    except ValueError as error:
        parser.error(str(error))
    try:
        table = build(args.source, args.out, image_size=args.image_size, seed=args.seed,
                      limit=args.limit, kinds=kinds, refinement=not args.no_refinement,
                      multi=not args.no_multi)  # fmt: skip
    except ValueError as error:  # a bad source spec, or nothing built
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(format_summary(table))
    print(f"wrote {args.out}")
    if args.tfds_dir:
        from dig_jax.data.tfds_builder import DigSamples  # imports tensorflow_datasets

        DigSamples(build_dir=args.out, data_dir=args.tfds_dir).download_and_prepare()
        print(f"TFDS dataset dig_samples written under {args.tfds_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
