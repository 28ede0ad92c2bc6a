"""Build DIG samples from COCO-format annotations as an Apache Beam pipeline.

    python -m dig_jax.data.beam_build --coco-json instances.json --images DIR --out DATA_DIR \\
        [--image-size PX --seed N --limit N --kinds 0,4 --no-refinement --no-multi] \\
        [--runner DirectRunner --direct_num_workers 2 --direct_running_mode multi_processing]

Reads a COCO / LVIS instance file (the same JSON layout; polygons, RLE, `iscrowd` as void) with
`dig_jax.data.sources.coco_json` and writes the TFDS dataset `dig_samples` (ArrayRecord files)
under `--out`, which the pipeline reads with the source spec "tfds:DATA_DIR" and
`DigSamples.as_data_source()`. Regions are the instances, parts their connected components
(`dig_jax.data.regions`); photos keep their size unless `--image-size` is given.

It is TFDS's own Beam support: `DigSamplesBeam._split_generators` takes the pipeline and
returns one PCollection per split, and `download_and_prepare(download_config=DownloadConfig(
beam_options=...))` runs it (checked with apache-beam 2.77 and tensorflow-datasets 4.9.10: it
works without TensorFlow and with `file_format="array_record"`). Work is keyed and seeded per
record: record `i` of the file (images in the reader's order, sorted by image id) is built by
`dig_jax.data.build.build_one` from `numpy.random.default_rng([seed, 0, i])`, the seed
`dig_jax.data.build` gives it, and its samples get the keys `i << 32 | j`; TFDS writes the
examples sorted by key (the builder disables shuffling) and `SortedFeaturesWriter` writes each
one's features in a fixed order, so any split of the work across workers gives the same files,
and the same examples, byte for byte, as `python -m dig_jax.data.build --source
coco_json:FILE:DIR --tfds-dir D` (whose shards may be cut elsewhere). A small side
output (per record: which samples have a multi-region variant, the counters, a bad-item message)
is gathered into one file and turned into the dataset's `multi_index` metadata after the run.

Every argument that is not one of the flags above is a Beam pipeline option, passed as is
(`--runner DataflowRunner --project P --region R --temp_location gs://...`, `--runner
FlinkRunner --flink_master HOST:PORT`, `--runner SparkRunner ...`; untested here). The
annotation file and image folder must be readable at the same paths by every worker, and
`--out` writable by them.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import tensorflow_datasets as tfds
from etils import epath

from dig_jax.data.build import add_build_flags, build_one, check_build_flags, format_summary
from dig_jax.data.sources.coco_json import scan_coco_json
from dig_jax.data.sources.dig_json import DigEntry
from dig_jax.data.sources.record import Record
from dig_jax.data.tfds_builder import DigSamples, dig_example

KEY_BITS = 32  # example key = record index << KEY_BITS | sample index within the record
_INDEX_FILE = "beam_index.json"  # the side output, read back and removed after the run


def _beam() -> Any:
    """The apache_beam module; ValueError with the install command when it is missing."""
    try:
        import apache_beam
    except ImportError:
        raise ValueError("apache_beam is not installed: pip install -e '.[beam]'") from None
    return apache_beam


@dataclasses.dataclass(frozen=True)
class CocoBuild:
    """What to build (picklable: every worker receives it)."""

    coco_json: str
    images: str
    seed: int = 0
    image_size: int | None = None
    limit: int | None = None
    kinds: tuple[int, ...] = tuple(range(5))
    refinement: bool = True
    multi: bool = True

    @property
    def spec(self) -> str:
        """The source spec `dig_jax.data.build` names the same files by."""
        return f"coco_json:{self.coco_json}:{self.images}"


@functools.lru_cache(maxsize=2)
def _records(coco_json: str, images: str, limit: int | None) -> tuple[list[Record], list[str]]:
    """The file's records (first `limit`) and its bad items; read once per worker process."""
    records, problems = scan_coco_json(coco_json, images)
    return (records if limit is None else records[:limit]), problems


