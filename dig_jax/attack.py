"""BREPS box-robustness evaluation of exported segmenters on benchmark folders.

python -m dig_jax.attack --checkpoint runs/dig/segmenter.digjax --datasets grabcut,berkeley \
    [--out results/attack --steps 50 --batch-size 4 --limit N --user-boxes ROOT]

Writes `<out>/breps.json` (metrics, per-instance IoUs and boxes, skipped items) and
`<out>/breps.md` (IoU-Tight / Min / Max / Δ per dataset and model), and prints the table.
Datasets are folders under `dig_jax.paths.data_root()` (or paths), or dataset specs as
`evaluate` takes them (`feral_cats/valid[0:12]`, `coco_mval%val`); a name that is neither is
an error. Files are replaced atomically, and only by a run that attacked at least
one instance; a checkpoint with NaN weights, or NaN predictions, stops the run (exit 1).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from dig_jax.cli_args import add_checkpoints, add_limit, add_out, add_progress, print_written
from dig_jax.outputs import check_out_dir, record_written, write_text_atomic
from dig_jax.paths import checkpoint_name, data_root

OUTPUTS = ["breps.json", "breps.md"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_checkpoints(parser, "exported segmenter file (repeat for several models)")
    parser.add_argument(
        "--datasets",
        default="grabcut,berkeley",
        help="comma-separated folder names under the data root, paths, or dataset specs as "
        "evaluate takes them (coco_mval%%val, feral_cats/valid[0:12])",
    )
    add_out(parser, "attack")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument(
        "--working-size",
        "--size",
        dest="size",
        type=int,
        default=None,
        help="zoom-crop side in px (multiple of 32; default: the model's working size)",
    )
    parser.add_argument(
        "--batch-size", "--batch", dest="batch", type=int, default=4,
        help="instances attacked at once (vmap)",
    )  # fmt: skip
    parser.add_argument("--lam", type=float, default=0.1, help="weight of the realism prior")
    parser.add_argument("--lr-mult", type=float, default=9.0)
    add_limit(parser, "instances")
    parser.add_argument(
        "--user-boxes",
        type=Path,
        default=None,
        help="also evaluate a BREPS-layout folder of real user boxes",
    )
    add_progress(parser)
    args = parser.parse_args(argv)
    if args.size is not None and (args.size < 32 or args.size % 32):
        parser.error(
            f"--working-size must be a positive multiple of 32 (the stride), got {args.size}"
        )
    if args.batch < 1:
        parser.error(f"--batch-size must be >= 1, got {args.batch}")
    if args.limit is not None and args.limit < 0:
        parser.error(f"--limit must be >= 0, got {args.limit}")
    if not 0 < args.lr_mult < math.inf:
        parser.error(f"--lr-mult must be a finite number > 0, got {args.lr_mult}")
    if not 0 <= args.lam < math.inf:
        parser.error(f"--lam must be a finite number >= 0, got {args.lam}")
    if args.steps < 1:
        parser.error(f"--steps must be >= 1, got {args.steps}")
    for checkpoint in args.checkpoint:
        if not checkpoint.is_file():
            parser.error(f"--checkpoint {checkpoint} is not a file")
    datasets = [d.strip() for d in args.datasets.split(",") if d.strip()]
    if not datasets:
        parser.error(f"--datasets: no dataset named in {args.datasets!r}")
    roots = []
    for spec in datasets:  # a benchmark folder, else a source spec (as evaluate takes)
        folder = Path(spec) if Path(spec).is_dir() else data_root() / spec
        try:
            roots.append(_records(folder if folder.is_dir() else spec))
        except (ValueError, OSError) as error:
            parser.error(f"--datasets: no folder {spec!r} under {data_root()} and {error}")
    if args.user_boxes is not None and not args.user_boxes.is_dir():
        parser.error(f"--user-boxes {args.user_boxes} is not a folder")
    try:
        check_out_dir(args.out, OUTPUTS)
    except ValueError as error:
        parser.error(str(error))
    try:
        return run(args, roots)
    except (ValueError, FloatingPointError) as error:  # unreadable or NaN checkpoint, no result
        print(f"error: {error}", file=sys.stderr)
        return 1


def _records(root: Path | str) -> tuple[list, list[str], str]:
    """(records, problems, label) of a benchmark folder or of a dataset source spec
    (`dig_jax.evaluation.protocol.load_dataset`: coco_mval%val, feral_cats/valid[0:12], ...)."""
    from dig_jax.data.sources.benchmark_folder import scan_benchmark_folder
    from dig_jax.evaluation.protocol import load_dataset

    if isinstance(root, Path):
        records, problems = scan_benchmark_folder(root, name=root.name)
        return records, problems, root.name
    return load_dataset(root), [], root


def run(args: argparse.Namespace, roots: list[tuple[list, list[str], str]]) -> int:
    """Attack every checkpoint on every dataset of `roots` ((records, problems, label) each);
    write and print results."""
    from dig_jax import load_segmenter
    from dig_jax.metrics.breps import breps_table
    from dig_jax.prompts.soft import box_encoder
    from dig_jax.robustness.breps.evaluate import attack_dataset
    from dig_jax.robustness.breps.user_boxes import evaluate_user_boxes

    segmenters = [(c, load_segmenter(c)) for c in args.checkpoint]  # bad files fail up front
    results: dict[str, dict] = {}
    rows = {}
    for checkpoint, seg in segmenters:
        predict = seg.predict_logits_fn()
        encoder = box_encoder(seg.input_kind, seg.config.model.get("context_encoding", "gesture"))
        name = checkpoint_name(checkpoint)
        for records, problems, label in roots:
            out = attack_dataset(
                predict,
                encoder,
                records,
                size=args.size or seg.size,
                batch=args.batch,
                steps=args.steps,
                lam=args.lam,
                lr_mult=args.lr_mult,
                limit=args.limit,
                desc=f"{name} {label}",
                progress=not args.no_progress,
            )
            out["skipped"] = problems + out["skipped"]
            if not out["metrics"]["n"]:
                print(f"no instance attacked in {label} for {name}", file=sys.stderr)
                continue
            results[f"{label}/{name}"] = {"checkpoint": str(checkpoint), **out}
            rows[(label, name)] = out["metrics"]
        if args.user_boxes is not None:
            user = evaluate_user_boxes(
                predict,
                encoder,
                args.user_boxes,
                size=args.size or seg.size,
                progress=not args.no_progress,
            )
            results[f"user_boxes:{args.user_boxes.name}/{name}"] = user
            print(
                f"{name} real user boxes ({args.user_boxes.name}): IoU {user['mean_iou']:.3f} "
                f"± {user['std_iou']:.3f} over {user['n_users']} users "
                f"({user['n_boxes']} boxes, pooled {user['pooled_mean_iou']:.3f} "
                f"± {user['pooled_std_iou']:.3f})"
            )
    if not results:
        raise ValueError(f"no instance was attacked; {args.out} was left as it was")
    settings = {k: v for k, v in vars(args).items() if k not in ("checkpoint", "out")}
    settings = {k: str(v) if isinstance(v, Path) else v for k, v in settings.items()}
    payload = json.dumps({"settings": settings, "results": results}, indent=1)
    record_written(args.out, OUTPUTS)
    write_text_atomic(args.out / "breps.json", payload)
    table = breps_table(rows)
    write_text_atomic(args.out / "breps.md", table + "\n")
    print(table)
    print_written([args.out / "breps.json", args.out / "breps.md"])
    return 0


if __name__ == "__main__":
    from dig_jax.cpu import prepare_entry_point

    prepare_entry_point()  # on jemalloc: CPU calls on this thread (see it)
    sys.exit(main())
