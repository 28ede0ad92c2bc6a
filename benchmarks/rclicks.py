"""RClicks throughput on CPU: clicks/s of clicking-group sampling, and instances/s of the
20-click protocol run batched (all instances' trajectories in one predictor call per round)
vs one instance at a time.

python benchmarks/rclicks.py [--quick]

Sampling: one click from group G(1 + i mod 10) of each of B distance-transform maps of the
first photos' targets (or procedural scenes), four ways, all after a warm-up call (compile
excluded): numpy reference (numpy group cut + `Generator.choice`, one click at a time), jnp one
click at a time (`sample_group_clicks`), jnp batched (`sample_groups_batch`, one vmapped call)
and the protocol's path (numpy group cut per map + one batched `draw_batch`). Protocol: the
shipped segmenter (checkpoints/lite_iterative_offline_long3x.digjax if present, else
hrnet_dataaug_offline.digjax; a disc stand-in without either), DT map; compile excluded by a
1-click warm-up. Clickability training: ms per step of the host loop `train_clickability`
runs vs `lax.scan` over the same step. Ratios are against the first row, measured in the same
run.
"""

from __future__ import annotations

import argparse
import functools
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from dig_jax.robustness.rclicks import dt_map, group_labels, rclicks_ious, sample_group_clicks
from dig_jax.robustness.rclicks.maps import map_function
from dig_jax.robustness.rclicks.sampling import draw_batch, sample_groups_batch

ROOT = Path(__file__).resolve().parents[1]


def load_items(n: int, max_side: int | None) -> tuple[list, str]:
    from dig_jax.evaluation import SkipLog
    from dig_jax.evaluation.protocol import load_dataset, nog_items
    from dig_jax.paths import has_data

    spec = "grabcut" if has_data("grabcut") else "procedural:8"
    items = nog_items(load_dataset(spec, size=320), max_side, SkipLog())
    return [items[k % len(items)] for k in range(n)], spec


def load_predictor():
    from dig_jax.paths import shipped_checkpoint

    path = shipped_checkpoint("gesture")
    if path is not None:
        from dig_jax import load_segmenter
        from dig_jax.evaluation import segmenter_predictor

        return segmenter_predictor(load_segmenter(path), batch_size=8), path.stem

    def disc(samples):  # a transparent stand-in: add / remove a 15 px disc at the click
        out = []
        for s in samples:
            ys, xs = np.nonzero(s["gesture"])
            yy, xx = np.mgrid[: s["gesture"].shape[0], : s["gesture"].shape[1]]
            d = (yy - ys.mean()) ** 2 + (xx - xs.mean()) ** 2 <= 225
            prev = (s["prev_mask"] > 0) & bool(s["has_prev"])
            out.append((prev | d if s["context"] == 1 else prev & ~d).astype(np.uint8))
        return out

    return disc, "disc stand-in"


def timed(fn, repeat: int = 1) -> float:
    jax.block_until_ready(fn())  # warm-up: compile and caches
    start = time.perf_counter()
    for _ in range(repeat):
        jax.block_until_ready(fn())
    return (time.perf_counter() - start) / repeat


def bench_sampling(items: list, batch: int) -> None:
    maps = [dt_map(gt == 1) for _, gt, *_ in items[:batch]]
    groups = np.array([1 + k % 10 for k in range(batch)], np.int32)
    keys = jax.random.split(jax.random.key(0), batch)
    rng = np.random.default_rng(0)

    def numpy_ref():
        out = []
        for m, g in zip(maps, groups, strict=True):
            w = np.where(group_labels(m) == g, m, 0).ravel()
            out.append(rng.choice(w.size, p=w / w.sum()))
        return np.array(out)

    def jnp_single():
        return [
            sample_group_clicks(k, m, int(g))[0] for k, m, g in zip(keys, maps, groups, strict=True)
        ]

    length = max(m.size for m in maps)
    flat = np.zeros((batch, length), np.float32)
    for k, m in enumerate(maps):
        flat[k, : m.size] = m.ravel()
    flat_j, groups_j = jnp.asarray(flat), jnp.asarray(groups)

    def jnp_batched():
        return sample_groups_batch(keys, flat_j, groups_j)

    def protocol_path():
        rows = np.zeros((batch, length), np.float32)
        for k, m in enumerate(maps):
            support = np.flatnonzero(m)
            inside = group_labels(m.ravel()[support]) == groups[k]
            rows[k, : inside.sum()] = m.ravel()[support][inside]
        return draw_batch(keys, jnp.asarray(rows))

    h, w = maps[0].shape
    print(f"group sampling: {batch} DT maps of up to {length} px (first {h}x{w}), one click each")
    reference = None
    for name, fn in (("numpy, one at a time (reference)", numpy_ref),
                     ("jnp, one at a time", jnp_single),
                     ("jnp, batched (vmap)", jnp_batched),
                     ("numpy cut + jnp batched draw (protocol)", protocol_path)):  # fmt: skip
        rate = batch / timed(fn, repeat=2)
        reference = reference or rate
        print(f"  {name:<42} {rate:>9.1f} clicks/s  {rate / reference:>6.2f}x", flush=True)


