"""End-to-end `predict` latency on photos of several sizes, against the network alone.

    python benchmarks/predict_latency.py [--checkpoint FILE.digjax] [--repeats 5] [--quick]

The model is the shipped default checkpoint (`dig_jax.paths.shipped_checkpoint()`) or
`--checkpoint` (`--quick`: two small photo sizes, 2 repeats). Each photo is random noise with
an ellipse; the prompts are a click on the ellipse (a creation, so the focus pass runs when the
checkpoint has it on) and a lasso around it. Printed, all measured in this run, after one
warm-up call per shape (compiles excluded):

- reference: the network's forward pass alone on one crop at the working size (the jitted
  logits function `predict` calls);
- per photo size and prompt: median ms of `LoadedSegmenter.predict` (crop, encode, network,
  paste back at the photo's resolution) and its ratio to the reference.

Runs on whatever backend jax picks (CPU here, the GPU under `benchmarks/device.sh`).
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import numpy as np

from dig_jax import load_segmenter
from dig_jax.gestures import rasterize
from dig_jax.gestures.types import Gesture, GestureKind
from dig_jax.paths import shipped_checkpoint

SIZES = ((480, 640), (1080, 1920), (3000, 4000))


def _photo(shape: tuple[int, int], rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    h, w = shape
    image = rng.integers(0, 255, (h, w, 3), np.uint8)
    yy, xx = np.ogrid[:h, :w]
    inside = ((xx - w / 2) / (w / 5)) ** 2 + ((yy - h / 2) / (h / 4)) ** 2 < 1
    image[inside] = (200, 60, 40)
    return image, inside


def _prompts(shape: tuple[int, int]) -> dict[str, np.ndarray]:
    h, w = shape
    click = Gesture(GestureKind.CLICK, np.array([[w / 2, h / 2]], np.float32), False)
    t = np.linspace(0, 2 * np.pi, 64, endpoint=False)
    ring = np.stack([w / 2 + 1.2 * w / 5 * np.cos(t), h / 2 + 1.2 * h / 4 * np.sin(t)], 1)
    lasso = Gesture(GestureKind.LOOSE_LASSO, ring.astype(np.float32), True)
    return {"click": rasterize(click, shape), "lasso": rasterize(lasso, shape)}


def _median_ms(fn, repeats: int) -> float:
    fn()  # warm-up: compiles for this shape
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=None)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    seg = load_segmenter(args.checkpoint or shipped_checkpoint())
    repeats = 2 if args.quick else args.repeats
    sizes = SIZES[:2] if args.quick else SIZES
    rng = np.random.default_rng(0)
    print(f"backend {jax.default_backend()}, working size {seg.size}, checkpoint "
          f"{args.checkpoint or shipped_checkpoint()}")  # fmt: skip

    x = np.zeros((1, seg.size, seg.size, seg.model.in_channels), np.float32)
    reference = _median_ms(lambda: np.asarray(seg.logits(x)), repeats)
    print(f"reference: network forward on one {seg.size}² crop: {reference:.1f} ms")
    print("| photo | prompt | predict ms | × forward |")
    print("|---|---|---:|---:|")
    for shape in sizes:
        image, _ = _photo(shape, rng)
        for name, gesture in _prompts(shape).items():
            ms = _median_ms(lambda i=image, g=gesture: seg.predict(i, g), repeats)
            print(f"| {shape[1]}x{shape[0]} | {name} | {ms:.1f} | {ms / reference:.2f} |")


if __name__ == "__main__":
    main()