def record_examples(element: tuple[int, str], config: CocoBuild) -> Iterator[Any]:
    """Build record `index`: yields its samples (`(key, example)`, main output "train"), their
    multi-region variants (tagged "multi", the key of their sample) and one summary (tagged
    "index": `(index, {"multi": [bool per sample], "counts": {...}, "bad": message or None,
    "seconds": wall time, "cpu": the worker's CPU time})`)."""
    beam = _beam()
    index, image_id = element
    start, cpu = time.perf_counter(), time.process_time()
    record = _records(config.coco_json, config.images, config.limit)[0][index]
    if record.image_id != image_id:
        raise ValueError(f"{config.coco_json} changed during the build (record {index})")
    try:
        built = build_one(record, index, source_index=0, seed=config.seed,
                          image_size=config.image_size, kinds=config.kinds,
                          refinement=config.refinement, multi=config.multi)  # fmt: skip
    except ValueError as err:
        summary = dict(multi=[], counts={}, bad=str(err), seconds=time.perf_counter() - start,
                       cpu=time.process_time() - cpu)  # fmt: skip
        yield beam.pvalue.TaggedOutput("index", (index, summary))
        return
    row, image = built.writer.row, built.loaded.image
    flags = []
    for j in range(len(built.writer)):
        entry = DigEntry(row, j, record.describe)
        key = index << KEY_BITS | j
        yield key, dig_example(entry, image)
        flags.append(entry.has_multi)
        if entry.has_multi:
            variant = dig_example(entry.multi_variant(), image)
            yield beam.pvalue.TaggedOutput("multi", (key, variant))
    beam.metrics.Metrics.counter("dig_jax", "records built").inc()
    summary = dict(multi=flags, counts=dict(built.counts), bad=None,
                   seconds=time.perf_counter() - start, cpu=time.process_time() - cpu)  # fmt: skip
    yield beam.pvalue.TaggedOutput("index", (index, summary))


def _write_index(summaries: list, path: str) -> None:
    epath.Path(path).write_text(json.dumps(sorted(summaries, key=lambda s: s[0])))


class DigSamplesBeam(DigSamples, skip_registration=True):
    """`DigSamples` built from a COCO-format file by a Beam pipeline (same name, version and
    features: the result reads as any `dig_samples` dataset)."""

    name = "dig_samples"

    def __init__(self, *, config: CocoBuild, **kwargs):
        self._config = config
        self.table: dict[str, collections.Counter] = {}
        self.worker_seconds = self.worker_cpu = 0.0
        self.records = 0  # records the workers processed (bad ones included)
        super().__init__(**kwargs)

    def _split_generators(self, dl_manager, pipeline):
        del dl_manager
        beam, config = _beam(), self._config
        records, problems = _records(config.coco_json, config.images, config.limit)
        if not records:
            raise ValueError(f"--coco-json: {config.coco_json} has no image with annotations")
        self._problems = problems
        keys = [(i, r.image_id) for i, r in enumerate(records)]
        built = (
            pipeline
            | "Records" >> beam.Create(keys)  # Create spreads the keys over the workers
            | "Build" >> beam.FlatMap(record_examples, config=config).with_outputs(
                "multi", "index", main="train")
        )  # fmt: skip
        index_path = str(self.data_path / _INDEX_FILE)
        _ = (
            built.index
            | "Gather" >> beam.combiners.ToList()
            | "WriteIndex" >> beam.Map(_write_index, path=index_path)
        )
        splits = {"train": built.train}
        if config.multi:
            splits["multi"] = built.multi
        return splits

    def _process_pipeline_result(self, pipeline_result) -> None:
        """Turn the gathered summaries into `multi_index` (per train example, its variant's
        index in split "multi" or -1), the per-source counters and the bad items."""
        del pipeline_result
        path = self.data_path / _INDEX_FILE
        summaries = json.loads(path.read_text())
        path.unlink()
        stats = collections.Counter({"bad items": len(self._problems)})
        for problem in self._problems:
            print(f"bad item: {problem}", file=sys.stderr)
        multi_index, variants = [], 0
        self.records = len(summaries)
        for _, summary in summaries:
            self.worker_seconds += summary["seconds"]
            self.worker_cpu += summary["cpu"]
            if summary["bad"]:
                print(f"bad item: {summary['bad']}", file=sys.stderr)
                stats["bad items"] += 1
                continue
            stats.update(summary["counts"])
            stats["images"] += 1
            for has_multi in summary["multi"]:
                multi_index.append(variants if has_multi else -1)
                variants += has_multi
        self.table = {self._config.spec: stats}
        self.info.metadata["multi_index"] = multi_index
        self.info.metadata["summary"] = {k: dict(v) for k, v in self.table.items()}


