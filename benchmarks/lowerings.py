"""The models' CPU lowerings against what they replaced, measured in the same run.

    python benchmarks/lowerings.py [--iters 7] [--models hrnet18s,efficientnet_lite0] [--quick]
                                   [--layers-only]

Two tables, printing ms for the reference and the new lowering, and their ratio:
1. layers: forward, and forward + both gradients, of the layer shapes where the lowerings differ
   (1x1 at 64² with HRNet's stage-1 widths, HRNet's stride-2 stem and transition convolutions;
   at batch 2, HRNet's 3x3 layers at 512² input, where `Conv` also takes the small-batch kernel
   gradients, and one batch-8 3x3 stride-1 layer, where it does not),
   the backward with the train-step compiler options, the forward with XLA's defaults;
2. whole models, three variants (`variant`): before (`flax.linen.Conv`, no fusion breaks, the
   forward with XLA's default options), with `dig_jax.cpu.convs.Conv` only, and now (plus
   `dig_jax.cpu.materialize` at block outputs and `predict_compiler_options` for the forward):
   the train step (`dig_jax.train.train.train_step`, AdamW, train-step compiler options) of
   batch 8 at 256² and the inference forward of batch 1 at 512², all compiled in one process and
   timed interleaved after a warm-up; the largest loss / logit difference to 'before' is printed.
`--quick`: tiny widths at 64², 3 iterations (a smoke run for `make bench`).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from vs_torch import model_config, uint8_batch

from dig_jax.cpu import convs, predict_compiler_options, train_compiler_options
from dig_jax.cpu.materialize import fusion_breaks

# (batch, side, in channels, out channels, kernel, stride)
LAYERS = [
    (8, 64, 64, 256, 1, 1),
    (8, 64, 256, 64, 1, 1),
    (8, 128, 64, 64, 3, 2),
    (8, 64, 18, 36, 3, 2),
    (8, 32, 36, 72, 3, 2),
    (8, 64, 18, 18, 3, 1),
    # batch 2 (small-batch kernel gradients): HRNet-18s's layers at 512² input
    (2, 512, 6, 64, 3, 2),
    (2, 256, 64, 64, 3, 2),
    (2, 128, 64, 64, 3, 1),
    (2, 128, 256, 18, 3, 1),
    (2, 128, 256, 36, 3, 2),
    (2, 128, 18, 18, 3, 1),
    (2, 64, 36, 36, 3, 1),
    (2, 32, 72, 72, 3, 1),
]
QUICK_LAYERS = [(2, 16, 8, 16, 1, 1), (2, 16, 8, 8, 3, 2), (2, 16, 8, 8, 3, 1)]


@contextlib.contextmanager
def flax_lowering():
    """Trace `convs.Conv` as plain `flax.linen.Conv` inside the block."""
    original = convs.Conv._lowering
    convs.Conv._lowering = lambda self, x: "flax"
    try:
        yield
    finally:
        convs.Conv._lowering = original


def median_ms(fn, iters: int) -> float:
    jax.block_until_ready(fn())
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def _layer_times(x, cout: int, kernel: int, stride: int, flax: bool, iters: int):
    """(forward ms, forward + backward ms) of one layer, Flax's lowering when `flax`."""
    module = convs.Conv(cout, (kernel, kernel), strides=stride, use_bias=False)
    variables = module.init(jax.random.key(0), x)
    cotangent = jnp.ones(module.apply(variables, x).shape, jnp.float32)

    def backward(v, x):
        return jax.vjp(module.apply, v, x)[1](cotangent)

    with flax_lowering() if flax else contextlib.nullcontext():
        fwd = jax.jit(module.apply).lower(variables, x).compile()
        bwd = jax.jit(backward, compiler_options=train_compiler_options() or None)
        bwd = bwd.lower(variables, x).compile()
    return (median_ms(lambda: fwd(variables, x), iters),
            median_ms(lambda: bwd(variables, x), iters))  # fmt: skip


def layer_rows(layers, iters: int) -> list[str]:
    rows = ["| layer | forward Flax / Conv ms | ratio | fwd+bwd Flax / Conv ms | ratio |",
            "|---|---|---|---|---|"]  # fmt: skip
    for batch, side, cin, cout, kernel, stride in layers:
        rng = np.random.default_rng(0)
        x = jnp.asarray(rng.normal(size=(batch, side, side, cin)), jnp.float32)
        times = {name: _layer_times(x, cout, kernel, stride, name == "flax", iters)
                 for name in ("flax", "conv")}  # fmt: skip
        (f0, b0), (f1, b1) = times["flax"], times["conv"]
        label = f"{kernel}x{kernel}/{stride} {cin}->{cout}, {batch}x{side}²"
        rows.append(f"| {label} | {f0:.2f} / {f1:.2f} | {f0 / f1:.2f}× | {b0:.2f} / {b1:.2f} "
                    f"| {b0 / b1:.2f}× |")  # fmt: skip
    return rows


