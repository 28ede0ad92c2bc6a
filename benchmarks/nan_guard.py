"""Cost of the training loop's NaN guard (`dig_jax.train.train.train_step`'s `finite` flag).

    python benchmarks/nan_guard.py           # hrnet_dataaug:tiny, 8 interleaved rounds x 150 steps
    python benchmarks/nan_guard.py --quick   # 2 rounds x 30 steps (`make bench`)

Variants, each on the same synthetic batches: `none` (the flag dropped, so XLA removes it:
the reference), `lagged` (what `train` does: the flag of step k read after step k+1 is
queued), `every` (the flag read right after its own step: a host-device sync per step) and
`scalars` (only loss and gradient norm checked, no pass over the new state). Prints median
steps/s and CPU ms per step, and each variant's per-round ratio to `none` (rounds interleave
the variants, so background load affects them alike).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from pathlib import Path
from typing import Any

import jax

jax.config.update("jax_platforms", "cpu")
_CACHE = Path(__file__).resolve().parents[1] / ".jax_cache"
jax.config.update("jax_compilation_cache_dir", os.environ.get("JAX_CACHE_DIR", str(_CACHE)))

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

from dig_jax.models.interactive import build_segmenter  # noqa: E402
from dig_jax.train.config import base_config  # noqa: E402
from dig_jax.train.input_pipeline import make_train_iterator  # noqa: E402
from dig_jax.train.state import make_optimizer  # noqa: E402
from dig_jax.train.train import init_state, make_mesh, to_global, train_step  # noqa: E402

VARIANTS = ("none", "lagged", "every", "scalars")


def step_functions(config: Any) -> tuple[dict, Any, Any]:
    """Jitted step per variant, and the state initialiser."""
    model = build_segmenter(config.model)
    tx = make_optimizer(config.optim, 10_000)
    mesh = make_mesh(1)
    replicated = NamedSharding(mesh, P())
    shape = (config.batch_size, config.image_size, config.image_size, model.in_channels)
    init = functools.partial(init_state, model, tx, shape)
    sharding = jax.tree.map(lambda _: replicated, jax.eval_shape(init, jax.random.key(0)))
    base = functools.partial(train_step, model=model, input_kind="gesture", loss_config=config.loss)

    def none(state, batch):
        state, metrics = base(state, batch)
        metrics.pop("finite")
        return state, metrics

    def scalars(state, batch):
        state, metrics = base(state, batch)
        metrics["finite"] = jnp.isfinite(metrics["loss"]) & jnp.isfinite(metrics["grad_norm"])
        return state, metrics

    bodies = {"none": none, "lagged": base, "every": base, "scalars": scalars}
    jitted = {
        name: jax.jit(
            body,
            in_shardings=(sharding, NamedSharding(mesh, P("data"))),
            out_shardings=(sharding, replicated),
            donate_argnums=0,
        )
        for name, body in bodies.items()
    }
    return jitted, lambda: jax.jit(init, out_shardings=sharding)(jax.random.key(0)), mesh


def run(name: str, fn: Any, init: Any, mesh: Any, batches: Any, steps: int) -> tuple[float, float]:
    """(steps/s, CPU ms per step) of `steps` steps after one warm-up step."""
    state = init()
    state, metrics = fn(state, to_global(next(batches), mesh))
    jax.block_until_ready(metrics)
    previous = None
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        state, metrics = fn(state, to_global(next(batches), mesh))
        if name in ("lagged", "scalars"):
            flag = metrics.pop("finite")
            if previous is not None:
                assert bool(jax.device_get(previous))
            previous = flag
        elif name == "every":
            assert bool(jax.device_get(metrics.pop("finite")))
    jax.block_until_ready(state)
    return steps / (time.perf_counter() - wall), (time.process_time() - cpu) / steps * 1e3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    rounds, steps = (2, 30) if args.quick else (8, 150)
    config = base_config("tiny")
    fns, init, mesh = step_functions(config)
    iterator = make_train_iterator(config)
    batches = ({k: np.array(v) for k, v in next(iterator).items()} for _ in iter(int, 1))
    rate = {n: [] for n in VARIANTS}
    cpu = {n: [] for n in VARIANTS}
    for r in range(rounds):
        for name in VARIANTS if r % 2 == 0 else VARIANTS[::-1]:
            steps_per_s, cpu_ms = run(name, fns[name], init, mesh, batches, steps)
            rate[name].append(steps_per_s)
            cpu[name].append(cpu_ms)
    print(
        f"hrnet tiny, batch {config.batch_size} at {config.image_size}², {rounds} x {steps} steps"
    )
    print("variant   steps/s   CPU ms/step   steps/s ratio to none (median of rounds)")
    for name in VARIANTS:
        ratio = np.median(np.array(rate[name]) / np.array(rate["none"]))
        print(f"{name:8s} {np.median(rate[name]):8.1f} {np.median(cpu[name]):13.2f} {ratio:10.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
