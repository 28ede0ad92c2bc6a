"""The CPU switch (`DIG_JAX_CPU`): train step and forward pass of the segmenters with every
setting, as ratios against plain Flax / lax (`0`) measured in the same process, alternating.

    python benchmarks/cpu_switch.py            # Lite0 and HRNet-18s, batch 8 at 224² (minutes)
    python benchmarks/cpu_switch.py --quick    # the tiny HRNet at 64², a few calls (make bench)

Each setting's functions are traced under it (the switch is read when tracing), then called in
turns: one call of each setting per round, so a slow phase of the machine hits all alike.
Prints the median seconds per call and its ratio to `0` (above 1: faster than plain).
"""

from __future__ import annotations

import argparse
import functools
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from dig_jax import cpu
from dig_jax.cpu import native
from dig_jax.models.interactive import build_segmenter
from dig_jax.train.config import base_config, with_lite_backbone
from dig_jax.train.state import make_optimizer
from dig_jax.train.step import init_state, train_step

SETTINGS = ("0", "auto", "native")


def _config(name: str, quick: bool):
    if quick:
        return base_config("tiny")
    config = base_config("offline")
    return with_lite_backbone(config) if name == "lite" else config


def _batch(batch: int, size: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    maps = lambda: rng.integers(0, 2, (batch, size, size)).astype(np.uint8)
    return {
        "image": rng.integers(0, 256, (batch, size, size, 3)).astype(np.uint8),
        "gesture": maps(), "distance": rng.integers(0, 256, (batch, size, size)).astype(np.uint8),
        "prev_mask": maps(), "target": maps(), "region": maps(), "local": maps(),
        "void": np.zeros((batch, size, size), np.uint8), "has_prev": np.ones(batch, bool),
        "gesture_kind": np.zeros(batch, np.int32), "context": np.ones(batch, np.int32),
    }  # fmt: skip


def _functions(config, batch: dict, setting: str):
    """(train step, forward) jitted and compiled under `setting`."""
    os.environ[cpu.SWITCH_ENV] = setting
    model = build_segmenter(config.model)
    tx = make_optimizer(config.optim, config.total_steps)
    size = batch["image"].shape[1]
    init = functools.partial(init_state, model, tx, (len(batch["image"]), size, size, 6))
    state = jax.jit(init)(jax.random.key(0))
    step = functools.partial(train_step, model=model, input_kind="gesture", loss_config=config.loss)
    step = jax.jit(step, compiler_options=cpu.train_compiler_options() or None)
    step = step.lower(state, batch).compile()
    from dig_jax.prompts import batch_to_input

    def forward(variables, b):
        return model.apply(variables, batch_to_input(b, "gesture"), train=False)["mask"]

    forward = jax.jit(forward, compiler_options=cpu.predict_compiler_options() or None)
    forward = forward.lower(state.variables, batch).compile()
    return state, step, forward


def measure(name: str, quick: bool, rounds: int) -> None:
    config = _config(name, quick)
    size, batch_size = (64, 4) if quick else (224, 8)
    batch = _batch(batch_size, size)
    settings = [s for s in SETTINGS if s != "native" or native.load_kernels()]
    compiled = {s: _functions(config, batch, s) for s in settings}
    times: dict[str, dict[str, list[float]]] = {s: {"step": [], "forward": []} for s in settings}
    for _ in range(rounds):
        for s in settings:
            state, step, forward = compiled[s]
            start = time.perf_counter()
            _, metrics = step(state, batch)
            jax.block_until_ready(metrics)
            times[s]["step"].append(time.perf_counter() - start)
            start = time.perf_counter()
            forward(state.variables, batch).block_until_ready()
            times[s]["forward"].append(time.perf_counter() - start)
    label = "tiny HRNet" if quick else name
    print(f"\n{label}, batch {batch_size} at {size}², {rounds} alternating rounds")
    print(f"{'DIG_JAX_CPU':>12} {'step s':>8} {'vs 0':>6} {'forward s':>10} {'vs 0':>6}")
    base = {k: float(np.median(v)) for k, v in times["0"].items()}
    for s in settings:
        step_s, fwd_s = (float(np.median(times[s][k])) for k in ("step", "forward"))
        print(f"{s:>12} {step_s:8.3f} {base['step'] / step_s:6.2f} {fwd_s:10.3f} "
              f"{base['forward'] / fwd_s:6.2f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=None)
    args = parser.parse_args()
    rounds = args.rounds or (2 if args.quick else 5)
    for name in ("hrnet",) if args.quick else ("lite", "hrnet"):
        measure(name, args.quick, rounds)


if __name__ == "__main__":
    jnp.zeros(())  # the backend first, so the switch's backend check is JAX's
    main()
