"""Evaluate segmenters and classical peers: DIG tables per gesture kind, optionally NoG.

    python -m dig_jax.evaluate --predictor checkpoints/dig_effnet.digjax,grabcut,filled \
        --datasets grabcut,berkeley --out results/eval

`--predictor` lists what to score on the same samples: exported `.digjax` files and the peers
`grabcut` (OpenCV GrabCut seeded by the gesture) and `filled` (the filled gesture as the mask);
`--checkpoint FILE` adds one file. Every sample is drawn and scored at the photo's own resolution
(`--max-side` shrinks larger photos first); models zoom in on the prompt as `predict` does.
A dataset is a source spec of `dig_jax.data.pipeline.resolve_source` (grabcut, berkeley,
coco_mval, procedural:N, folder:PATH, ...) with an optional held-out split suffix as in the
training configs (`coco_mval%val` = every 10th record) and an optional slice, e.g. `grabcut[0:10]`.
Writes `<out>/metrics.json` and `<out>/tables.md` (and with `--gallery N` a picture per dataset:
N photos x gesture kinds x predictors); prints the tables.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np

from dig_jax.data.regions import VOID, extract_regions
from dig_jax.evaluation import (
    CONTEXT_STRATEGIES,
    GESTURE_ENCODINGS,
    PEERS,
    SkipLog,
    evaluate_samples,
    evaluation_samples,
    kind_table,
    load_record,
    nog,
    peer_predictor,
    segmenter_predictor,
)
from dig_jax.gestures.types import GestureKind

_SLICE = re.compile(r"^(?P<spec>.+?)\[(?P<start>-?\d*):(?P<stop>-?\d*)\]$")


def load_dataset(spec: str, size: int = 512) -> list:
    """Records of a source spec with an optional `%train|%val` split and `[start:stop]` slice
    (`size`: the side procedural scenes are rendered at)."""
    from dig_jax.train.input_pipeline import resolve_records

    match = _SLICE.match(spec)
    base = match["spec"] if match else spec
    records = resolve_records(base, size)
    if match:
        start = int(match["start"]) if match["start"] else None
        stop = int(match["stop"]) if match["stop"] else None
        records = records[start:stop]
    return list(records)


def nog_items(records: list, max_side: int | None, skipped: SkipLog) -> list:
    """(image, gt with void, largest part) triples of every region, at the photo's own size."""
    items = []
    for record in records:
        try:
            loaded = load_record(record, max_side)
        except (OSError, ValueError) as error:
            skipped.add(f"{record.source}:{record.image_id}", str(error))
            continue
        for region in extract_regions(loaded.instances, loaded.instance_ids):
            gt = np.where(loaded.void > 0, VOID, region.mask).astype(np.uint8)
            largest = region.parts[int(np.argmax(region.parts.sum((1, 2))))] > 0
            items.append((loaded.image, gt, largest))
    return items


def predictor_names(args: argparse.Namespace) -> list[str]:
    """Model files and peer names from --checkpoint and --predictor, in order, no repeats."""
    names = [args.checkpoint] if args.checkpoint else []
    names += [p for p in (args.predictor or "").split(",") if p]
    return list(dict.fromkeys(names))


