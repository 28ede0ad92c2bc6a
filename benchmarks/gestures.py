"""Gesture simulation + rasterisation at 512x512, numpy path vs batched jnp path, per kind.

numpy path: `simulate_creation` + `rasterize` (one compiled numba pass per gesture), one gesture
at a time, medians of several passes; its batch form: the same simulations, then
`rasterize_many` on all of them at once (same bytes; one [B, H, W] allocation).
jnp path: the same simulation (numpy), then `rasterize_batch` on a padded batch of 256 (jitted,
timed after a warm-up call). Both are printed in ms per gesture next to the DIG authors' CPU
figures (click 4 ms, scribble 9, loose lasso 35, tight lasso 23, rectangle 4) with the ratio
paper / ours (> 1: faster than the paper).

Masks: GrabCut objects resized to 512x512 when the real data is present, else random ellipses.
Usage: python benchmarks/gestures.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import numpy as np
from skimage import io
from skimage.draw import ellipse
from skimage.transform import resize

from dig_jax.gestures import (
    GestureKind,
    pad_gestures,
    rasterize,
    rasterize_batch,
    rasterize_many,
    simulate_creation,
)
from dig_jax.gestures.raster import rasterize_reference
from dig_jax.paths import data_root, has_data

SIZE = (512, 512)
BATCH = 256
PAPER_MS = {
    GestureKind.CLICK: 4.0,
    GestureKind.SCRIBBLE: 9.0,
    GestureKind.LOOSE_LASSO: 35.0,
    GestureKind.TIGHT_LASSO: 23.0,
    GestureKind.RECTANGLE: 4.0,
}


def load_masks(limit: int) -> tuple[list[np.ndarray], str]:
    """Up to `limit` masks uint8[512, 512]: GrabCut objects, or random ellipses without data."""
    if has_data("grabcut"):
        masks = []
        for path in sorted((data_root() / "grabcut" / "masks").glob("*.bmp"))[:limit]:
            m = io.imread(path)
            m = (m[..., 0] if m.ndim == 3 else m) == 255
            masks.append((resize(m, SIZE, order=0, anti_aliasing=False) > 0).astype(np.uint8))
        return masks, "GrabCut masks resized to 512x512"
    rng = np.random.default_rng(0)
    masks = []
    for _ in range(limit):
        m = np.zeros(SIZE, np.uint8)
        r, c = rng.integers(128, 384, 2)
        rr, cc = ellipse(r, c, rng.integers(30, 120), rng.integers(30, 120), SIZE)
        m[rr, cc] = 1
        masks.append(m)
    return masks, "random ellipses at 512x512 (real data not found)"


def simulate(kind: GestureKind, masks, n: int, rng) -> tuple[list, float]:
    """n gestures cycling over the masks, and the simulation time in ms per gesture."""
    start = time.perf_counter()
    gestures = [simulate_creation(kind, masks[i % len(masks)], rng) for i in range(n)]
    return gestures, (time.perf_counter() - start) / n * 1e3


def time_numpy(
    kind: GestureKind, masks, n: int, rng, repeats: int
) -> tuple[float, float, float, float]:
    """(simulation, rasterisation, reference rasterisation, `rasterize_many`) ms per gesture,
    each the median over `repeats` passes of n gestures (fresh draws for every pass; the
    reference, ~30x slower, once).

    One untimed gesture first (own rng): one-time costs such as loading numba's compiled
    kernels (~0.3 s from their cache) are not per-gesture costs."""
    warm = simulate_creation(kind, masks[0], np.random.default_rng(99))
    rasterize(warm, SIZE), rasterize_reference(warm, SIZE), rasterize_many([warm], SIZE)
    sims, rasts, manys = [], [], []
    for _ in range(repeats):
        gestures, sim_ms = simulate(kind, masks, n, rng)
        sims.append(sim_ms)
        start = time.perf_counter()
        for g in gestures:
            rasterize(g, SIZE)
        rasts.append((time.perf_counter() - start) / n * 1e3)
        start = time.perf_counter()
        rasterize_many(gestures, SIZE)
        manys.append((time.perf_counter() - start) / n * 1e3)
    start = time.perf_counter()
    for g in gestures:
        rasterize_reference(g, SIZE)
    reference = (time.perf_counter() - start) / n * 1e3
    return (statistics.median(sims), statistics.median(rasts), reference,
            statistics.median(manys))  # fmt: skip


def time_jnp(kind: GestureKind, masks, n_unique: int, rng, repeats: int) -> tuple[float, float]:
    """(simulation ms, rasterisation ms) per gesture in a batch of 256 (jitted, after warm-up)."""
    gestures, sim_ms = simulate(kind, masks, n_unique, rng)
    gestures = [gestures[i % n_unique] for i in range(BATCH)]
    longest = max(len(g.points) for g in gestures)
    n_max = 1 << int(np.ceil(np.log2(longest)))  # power-of-two buckets reuse compilations
    args = [jax.device_put(a) for a in pad_gestures(gestures, n_max)]
    rasterize_batch(*args, SIZE).block_until_ready()  # compile + warm-up
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        rasterize_batch(*args, SIZE).block_until_ready()
        runs.append((time.perf_counter() - start) / BATCH * 1e3)
    return sim_ms, statistics.median(runs)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer gestures (< 40 s)")
    args = parser.parse_args(argv)
    n_numpy, n_unique, repeats = (12, 48, 2) if args.quick else (64, BATCH, 5)
    masks, source = load_masks(50)
    rng = np.random.default_rng(0)
    print(f"{source}; jax backend: {jax.default_backend()}; batch {BATCH}")
    print(f"numpy path: {n_numpy} gestures per kind; jnp path: {n_unique} simulated, batch {BATCH}")
    header = (
        f"{'kind':<12} {'paper':>7} {'sim':>7} {'np rast':>8} {'ref rast':>9} {'np total':>9}"
        f" {'x paper':>8} {'many rast':>9} {'many tot':>9} {'x paper':>8}"
        f" {'jnp rast':>9} {'jnp total':>10} {'x paper':>8}"
    )
    print(header + "\n" + "-" * len(header))
    for kind in GestureKind:
        sim_np, rast_np, rast_ref, rast_many = time_numpy(kind, masks, n_numpy, rng, repeats)
        sim_j, rast_j = time_jnp(kind, masks, n_unique, rng, repeats)
        total_np, total_j = sim_np + rast_np, sim_j + rast_j
        paper = PAPER_MS[kind]
        print(
            f"{kind.name:<12} {paper:7.1f} {sim_np:7.2f} {rast_np:8.2f} {rast_ref:9.2f}"
            f" {total_np:9.2f}"
            f" {paper / total_np:8.1f} {rast_many:9.2f} {sim_np + rast_many:9.2f}"
            f" {paper / (sim_np + rast_many):8.1f}"
            f" {rast_j:9.3f} {total_j:10.2f} {paper / total_j:8.1f}"
        )
    print("times in ms per gesture; 'x paper' = paper ms / our ms (> 1 means faster); 'ref rast' =")
    print("rasterize_reference (the window rasteriser `rasterize` returns the same bytes as);")
    print("'many' = the same simulations, rasterised by one `rasterize_many` call on all of them")


if __name__ == "__main__":
    main()
