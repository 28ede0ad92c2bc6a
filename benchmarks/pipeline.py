"""On-the-fly DIG samples at 512²: per-core cost against a reference commit; grain throughput.

    .venv/bin/python benchmarks/pipeline.py [--quick] [--size 512] [--against REF] [--sources ...]

1. Sample making, per core: `SampleTransform` (region, SLIC prior, corrections, gesture,
   rasterisation, zoom crop, distance map, flip) on records already decoded (file reading and
   JPEG decoding are not the sample's cost), CPU seconds per sample of this process. The same
   measurement runs on the code of `--against` (default: the commit before the speed work),
   checked out into a temporary git worktree and run in a child process on the same records,
   in `--rounds` alternating rounds (medians), so the ratio compares both on this machine in
   this run. Both must give the same samples
   (`tests/data/test_sample_bytes.py` pins the bytes); the digests of the samples made here are
   printed side by side.
2. Samples/s of `make_dataset` with 0, 1 and 2 grain workers (file decoding included); ratios
   against worker_count=0, read_threads=0 in the same run.

Real photos are added to the sources in the full run when `dig_jax.paths.data_root()` holds them.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = "d8b92bd"  # last commit before the data-path speed work


def records(sources: list[str], per_source: int, size: int) -> list:
    """Up to `per_source` records of each source, decoded once."""
    from dig_jax.data.pipeline import resolve_source

    out = []
    for spec in sources:
        out += resolve_source(spec, image_size=(size, size))[:per_source]
    return out


def sample_cost(sources: list[str], per_source: int, size: int, repeats: int) -> dict:
    """CPU ms per sample of `SampleTransform` on decoded records, and a digest of the samples."""
    from dig_jax.data.pipeline import SampleTransform

    recs = records(sources, per_source, size)
    for rec in recs:
        loaded = rec.load()
        object.__setattr__(rec, "load", lambda loaded=loaded: loaded)  # decode once
    transform = SampleTransform((size, size), 0.5, 0.3, tuple(range(5)), 640, augment=True)
    digest = hashlib.sha256()

    def run(seed: int) -> tuple[int, float]:
        """(samples made, CPU seconds in `transform`); hashing is not timed."""
        made, cpu = 0, 0.0
        for i, rec in enumerate(recs):
            start = time.process_time()
            sample = transform(rec, np.random.default_rng([seed, i]))
            cpu += time.process_time() - start
            if sample is not None:
                made += 1
                for key in sorted(sample):
                    if isinstance(sample[key], np.ndarray):
                        digest.update(np.ascontiguousarray(sample[key]).tobytes())
        return made, cpu

    run(99)  # warm-up: imports, caches
    runs = [run(seed) for seed in range(repeats)]
    made, cpu = sum(r[0] for r in runs), sum(r[1] for r in runs)
    return {"ms_per_sample": cpu / made * 1e3, "samples": made, "digest": digest.hexdigest()[:16]}


@contextlib.contextmanager
def reference_tree(ref: str):
    """A temporary git worktree of commit `ref`, removed on exit."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "ref"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), ref],
                       check=True, capture_output=True)  # fmt: skip
        try:
            yield tree
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                           capture_output=True)  # fmt: skip


def reference_cost(tree: Path, args: argparse.Namespace, sources: list[str]) -> dict:
    """`sample_cost` on the code checked out in `tree`, in a child process."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    env.setdefault("DIG_JAX_DATA", str(_data_root()))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--size", str(args.size),
           "--per-source", str(args.per_source), "--repeats", str(args.repeats), "--sources",
           *sources]  # fmt: skip
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tree.parent)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _data_root() -> Path:
    from dig_jax.paths import data_root

    return data_root().resolve()


def samples_per_second(cfg: dict, batches: int) -> float:
    from dig_jax.data.pipeline import make_dataset

    it = iter(make_dataset(cfg, "train"))
    # Start-up is not timed: worker spawn, and one batch from every worker (each process loads
    # numba's compiled kernels once, ~0.4 s, on its first sample).
    for _ in range(max(1, cfg.get("worker_count", 0)) + 1):
        next(it)
    start = time.perf_counter()
    for _ in range(batches):
        next(it)
    elapsed = time.perf_counter() - start
    if hasattr(it, "close"):
        it.close()
    return batches * cfg["batch_size"] / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="few samples, procedural only")
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--sources", nargs="*", default=None)
    parser.add_argument("--against", default=REFERENCE, help="git commit of the reference code")
    parser.add_argument("--per-source", type=int, default=None, help="records per source")
    parser.add_argument("--repeats", type=int, default=None, help="seeds per record")
    parser.add_argument("--rounds", type=int, default=None, help="alternating rounds per side")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.per_source = args.per_source or (4 if args.quick else 16)
    args.repeats = args.repeats or (1 if args.quick else 3)
    args.rounds = args.rounds or (1 if args.quick else 5)
    if args.child:
        print(json.dumps(sample_cost(args.sources, args.per_source, args.size, args.repeats)))
        return
    from dig_jax.paths import has_data

    sources = args.sources or ["procedural:200"]
    if args.sources is None and not args.quick and has_data("coco_mval"):
        sources += ["coco_mval", "bsds500_regions/train"]
    print(f"sources={sources} size={args.size}")
    print(f"1. sample making on decoded records ({args.per_source} per source x {args.repeats} "
          f"seeds), CPU ms per sample; {args.rounds} alternating rounds:")  # fmt: skip
    ours, refs = [], []
    with reference_tree(args.against) as tree:
        for _ in range(args.rounds):  # alternated, so a slow spell of the machine hits both
            ours.append(sample_cost(sources, args.per_source, args.size, args.repeats))
            refs.append(reference_cost(tree, args, sources))
    mine = statistics.median(r["ms_per_sample"] for r in ours)
    print(f"   this tree : {mine:7.2f} ms  (median; {ours[0]['samples']} samples, digest "
          f"{ours[0]['digest']})")  # fmt: skip
    failed = [r["error"] for r in refs if "error" in r]
    if failed:
        print(f"   {args.against}: failed ({failed[0]})")
    else:
        theirs = statistics.median(r["ms_per_sample"] for r in refs)
        same = all(r["digest"] == ours[0]["digest"] for r in ours + refs)
        ratios = [r["ms_per_sample"] / o["ms_per_sample"] for o, r in zip(ours, refs, strict=True)]
        print(f"   {args.against:<10}: {theirs:7.2f} ms  (median; "
              f"{'same samples' if same else 'DIFFERENT samples'})\n"
              f"   speed-up  : {statistics.median(ratios):.2f}x  (median of the rounds' ratios: "
              f"{' '.join(f'{x:.2f}' for x in ratios)}; ratio of the medians "
              f"{theirs / mine:.2f}x)")  # fmt: skip
    batches = 3 if args.quick else 12
    base = dict(sources=sources, image_size=args.size, batch_size=4, prior_prob=0.5,
                multi_region_prob=0.3, shard=(0, 1), seed=0)  # fmt: skip
    configs = [("workers=0 threads=0", 0, 0), ("workers=0 threads=2", 0, 2),
               ("workers=1 threads=0", 1, 0), ("workers=2 threads=0", 2, 0)]  # fmt: skip
    print(f"2. make_dataset, batch 4, {batches} batches (decoding included):")
    reference = None
    for name, workers, threads in configs:
        rate = samples_per_second(dict(base, worker_count=workers, read_threads=threads), batches)
        reference = reference or rate
        print(f"   {name:>20}: {rate:7.1f} samples/s  ({rate / reference:4.2f}x)")


if __name__ == "__main__":
    main()
