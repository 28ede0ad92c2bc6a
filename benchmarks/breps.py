"""BREPS attack cost on a real segmenter: compile vs run, per instance against its 50 gradients.

    python benchmarks/breps.py [--checkpoint FILE.digjax] [--batch 4] [--steps 50] [--quick]

The model is the shipped default checkpoint (`dig_jax.paths.shipped_checkpoint()`) or
`--checkpoint`, at its working size, through the same `predict_logits_fn` and box encoder the
`python -m dig_jax.attack` CLI uses (`--quick`: a tiny random HRNet at 64², 5 steps). Inputs are
random photos with a rectangle object (the cost does not depend on the content).

Printed, all measured in this run:
- reference: one forward + backward of the attack objective (soft Dice of the model's mask for
  an encoded box, gradient in the box), jitted with XLA's default options and with the gradient
  options the attack step uses, the faster of the two; the attack needs `steps` of them plus a
  forward;
- compile time of the attack (ahead of time), one instance and a vmapped batch;
- run time per instance, one at a time and batched, and its ratio to `steps` forward+backward
  passes (the target: at most 1.3x) and batched vs one at a time (target: at least 1x), both
  timed in interleaved pairs (one instance, then a batch) after a warm-up call of each;
- the public `breps_attack` called twice with the same callables on new instances: the second
  call must not compile again (its time is run time only).
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from dig_jax.cpu import train_compiler_options
from dig_jax.robustness.breps.attack import (
    BREPS_GAMMA,
    _compiled,
    attack_lr,
    breps_attack,
    soft_dice,
)


def load_model(args: argparse.Namespace):
    """(predict_logits, box encoder, size, description)."""
    from dig_jax import load_segmenter
    from dig_jax.export import LoadedSegmenter
    from dig_jax.paths import shipped_checkpoint
    from dig_jax.prompts.soft import box_encoder

    if args.quick:
        from dig_jax.train.config import base_config

        config = base_config("tiny")
        config.image_size = 64
        model_config = config.model
        from dig_jax.models.interactive import build_segmenter

        model = build_segmenter(model_config)
        x = jnp.zeros((1, 64, 64, model.in_channels))
        variables = model.init(jax.random.key(0), x, train=False)
        seg = LoadedSegmenter(config, jax.device_get(variables))
        name = "tiny random HRNet (quick)"
    else:
        path = args.checkpoint or shipped_checkpoint()
        if path is None:
            raise SystemExit("breps benchmark: no checkpoint (pass --checkpoint FILE.digjax)")
        seg = load_segmenter(path)
        name = str(path)
    encoder = box_encoder(seg.input_kind, seg.config.model.get("context_encoding", "gesture"))
    return seg.predict_logits_fn(), encoder, int(args.size or seg.size), name


def make_data(batch: int, size: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, (batch, size, size, 3), dtype=np.uint8)
    gts = np.zeros((batch, size, size), np.uint8)
    for i in range(batch):
        y0, x0 = rng.integers(size // 8, size // 3, 2)
        y1, x1 = rng.integers(size // 2, size - size // 8, 2)
        gts[i, y0:y1, x0:x1] = 1
    return images, gts


def median_time(fn, repeats: int) -> float:
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny random model, 64², 5 steps")
    parser.add_argument("--checkpoint", default=None)
    parser.add_argument("--size", type=int, default=None, help="default: the model's size")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--batch", type=int, default=None)
    args = parser.parse_args()
    steps = args.steps or (5 if args.quick else 50)
    batch = args.batch or (2 if args.quick else 4)
    predict, encode, size, name = load_model(args)
    images, gts = make_data(2 * batch, size)
    print(f"BREPS attack cost: {name}, {size}², {steps} steps, batch {batch}, "
          f"{jax.devices()[0].platform} ({jax.device_count()} device)")  # fmt: skip

    # Reference: one forward + backward of the objective, gradient in the box.
    image0, gt0 = jnp.asarray(images[0], jnp.float32), jnp.asarray(gts[0])
    box0 = jnp.asarray([size * 0.2, size * 0.2, size * 0.7, size * 0.7], jnp.float32)

    def objective(box):
        logits = predict(encode(box, image0)[None])[0]
        return soft_dice(jax.nn.sigmoid(logits), gt0)

    # The faster of XLA's default and the gradient compiler options the attack step uses.
    refs = []
    for options in (None, train_compiler_options() or None):
        grad = jax.jit(jax.value_and_grad(objective), compiler_options=options)
        start = time.perf_counter()
        grad_c = grad.lower(box0).compile()
        compile_s = time.perf_counter() - start
        run = functools.partial(grad_c, box0)
        refs.append((median_time(run, 3 if args.quick else 5), compile_s))
    t_fb, ref_compile = min(refs)
    budget = steps * t_fb

    # The attack, compiled ahead of time (the function breps_attack[_batch] runs).
    def compiled(batched: bool, n: int):
        fn = _compiled(predict, encode, steps, 1.0, BREPS_GAMMA, batched)
        lead = (n,) if batched else ()
        bounds = np.broadcast_to(np.array([0, 0, size, size], np.float32), (*lead, 4))
        lr = np.broadcast_to(np.float32(attack_lr(size, size)), lead)
        radius = np.broadcast_to(np.float32(5.0), lead)
        sel = slice(0, n) if batched else 0
        arrays = (images[sel], gts[sel], bounds, lr, radius)
        call_args = (*map(jnp.asarray, arrays), jnp.float32(0.1), jnp.float32(1.0))
        start = time.perf_counter()
        aot = fn.compile(*call_args)
        return aot, call_args, time.perf_counter() - start

    one, one_args, one_compile = compiled(False, 1)
    many, many_args, many_compile = compiled(True, batch)
    median_time(lambda: one(*one_args), 1)  # warm-up of both
    median_time(lambda: many(*many_args), 1)
    # Interleaved, so drift of the machine's speed hits both alike; the ratio is per pair.
    pairs = []
    for _ in range(2 if args.quick else 5):
        t = median_time(lambda: one(*one_args), 1)
        pairs.append((t, median_time(lambda: many(*many_args), 1) / batch))
    t_one = statistics.median(p[0] for p in pairs)
    t_many = statistics.median(p[1] for p in pairs)
    speedups = sorted(p[0] / p[1] for p in pairs)

    # The public API twice on new instances: the second call reuses the compiled attack.
    calls = []
    for i in (batch, batch + 1):
        start = time.perf_counter()
        jax.block_until_ready(breps_attack(predict, images[i], gts[i], steps=steps,
                                           encode_box=encode).iou)  # fmt: skip
        calls.append(time.perf_counter() - start)

    print(f"{'':34} {'compile s':>10} {'run s/instance':>15} {'/ ' + str(steps) + ' fwd+bwd':>13}")
    print(f"{'one forward+backward (reference)':34} {ref_compile:10.1f} {t_fb:15.3f} {'':>13}")
    print(f"  (default options {refs[0][0]:.3f} s, gradient options {refs[1][0]:.3f} s)")
    print(f"{'attack, one instance':34} {one_compile:10.1f} {t_one:15.2f} {t_one / budget:12.2f}x")
    print(f"{'attack, batch of ' + str(batch):34} {many_compile:10.1f} {t_many:15.2f} "
          f"{t_many / budget:12.2f}x")  # fmt: skip
    print(
        f"batched vs one at a time: {statistics.median(speedups):.2f}x faster per instance "
        f"(median of {len(pairs)} interleaved pairs, range {speedups[0]:.2f}-{speedups[-1]:.2f})"
    )
    # Both calls cost about the run time when neither compiles (the AOT step above already
    # traced the same function); a call that compiled again would add about `one_compile`.
    recompiled = max(calls) > t_one + 0.5 * one_compile
    reused = "compiled again" if recompiled else "run time only: the compilation was reused"
    print(f"breps_attack API on new instances: first call {calls[0]:.1f} s, "
          f"second call {calls[1]:.1f} s ({reused})")  # fmt: skip


if __name__ == "__main__":
    main()