def make_predictor(name: str, args: argparse.Namespace):
    """(label, predictor) of a peer name or an exported segmenter file."""
    if name in PEERS:
        return name, peer_predictor(name)
    from dig_jax.export import load_segmenter

    segmenter = load_segmenter(name)
    predict = segmenter_predictor(
        segmenter, context_strategy=args.context, gesture_encoding=args.gesture_encoding,
        seed=args.seed, batch_size=args.batch_size,
    )  # fmt: skip
    return Path(name).stem, predict


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", default="", help="an exported .digjax segmenter file")
    parser.add_argument(
        "--predictor", default="", help=f"comma list of .digjax files and peers {PEERS}"
    )
    parser.add_argument("--datasets", default="grabcut,berkeley")
    parser.add_argument("--modes", default="creation,refinement")
    parser.add_argument(
        "--max-side", type=int, default=None, help="shrink photos to this long side (px)"
    )
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--context", default="oracle", choices=CONTEXT_STRATEGIES)
    parser.add_argument(
        "--gesture-encoding",
        default="model",
        choices=GESTURE_ENCODINGS,
        help="context models: gestures as trained (model), as skeleton clicks, or as a box",
    )
    parser.add_argument("--nog-kinds", default="", help="e.g. click,scribble: run NoG for these")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--gallery", type=int, default=0, help="draw N photos x kinds per predictor (PNG)"
    )
    parser.add_argument("--out", default="results/eval")
    args = parser.parse_args(argv)
    names = predictor_names(args)
    if not names:
        parser.error("name at least one predictor (--checkpoint FILE or --predictor ...)")
    if args.max_side is not None and args.max_side < 32:
        parser.error(f"--max-side must be >= 32 px, got {args.max_side}")
    if args.batch_size < 1:
        parser.error(f"--batch-size must be >= 1, got {args.batch_size}")
    nog_kinds = [k for k in args.nog_kinds.split(",") if k]
    bad = [k for k in nog_kinds if k.upper() not in GestureKind.__members__]
    if bad:
        parser.error(f"--nog-kinds: unknown {bad}; use {[k.name.lower() for k in GestureKind]}")
    modes = tuple(m for m in args.modes.split(",") if m)
    if not modes or set(modes) - {"creation", "refinement"}:
        parser.error(f"--modes: use creation and/or refinement, got {args.modes!r}")
    specs = [d for d in args.datasets.split(",") if d]
    if not specs:
        parser.error("--datasets: name at least one dataset")
    try:
        datasets = [(spec, load_dataset(spec)) for spec in specs]
        predictors = [make_predictor(name, args) for name in names]
    except ValueError as error:  # unknown source spec, unreadable or NaN checkpoint
        parser.error(str(error))
    try:
        results, counts, nogs, skipped = run(args, datasets, predictors, modes, nog_kinds)
    except FloatingPointError as error:  # NaN predictions: no table of 0.000 scores
        print(f"error: {error}; nothing was written", file=sys.stderr)
        return 1
    if not any(counts.values()) and not nogs:
        print(f"error: no sample was evaluated; {args.out} was left as it was", file=sys.stderr)
        return 1
    write_results(args, names, modes, results, counts, nogs, skipped)
    return 0


def run(
    args: argparse.Namespace, datasets: list, predictors: list, modes: tuple, nog_kinds: list
) -> tuple[dict, dict, dict, SkipLog]:
    """(results, counts, nogs, skipped) of every predictor on every (spec, records) dataset."""
    results, counts, nogs = {}, {}, {}
    skipped = SkipLog()
    for spec, records in datasets:
        samples = list(
            evaluation_samples(
                records, max_side=args.max_side, modes=modes, seed=args.seed, skipped=skipped
            )
        )
        items = nog_items(records, args.max_side, skipped) if nog_kinds else []
        if args.gallery > 0 and samples:
            from dig_jax.evaluation.gallery import save_prediction_gallery

            figure = Path(args.out) / f"gallery_{re.sub(r'[^A-Za-z0-9_.-]', '_', spec)}.png"
            save_prediction_gallery(samples, dict(predictors), figure, photos=args.gallery)
        for label, predict in predictors:
            key = f"{spec} {label}"
            results[key], counts[key] = evaluate_samples(
                predict, samples, batch_size=args.batch_size, total=len(samples), desc=key
            )
            for name in nog_kinds:
                out = nog(predict, items, int(GestureKind[name.upper()]), seed=args.seed)
                nogs[f"{key}/{name}"] = {
                    "NoG@85": float(out["noc"][:, 0].mean()),
                    "NoG@90": float(out["noc"][:, 1].mean()),
                    "NoF@90": int(out["failed"][:, 1].sum()),
                    "instances": len(items),
                }
    return results, counts, nogs, skipped


def write_results(
    args: argparse.Namespace, names: list[str], modes: tuple, results: dict, counts: dict,
    nogs: dict, skipped: SkipLog,
) -> None:  # fmt: skip
    """Print the tables; write `tables.md` and `metrics.json` (each replaced atomically)."""
    from dig_jax.outputs import write_text_atomic

    tables = []
    for phase, mode in (("create", "creation"), ("refine", "refinement")):
        if mode in modes:
            for score in ("iou_global", "rice_local", "rice_global"):
                tables.append(kind_table(results, score, phase))
    if nogs:
        tables.append("\n".join(f"{k}: {v}" for k, v in nogs.items()))
    text = "\n\n".join(tables)
    print(text)
    if skipped:
        print(f"\nskipped {len(skipped)} item(s); see metrics.json")
    out_dir = Path(args.out)
    write_text_atomic(out_dir / "tables.md", text + "\n")
    payload = {
        "predictors": names,
        "max_side": args.max_side,
        "context_strategy": args.context,
        "gesture_encoding": args.gesture_encoding,
        "samples": counts,
        "metrics": results,
        "nog": nogs,
        "skipped": skipped.items,
    }
    write_text_atomic(out_dir / "metrics.json", json.dumps(payload, indent=2))


if __name__ == "__main__":
    sys.exit(main())
