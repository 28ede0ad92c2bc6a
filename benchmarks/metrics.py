"""RICE + IoU over 256 masks of 512x512: jitted batched jnp vs a per-sample numpy loop.

Prints masks/s for both, measured in the same run, and their ratio.
    python benchmarks/metrics.py [--quick] [--n 256] [--size 512]
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from dig_jax.metrics import rice_scores


def _masks(rng: np.random.Generator, n: int, size: int) -> tuple[np.ndarray, ...]:
    yy, xx = np.mgrid[:size, :size]
    centres = rng.uniform(0.3 * size, 0.7 * size, (n, 2))
    radii = rng.uniform(0.1 * size, 0.3 * size, (n, 1, 1))
    dist = np.hypot(xx - centres[:, 0, None, None], yy - centres[:, 1, None, None])
    gt = (dist < radii).astype(np.uint8)
    gt[(np.abs(dist - radii) < 2)] = 255  # a void band, as in GrabCut
    pred = (dist < radii * rng.uniform(0.8, 1.2, (n, 1, 1))).astype(np.uint8)
    prev = (dist < radii * 0.9).astype(np.uint8)
    return pred, prev, gt


def _best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="64 masks, 1 repeat")
    args = parser.parse_args()
    if args.quick:
        args.n, args.repeats = 64, 1
    pred, prev, gt = _masks(np.random.default_rng(0), args.n, args.size)

    def numpy_loop() -> None:
        for i in range(args.n):
            rice_scores(pred[i], prev[i], gt[i], gt[i])

    batched = jax.jit(rice_scores)
    device_arrays = [jax.device_put(a) for a in (pred, prev, gt)]

    def jnp_batch() -> None:
        out = batched(device_arrays[0], device_arrays[1], device_arrays[2], device_arrays[2])
        jax.block_until_ready(out)

    jnp_batch()  # compile
    t_np = _best_of(numpy_loop, args.repeats)
    t_jx = _best_of(jnp_batch, args.repeats)
    ref = rice_scores(pred, prev, gt, gt)["rice_global"]
    got = np.asarray(batched(*map(jnp.asarray, (pred, prev, gt, gt)))["rice_global"])
    print(f"RICE+IoU, {args.n} masks of {args.size}x{args.size}, backend {jax.default_backend()}")
    print(f"  numpy per-sample loop : {args.n / t_np:10.1f} masks/s")
    print(f"  jitted batched jnp    : {args.n / t_jx:10.1f} masks/s")
    print(f"  ratio (jnp / numpy)   : {t_np / t_jx:10.2f}x")
    print(f"  max |difference|      : {np.abs(ref - got).max():.2e}")


if __name__ == "__main__":
    main()
