"""Samples/s of the on-the-fly data pipeline at 512x512 with 0, 1 and 2 grain workers.

    .venv/bin/python benchmarks/pipeline.py [--quick] [--size 512] [--sources procedural ...]

Each configuration is timed after its first batch (process start-up excluded); ratios are
against worker_count=0, read_threads=0 measured in the same run. Real photos are added to the
sources in the full run when `dig_jax.paths.data_root()` holds them.
"""

from __future__ import annotations

import argparse
import time

from dig_jax.data.pipeline import make_dataset
from dig_jax.paths import has_data


def samples_per_second(cfg: dict, batches: int) -> float:
    ds = make_dataset(cfg, "train")
    it = iter(ds)
    next(it)  # start-up, worker spawn and first batch are not timed
    start = time.perf_counter()
    for _ in range(batches):
        next(it)
    elapsed = time.perf_counter() - start
    if hasattr(it, "close"):
        it.close()
    return batches * cfg["batch_size"] / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="few batches, procedural only")
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--sources", nargs="*", default=None)
    args = parser.parse_args()
    sources = args.sources or ["procedural:200"]
    if args.sources is None and not args.quick and has_data("coco_mval"):
        sources += ["coco_mval", "bsds500_regions/train"]
    batches = 3 if args.quick else 12
    base = dict(sources=sources, image_size=args.size, batch_size=4, prior_prob=0.5,
                multi_region_prob=0.3, shard=(0, 1), seed=0)  # fmt: skip
    configs = [("workers=0 threads=0", 0, 0), ("workers=0 threads=2", 0, 2),
               ("workers=1 threads=0", 1, 0), ("workers=2 threads=0", 2, 0)]  # fmt: skip
    print(f"sources={sources} size={args.size} batch=4 batches={batches}")
    reference = None
    for name, workers, threads in configs:
        rate = samples_per_second(dict(base, worker_count=workers, read_threads=threads), batches)
        reference = reference or rate
        print(f"{name:>22}: {rate:7.1f} samples/s  ({rate / reference:4.2f}x)")


if __name__ == "__main__":
    main()
