"""RClicks robustness of exported segmenters to realistic clicks, per clicking group.

    python -m dig_jax.rclicks --checkpoint checkpoints/lite_iterative_offline_long3x.digjax \
        --datasets grabcut,berkeley --map dt --out results/rclicks

For every instance (each region of each photo, at the photo's own size; `--max-side` shrinks
larger photos) it runs 20 clicks for each clicking group G1..G10 of the `--map` clickability
map (ud, dt, sm, or a trained clickability model file) and for the baseline clicker, and
reports Sample NoC@85/90 ± std, ΔSB, ΔGR, ΔHH, IoU-AUC and NSR (`dig_jax.metrics.rclicks`).
Context models are told each click's sign (ADD / REMOVE); gesture-agnostic models nothing.
Datasets are source specs as in `dig_jax.evaluate` (grabcut, berkeley, grabcut[0:5], ...).
Writes `<out>/rclicks.md` (one table per model), `<out>/rclicks.json` (settings, metrics,
timings, per-instance NoC per group, skipped items) and `<out>/groups.png` (the ten groups on
the first photo), and prints the tables.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from dig_jax.cli_args import (
    add_batch_size,
    add_checkpoints,
    add_limit,
    add_max_side,
    add_out,
    add_progress,
    add_seed,
    print_written,
)  # fmt: skip
from dig_jax.paths import checkpoint_name


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_checkpoints(parser, "exported .digjax segmenter (repeat for several models)")
    parser.add_argument("--datasets", default="grabcut,berkeley")
    parser.add_argument(
        "--map", default="dt", help="clickability map: ud, dt, sm, or a clickability model file"
    )
    add_out(parser, "rclicks")
    add_limit(parser, "instances")
    add_max_side(parser)
    parser.add_argument("--clicks", type=int, default=20, help="clicks per trajectory")
    parser.add_argument("--chunk", type=int, default=8, help="instances run together")
    add_batch_size(parser, 8)
    add_seed(parser)
    parser.add_argument("--no-figure", action="store_true")
    add_progress(parser)
    args = parser.parse_args(argv)
    checks = {
        "--limit": args.limit is None or args.limit >= 0,
        "--max-side": args.max_side is None or args.max_side >= 32,
        "--clicks": args.clicks >= 2,
        "--chunk": args.chunk >= 1,
        "--batch-size": args.batch_size >= 1,
        "--seed": args.seed >= 0,
    }
    for flag, ok in checks.items():
        if not ok:
            parser.error(f"{flag} is out of range: {getattr(args, flag[2:].replace('-', '_'))}")
    for checkpoint in args.checkpoint:
        if not checkpoint.is_file():
            parser.error(f"--checkpoint {checkpoint} is not a file")
    from dig_jax.outputs import check_out_dir

    try:
        check_out_dir(args.out, output_names(args))
    except ValueError as error:
        parser.error(str(error))
    from dig_jax.robustness.rclicks.maps import map_function

    try:
        args.map_name, args.map_fn = map_function(args.map)
    except ValueError as err:
        parser.error(f"--map: {err}")
    return args


def output_names(args: argparse.Namespace) -> list[str]:
    """The files a run writes into --out."""
    return ["rclicks.md", "rclicks.json"] + ([] if args.no_figure else ["groups.png"])


def write_figure(path: Path, item: tuple, map_fn: Callable, seed: int) -> None:
    """The ten groups of the first-click map (error = the whole target) on one photo, with a
    few clicks drawn from G1 and G10."""
    import jax
    import matplotlib

    matplotlib.use("Agg")
    from dig_jax.robustness.rclicks.figures import save_groups_figure
    from dig_jax.robustness.rclicks.sampling import sample_group_clicks

    image, gt = item[0], item[1]
    target = (gt == 1).astype(np.uint8)
    prob = map_fn(image, target, gt == 1)
    key = jax.random.key(seed)
    clicks = {g: np.asarray(sample_group_clicks(jax.random.fold_in(key, g), prob, g, n=6)[0])
              for g in (1, 10)}  # fmt: skip
    save_groups_figure(path, image, prob, gt=gt, clicks=clicks, title="first click")


def load_items(args: argparse.Namespace, skipped: Any) -> dict[str, list]:
    """{spec: (image, gt, largest part) items} for every dataset (first `--limit`)."""
    from dig_jax.evaluation.protocol import load_dataset, nog_items

    datasets = {}
    for spec in [d.strip() for d in args.datasets.split(",") if d.strip()]:
        items = nog_items(load_dataset(spec), args.max_side, skipped)
        datasets[spec] = items if args.limit is None else items[: args.limit]
    return datasets


def evaluate_model(
    checkpoint: Path, seg: Any, datasets: dict[str, list], args: argparse.Namespace
) -> tuple[str, dict[str, Any]]:
    """(table markdown, {"spec/label": result}) of one loaded checkpoint on every dataset."""
    from tqdm.auto import tqdm

    from dig_jax.evaluation import segmenter_predictor
    from dig_jax.metrics.rclicks import RClicksTally, rclicks_table
    from dig_jax.robustness.rclicks.protocol import BASELINE, rclicks_ious

    predict = segmenter_predictor(seg, context_strategy="oracle", batch_size=args.batch_size)
    label = checkpoint_name(checkpoint)
    rows, results = {}, {}
    for spec, items in datasets.items():
        if not items:
            continue
        tally, per_instance = RClicksTally.empty(), []
        start_time = time.perf_counter()
        bar = tqdm(total=len(items), desc=f"{label} {spec}", unit="inst",
                   disable=args.no_progress)  # fmt: skip
        for start in range(0, len(items), args.chunk):
            run = rclicks_ious(
                predict, items[start : start + args.chunk], args.map_fn, seed=args.seed,
                start=start, max_clicks=args.clicks,
            )  # fmt: skip
            tally = tally.merge(run.tally())
            for k in range(len(run.ious)):
                per_instance.append({
                    "index": start + k, "ious": run.ious[k].round(4).tolist(),
                    "clicks": run.clicks[k].tolist(), "positive": run.positive[k].tolist(),
                })  # fmt: skip
            bar.update(len(run.ious))
        bar.close()
        seconds = time.perf_counter() - start_time
        rows[spec] = tally.compute()
        results[f"{spec}/{label}"] = {
            "checkpoint": str(checkpoint), "input_kind": seg.input_kind, "metrics": rows[spec],
            "seconds": round(seconds, 1), "instances": per_instance,
            "trajectories": [f"G{g}" for g in range(1, BASELINE + 1)] + ["baseline"],
        }  # fmt: skip
        print(f"{label} {spec}: {len(items)} instances in {seconds:.0f} s", file=sys.stderr)
    header = f"### {label} ({seg.input_kind} input, {args.map_name} map, {args.clicks} clicks)"
    return header + "\n\n" + rclicks_table(rows, max_clicks=args.clicks), results


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from dig_jax.evaluation import SkipLog
    from dig_jax.export import load_segmenter
    from dig_jax.outputs import record_written, write_text_atomic

    skipped = SkipLog()
    try:
        datasets = load_items(args, skipped)
    except ValueError as error:  # an unknown source spec
        print(f"error: --datasets: {error}", file=sys.stderr)
        return 2
    try:
        models = [(checkpoint, load_segmenter(checkpoint)) for checkpoint in args.checkpoint]
    except ValueError as error:  # not a segmenter file, or NaN weights
        print(f"error: --checkpoint: {error}", file=sys.stderr)
        return 2
    if not any(datasets.values()):
        print("error: no instances to evaluate; nothing was written", file=sys.stderr)
        return 1
    tables, results = [], {}
    try:
        for checkpoint, seg in models:
            table, result = evaluate_model(checkpoint, seg, datasets, args)
            tables.append(table)
            results.update(result)
    except FloatingPointError as error:  # NaN predictions: no table of meaningless scores
        print(f"error: {error}; nothing was written", file=sys.stderr)
        return 1
    text = "\n\n".join(tables)
    args.out.mkdir(parents=True, exist_ok=True)
    record_written(args.out, output_names(args))
    write_text_atomic(args.out / "rclicks.md", text + "\n")
    settings = {k: v for k, v in vars(args).items() if k not in ("map_fn", "checkpoint", "out")}
    settings = {k: str(v) if isinstance(v, Path) else v for k, v in settings.items()}
    payload = {"settings": settings, "results": results, "skipped": skipped.items}
    write_text_atomic(args.out / "rclicks.json", json.dumps(payload))
    if not args.no_figure:
        first = next(items for items in datasets.values() if items)[0]
        write_figure(args.out / "groups.png", first, args.map_fn, args.seed)
    print(text)
    print_written([args.out / name for name in output_names(args)])
    return 0


if __name__ == "__main__":
    from dig_jax.cpu import prepare_entry_point

    prepare_entry_point()  # on jemalloc: CPU calls on this thread (see it)
    sys.exit(main())
