"""Train-step throughput and memory of the HRNet-18s segmenter, and `predict` latency.

    python benchmarks/train_step.py           # full HRNet-W18-small (minutes on 2 CPU cores)
    python benchmarks/train_step.py --quick   # tiny widths, fewer steps (`make bench`)

Train step: images/s at batch 8 / 256² and batch 2 / 512², on 1 and on 4 simulated CPU devices
(ratio = 4-device / 1-device throughput). Memory: XLA's compiled-step estimate per device
(arguments + outputs + temporaries) and, where the backend reports it (not CPU: nan), the
device's peak bytes in use; the process peak RSS is printed at the end. Predict: latency of
one 512² image through the exported segmenter's jitted logits function, relative to one
training image at 512² on 1 device.
A batch smaller than the device count is rounded up to one sample per device (marked *).
"""

from __future__ import annotations

import argparse
import functools
import os
import resource
import sys
import time
from pathlib import Path

import jax

jax.config.update("jax_num_cpu_devices", 4)  # before any device is touched
jax.config.update("jax_platforms", "cpu")
_CACHE = Path(__file__).resolve().parents[1] / ".jax_cache"
jax.config.update("jax_compilation_cache_dir", os.environ.get("JAX_CACHE_DIR", str(_CACHE)))

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

from dig_jax.export import LoadedSegmenter  # noqa: E402
from dig_jax.models.interactive import build_segmenter  # noqa: E402
from dig_jax.train.config import base_config  # noqa: E402
from dig_jax.train.state import make_optimizer  # noqa: E402
from dig_jax.train.train import init_state, make_mesh, to_global, train_step  # noqa: E402

CASES = ((8, 256), (2, 512))  # (batch, side)


def random_batch(batch: int, side: int, seed: int = 0) -> dict[str, np.ndarray]:
    """A Sample-dict batch of random content (the step's cost does not depend on content)."""
    rng = np.random.default_rng(seed)
    masks = lambda: rng.integers(0, 2, (batch, side, side), dtype=np.uint8)
    return {
        "image": rng.integers(0, 256, (batch, side, side, 3), dtype=np.uint8),
        "gesture": masks(), "distance": rng.integers(0, 256, (batch, side, side), dtype=np.uint8),
        "prev_mask": masks(), "target": masks(), "region": masks(),
        "gesture_kind": rng.integers(0, 5, batch).astype(np.int32),
        "context": np.ones(batch, np.int32), "has_prev": np.zeros(batch, bool),
    }  # fmt: skip


def random_like(abstract, seed: int = 0):
    """Concrete pytree shaped like `abstract`: small normal floats, positive variances, zeros
    elsewhere (the step's cost does not depend on the values)."""
    rng = np.random.default_rng(seed)

    def fill(path, leaf):
        if not jnp.issubdtype(leaf.dtype, jnp.floating):
            return np.zeros(leaf.shape, leaf.dtype)
        if "var" in jax.tree_util.keystr(path) or "nu" in jax.tree_util.keystr(path):
            return np.ones(leaf.shape, leaf.dtype)
        return rng.normal(0, 0.05, leaf.shape).astype(leaf.dtype)

    return jax.tree_util.tree_map_with_path(fill, abstract)


