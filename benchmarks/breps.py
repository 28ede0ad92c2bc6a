"""BREPS attack throughput: attacked instances/s, batched (vmap) vs one at a time, on CPU.

python benchmarks/breps.py [--quick]

Model: a small conv net (3x3x8 -> 3x3x8 -> 1x1) on the gesture-agnostic box encoding
(soft outline + analytic distance map, `encode_box_gesture`). Compile time is excluded
(ahead-of-time `lower().compile()` of the same jitted functions the API uses); the ratio
batched / sequential is printed per image size.
"""

from __future__ import annotations

import argparse
import time

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from dig_jax.robustness.breps import encode_box_gesture
from dig_jax.robustness.breps.attack import BREPS_GAMMA, _compiled


class SmallConv(nn.Module):
    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = jnp.concatenate([x[..., :3] / 255.0, x[..., 3:]], axis=-1)
        x = nn.relu(nn.Conv(8, (3, 3))(x))
        x = nn.relu(nn.Conv(8, (3, 3))(x))
        return nn.Conv(1, (1, 1))(x)[..., 0]


def make_predictor(size: int):
    model = SmallConv()
    params = model.init(jax.random.key(0), np.zeros((1, size, size, 6), np.float32))
    return lambda x: model.apply(params, x)


def make_data(batch: int, size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    images = rng.integers(0, 256, (batch, size, size, 3), dtype=np.uint8)
    gts = np.zeros((batch, size, size), np.uint8)
    for i in range(batch):
        y0, x0 = rng.integers(size // 8, size // 3, 2)
        y1, x1 = rng.integers(size // 2, size - size // 8, 2)
        gts[i, y0:y1, x0:x1] = 1
    return images, gts


def compiled_attack(predict, images, gts, steps: int, batched: bool):
    """AOT-compiled min attack (the function `breps_attack[_batch]` calls) and its arguments."""
    fn = _compiled(predict, encode_box_gesture, steps, 1.0, BREPS_GAMMA, batched)
    size = images.shape[-2]
    bounds = np.full((*images.shape[:-3], 2), size, np.float32)
    args = (images, gts, bounds, np.float32(9.0), np.float32(0.1), np.float32(1.0))
    return fn.lower(*args).compile(), args


def time_once(fn) -> float:
    start = time.perf_counter()
    jax.block_until_ready(fn())
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="256² only, 10 steps, batch 2")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--batch", type=int, default=None)
    args = parser.parse_args()
    steps = args.steps or (10 if args.quick else 50)
    batch = args.batch or (2 if args.quick else 4)
    sizes = (256,) if args.quick else (256, 512)
    rng = np.random.default_rng(0)
    print(f"BREPS attack, {steps} steps, batch {batch}, device {jax.devices()[0].platform}")
    print(
        f"{'size':>6} {'sequential inst/s':>18} {'batched inst/s':>15} {'batched/sequential':>19}",
        flush=True,
    )
    for size in sizes:
        predict = make_predictor(size)
        images, gts = make_data(batch, size, rng)
        one, one_args = compiled_attack(predict, images[0], gts[0], steps, batched=False)
        many, many_args = compiled_attack(predict, images, gts, steps, batched=True)
        singles = [(images[i], gts[i], *one_args[2:]) for i in range(batch)]
        t_seq = time_once(lambda: [one(*a) for a in singles])  # noqa: B023
        t_bat = time_once(lambda: many(*many_args))  # noqa: B023
        print(f"{size:>5}² {batch / t_seq:>18.2f} {batch / t_bat:>15.2f} {t_seq / t_bat:>18.2f}x")


if __name__ == "__main__":
    main()