def beam_build(
    config: CocoBuild, out: str | Path, beam_args: list[str] | None = None
) -> DigSamplesBeam:
    """Run the pipeline (Beam options `beam_args`, default the DirectRunner) and write
    `out/dig_samples/<version>/`; returns the prepared builder (`.table`: the counters,
    `.worker_seconds` / `.worker_cpu`: the summed per-record wall / CPU time). ValueError, one
    line, for bad paths or an `out` that already holds this dataset."""
    if not Path(config.coco_json).is_file():
        raise ValueError(f"--coco-json: not found: {config.coco_json}")
    if not Path(config.images).is_dir():
        raise ValueError(f"--images: not a folder: {config.images}")
    out = str(out)  # a bucket URL stays one (pathlib would fold its "//")
    if "://" not in out and Path(out).exists() and not Path(out).is_dir():
        raise ValueError(f"--out {out} is a file, not a folder")
    beam = _beam()
    builder = DigSamplesBeam(config=config, data_dir=out)
    if epath.Path(builder.data_dir).exists():
        raise ValueError(f"--out {out} already holds {builder.data_dir}; remove it or choose "
                         "another --out")  # fmt: skip
    options = beam.options.pipeline_options.PipelineOptions(beam_args or [])
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(beam_options=options))
    return builder


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        allow_abbrev=False,  # a Beam option must never be taken for an abbreviated flag
        epilog="Any other --flag is a Beam pipeline option (e.g. --runner, "
        "--direct_num_workers, --direct_running_mode, Dataflow / Flink / Spark options).",
    )
    parser.add_argument("--coco-json", required=True, help="COCO / LVIS instance annotations")
    parser.add_argument("--images", required=True, help="folder of the images' file_name")
    parser.add_argument("--out", required=True, help="TFDS data dir (gets dig_samples/)")
    add_build_flags(
        parser,
        image_size="resize to a square (px); default: each photo's own size",
        limit="first N images (>= 1)",
    )
    args, beam_args = parser.parse_known_args(argv)
    if beam_args and not beam_args[0].startswith("--"):
        parser.error(f"unexpected argument {beam_args[0]!r} (Beam options are --name value)")
    kinds = check_build_flags(parser, args)
    config = CocoBuild(str(args.coco_json), str(args.images), seed=args.seed,
                       image_size=args.image_size, limit=args.limit, kinds=kinds,
                       refinement=not args.no_refinement, multi=not args.no_multi)  # fmt: skip
    start = time.perf_counter()
    try:
        builder = beam_build(config, args.out, beam_args)
    except Exception as error:  # bad paths, or a failed pipeline (Beam re-raises the worker's)
        text = str(error)
        if "generated examples is 0 for split train" in text:
            print("error: no sample was built (no region >= 300 px, or only bad items)",
                  file=sys.stderr)  # fmt: skip
        elif "generated examples is 0 for split multi" in text:
            print("error: no multi-region variant was built: no photo has two disjoint regions "
                  ">= 300 px (rerun with --no-multi), or none has one",
                  file=sys.stderr)  # fmt: skip
        elif isinstance(error, ValueError):
            print(f"error: {_one_line(error)}", file=sys.stderr)
        else:
            raise
        return 1
    wall = time.perf_counter() - start
    records = builder.records
    print(format_summary(builder.table))
    print(f"{records} records in {wall:.1f} s wall; per record {builder.worker_seconds:.1f} s "
          f"wall, {builder.worker_cpu:.1f} s CPU in the workers: "
          f"{records / max(builder.worker_cpu, 1e-9):.2f} records/s per worker (CPU)")  # fmt: skip
    print(f"wrote {builder.data_dir}")
    return 0


def _one_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


if __name__ == "__main__":
    # run the module's own copy: TFDS finds a builder's package, and Beam workers import the
    # functions they run, by module name, which `__main__` is not
    from dig_jax.data import beam_build

    sys.exit(beam_build.main())