def bench_train(config, batch: int, side: int, devices: int, steps: int) -> dict[str, float]:
    model = build_segmenter(config.model)
    tx = make_optimizer(config.optim, 1000)
    mesh = make_mesh(devices)
    replicated = NamedSharding(mesh, P())
    init = functools.partial(init_state, model, tx, (batch, side, side, model.in_channels))
    abstract = jax.eval_shape(init, jax.random.key(0))
    sharding = jax.tree.map(lambda _: replicated, abstract)
    state = jax.device_put(random_like(abstract), sharding)  # no `init` compile needed
    step = jax.jit(
        functools.partial(train_step, model=model, input_kind="gesture", loss_config=config.loss),
        in_shardings=(sharding, NamedSharding(mesh, P("data"))),
        out_shardings=(sharding, replicated),
        donate_argnums=0,
    )
    data = to_global(random_batch(batch, side), mesh)
    start = time.perf_counter()
    compiled = step.lower(state, data).compile()
    compile_s = time.perf_counter() - start
    analysis = compiled.memory_analysis()
    estimate = 0.0
    if analysis is not None:
        estimate = (
            analysis.argument_size_in_bytes
            + analysis.output_size_in_bytes
            + analysis.temp_size_in_bytes
        ) / 2**20
    state, metrics = compiled(state, data)  # warm-up
    jax.block_until_ready(metrics)
    start = time.perf_counter()
    for _ in range(steps):
        state, metrics = compiled(state, data)
    jax.block_until_ready(metrics)
    seconds = (time.perf_counter() - start) / steps
    stats = jax.devices()[0].memory_stats() or {}
    peak = stats.get("peak_bytes_in_use", float("nan")) / 2**20  # NaN: backend has no stats
    return {"images_per_s": batch / seconds, "step_s": seconds, "compile_s": compile_s,
            "xla_mib": estimate, "device_peak_mib": peak}  # fmt: skip


def bench_predict(config, side: int, repeats: int) -> float:
    """Seconds per 512² forward through the export wrapper (random weights, same cost)."""
    model = build_segmenter(config.model)
    x = jnp.zeros((1, side, side, model.in_channels))
    variables = random_like(jax.eval_shape(lambda: model.init(jax.random.key(0), x, train=False)))
    segmenter = LoadedSegmenter(config, variables)
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (side, side, 3), dtype=np.uint8)
    gesture = np.zeros((side, side), np.uint8)
    gesture[side // 2 - 5 : side // 2 + 5, side // 2 - 5 : side // 2 + 5] = 1
    segmenter.predict(image, gesture)  # compile
    start = time.perf_counter()
    for _ in range(repeats):
        segmenter.predict(image, gesture)
    return (time.perf_counter() - start) / repeats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny widths, fewer steps")
    parser.add_argument("--steps", type=int, default=None, help="timed steps per case")
    args = parser.parse_args(argv)
    config = base_config("tiny" if args.quick else "offline")
    steps = args.steps or (2 if args.quick else 3)
    name = "tiny HRNet" if args.quick else "HRNet-W18-small"
    print(
        f"{name}: widths {tuple(config.model.widths)}, {steps} timed steps per case, "
        f"{len(jax.devices())} simulated CPU devices on {os.cpu_count()} cores"
    )
    print(
        f"{'batch':>5} {'side':>5} {'devs':>4} {'img/s':>8} {'step s':>8} {'compile s':>9} "
        f"{'XLA MiB':>8} {'dev peak':>8} {'vs 1 dev':>8}"
    )
    one_device: dict[tuple[int, int], float] = {}
    for batch, side in CASES:
        for devices in (1, 4):
            # A global batch must split over the devices: round it up (printed with a *).
            global_batch = -(-batch // devices) * devices
            r = bench_train(config, global_batch, side, devices, steps)
            label = f"{global_batch}{'*' if global_batch != batch else ''}"
            base = one_device.setdefault((batch, side), r["images_per_s"])
            print(
                f"{label:>5} {side:>5} {devices:>4} {r['images_per_s']:>8.2f} {r['step_s']:>8.3f} "
                f"{r['compile_s']:>9.1f} {r['xla_mib']:>8.1f} {r['device_peak_mib']:>8.1f} "
                f"{r['images_per_s'] / base:>8.2f}x"
            )
            sys.stdout.flush()
    latency = bench_predict(config, 512, repeats=2 if args.quick else 3)
    train_image_s = 1.0 / one_device[(2, 512)]
    print(
        f"predict 512²: {latency * 1e3:.1f} ms/image "
        f"({latency / train_image_s:.2f}x the time of one 512² training image on 1 device)"
    )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"process peak RSS: {rss:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