def bench_protocol(items: list, clicks: int) -> None:
    predict, label = load_predictor()
    _, dt = map_function("dt")
    n = len(items)
    rclicks_ious(predict, items, dt, max_clicks=1)  # warm-up: compile the network and draws
    for k in range(n):
        rclicks_ious(predict, items[k : k + 1], dt, max_clicks=1, start=k)
    start = time.perf_counter()
    one = [
        rclicks_ious(predict, items[k : k + 1], dt, max_clicks=clicks, start=k) for k in range(n)
    ]
    t_one = time.perf_counter() - start
    start = time.perf_counter()
    many = rclicks_ious(predict, items, dt, max_clicks=clicks)
    t_many = time.perf_counter() - start
    same = all(np.array_equal(o.clicks[0], many.clicks[k]) for k, o in enumerate(one))
    print(f"protocol: {n} instances x 11 trajectories x {clicks} clicks, model: {label}")
    print(f"  one instance at a time (reference)  {n / t_one:>7.3f} instances/s  1.00x")
    print(f"  batched ({n} instances per call)     {n / t_many:>7.3f} instances/s  "
          f"{t_one / t_many:.2f}x   same clicks: {same}")  # fmt: skip


def bench_clickability_training(steps: int, size: int = 64, batch: int = 16) -> None:
    """ms per step of the clickability model's training: the host loop `train_clickability`
    runs (one compiled step per call) against `lax.scan` over the same step, after compiling."""
    from dig_jax.robustness.rclicks.model import DEFAULT_FEATURES, init_clickability
    from dig_jax.robustness.rclicks.train import clickability_step

    rng = np.random.default_rng(0)
    xs = jnp.asarray(rng.normal(size=(64, size, size, 5)).astype(np.float32))
    ts = jax.nn.softmax(jnp.asarray(rng.normal(size=(64, size * size)), jnp.float32), axis=-1)
    ts = ts.reshape(64, size, size)
    model = init_clickability(jax.random.key(0), size, DEFAULT_FEATURES)
    step_fn, tx = clickability_step(model.features, steps, batch, 3e-3, True)
    keys = jax.random.split(jax.random.key(1), steps)
    carry = (model.params, tx.init(model.params))

    scan = jax.jit(lambda c, k: jax.lax.scan(functools.partial(step_fn, xs, ts), c, k))
    scan_c = scan.lower(carry, keys).compile()
    one = jax.jit(lambda c, k: step_fn(xs, ts, c, k)).lower(carry, keys[0]).compile()

    def host_loop():
        c = carry
        for k in keys:
            c, _ = one(c, k)
        return c

    t_scan, t_host = timed(lambda: scan_c(carry, keys)), timed(host_loop)
    print(f"clickability training: {steps} steps, batch {batch} at {size}², compile excluded")
    print(f"  lax.scan over the steps (reference)  {t_scan / steps * 1e3:>8.1f} ms/step  1.00x")
    print(f"  host loop, one compiled step (used)  {t_host / steps * 1e3:>8.1f} ms/step  "
          f"{t_scan / t_host:.2f}x")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="16 maps; 2 instances, 3 clicks")
    args = parser.parse_args()
    print(f"device {jax.devices()[0].platform}")
    items, spec = load_items(2 if args.quick else 8, 160 if args.quick else None)
    sample_items, _ = load_items(16 if args.quick else 64, None)
    print(f"data: {spec}")
    bench_sampling(sample_items, len(sample_items))
    bench_protocol(items, 3 if args.quick else 20)
    bench_clickability_training(5 if args.quick else 40)


if __name__ == "__main__":
    main()