VARIANTS = ("before", "convs", "now")


@contextlib.contextmanager
def variant(name: str):
    """'before': Flax's convolutions, no fusion breaks, XLA's default options for the forward;
    'convs': `Conv`'s lowerings only; 'now': the models as they are (`Conv`, `materialize`,
    `predict_compiler_options`)."""
    with contextlib.ExitStack() as stack:
        if name == "before":
            stack.enter_context(flax_lowering())
        if name != "now":
            stack.enter_context(fusion_breaks(False))
        yield


def _train_callable(config, batch_size: int, side: int, name: str):
    from _vs_torch_runners import random_like

    from dig_jax.models.interactive import build_segmenter
    from dig_jax.train.state import make_optimizer
    from dig_jax.train.step import init_state, train_step

    model = build_segmenter(config.model)
    tx = make_optimizer(config.optim, 1000)
    shape = (batch_size, side, side, model.in_channels)
    abstract = jax.eval_shape(functools.partial(init_state, model, tx, shape), jax.random.key(0))
    state = jax.device_put(random_like(abstract))
    n = batch_size
    batch = {**uint8_batch(n, side), "gesture_kind": np.zeros(n, np.int32),
             "context": np.ones(n, np.int32), "has_prev": np.zeros(n, bool)}  # fmt: skip
    step = jax.jit(
        functools.partial(train_step, model=model, input_kind="gesture", loss_config=config.loss),
        compiler_options=train_compiler_options() or None,
    )
    with variant(name):
        compiled = step.lower(state, batch).compile()
    return lambda: compiled(state, batch), lambda out: out[1]["loss"]


def _forward_callable(config, batch_size: int, side: int, name: str):
    from _vs_torch_runners import random_like

    from dig_jax.models.interactive import build_segmenter
    from dig_jax.prompts import batch_to_input

    model = build_segmenter(config.model)
    x0 = jnp.zeros((1, 64, 64, model.in_channels))
    variables = random_like(jax.eval_shape(lambda: model.init(jax.random.key(0), x0, train=False)))
    batch = {k: v for k, v in uint8_batch(batch_size, side).items() if k != "target"}
    options = {} if name != "now" else predict_compiler_options()
    fn = jax.jit(lambda v, b: model.apply(v, batch_to_input(b, "gesture"), train=False),
                 compiler_options=options or None)  # fmt: skip
    with variant(name):
        compiled = fn.lower(variables, batch).compile()
    return lambda: compiled(variables, batch), lambda out: jax.tree.leaves(out)[0]


def model_rows(models, cases, quick: bool, iters: int) -> list[str]:
    rows = ["| model | case | before ms | `Conv` ms | now ms | speed-up `Conv` / now "
            "| max abs difference |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for name in models:
        config = model_config(name, quick)
        for label, kind, batch_size, side in cases:
            build = _train_callable if kind == "train" else _forward_callable
            calls = {v: build(config, batch_size, side, v) for v in VARIANTS}
            values = [value(call()) for call, value in calls.values()]
            difference = max(float(jnp.max(jnp.abs(values[0] - v))) for v in values[1:])
            times = {v: [] for v in VARIANTS}
            for _ in range(iters):  # interleaved: drift on the machine hits every variant
                for v, (call, _) in calls.items():
                    start = time.perf_counter()
                    jax.block_until_ready(call())
                    times[v].append(time.perf_counter() - start)
            ms = {v: 1e3 * statistics.median(t) for v, t in times.items()}
            rows.append(
                f"| {name} | {label} | {ms['before']:.1f} | {ms['convs']:.1f} | {ms['now']:.1f} "
                f"| {ms['before'] / ms['convs']:.2f}× / {ms['before'] / ms['now']:.2f}× "
                f"| {difference:.1e} |"
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=7)
    parser.add_argument("--models", default="hrnet18s,efficientnet_lite0")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--layers-only", action="store_true", help="the layer table alone")
    args = parser.parse_args(argv)
    jax.config.update("jax_platforms", "cpu")
    iters = 3 if args.quick else args.iters
    if args.quick:
        cases = [("train b2 64", "train", 2, 64), ("forward b1 64", "forward", 1, 64)]
    else:
        cases = [("train b8 256", "train", 8, 256), ("forward b1 512", "forward", 1, 512)]
    print(f"jax {jax.__version__}, {jax.devices()[0].device_kind}, median of {iters}")
    print("\n".join(layer_rows(QUICK_LAYERS if args.quick else LAYERS, iters)))
    if args.layers_only:
        return 0
    print()
    print("\n".join(model_rows(args.models.split(","), cases, args.quick, iters)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
