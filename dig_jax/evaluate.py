"""Evaluate segmenters and classical peers with the evaluator objects (DIG tables per gesture
kind, iterative NoG), as the training loop does.

    python -m dig_jax.evaluate --checkpoint checkpoints/lite_iterative_offline_long3x.digjax \
        --predictor grabcut,filled \
        --datasets grabcut,berkeley --out results/eval
    python -m dig_jax.evaluate --config experiments/lite_dataaug.py:offline \
        --checkpoint checkpoints/lite_iterative_offline_long3x.digjax      # the config's `evals`

`--predictor` lists what to score on the same samples: exported `.digjax` files and the peers
`grabcut` (OpenCV GrabCut seeded by the gesture), `filled` (the filled gesture as the mask),
`oracle` (each sample's local GT: scores 1 locally, a check of the scorer) and `oracle_region`
(the whole region: RICE_global 1), labelled `peer:NAME` in the tables; `--checkpoint FILE`
adds one file. With `--config` the evaluators are the config's
`config.evals`; otherwise they are built from the flags: DIG tables on `--datasets` × `--modes`
(creation, refinement, multi_region) and, with `--nog-kinds`, the NoG protocol. The samples follow
the DIG paper (`--sampling paper`: every part of a region and, when it has several, the whole
region; every correction of >= 100 px); `--sampling largest` gives the earlier protocol (the
largest part and correction per region). Tables state their sample counts (`n`). Every sample is
drawn and scored at the photo's own resolution (`--max-side` shrinks larger photos first);
models zoom in on the prompt as `predict` does, or, with `--paper-mode`, see the whole photo
resized to their working size and are resized back (the DIG paper's way). A dataset is a
source spec of `dig_jax.data.pipeline.resolve_source` (grabcut, berkeley, coco_mval,
procedural:N, folder:PATH, dig_json:FILE:IMAGES, ...) with an optional held-out split suffix
as in the training configs (`coco_mval%val` = every 10th record) and an optional slice, e.g.
`grabcut[0:10]`. Writes `<out>/metrics.json` and `<out>/tables.md` (and with `--gallery N` a
picture per dataset: N photos x gesture kinds x predictors); prints the tables.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

from dig_jax.cli_args import add_out, add_progress, print_written
from dig_jax.evaluation import (
    CONTEXT_STRATEGIES,
    GESTURE_ENCODINGS,
    PEERS,
    evaluation_samples,
    peer_predictor,
    segmenter_predictor,
)
from dig_jax.evaluation.evaluators import KIND_NAMES, STARTS, build_evaluators
from dig_jax.evaluation.iterative import MIXED
from dig_jax.evaluation.protocol import MODES, SAMPLINGS, load_dataset
from dig_jax.evaluation.tables import all_tables
from dig_jax.outputs import check_out_dir, record_written, write_text_atomic
from dig_jax.paths import checkpoint_name


def predictor_names(args: argparse.Namespace) -> list[str]:
    """Model files and peer names from --checkpoint and --predictor, in order, no repeats."""
    names = [str(c) for c in args.checkpoint or []]
    names += [p for p in (args.predictor or "").split(",") if p]
    return list(dict.fromkeys(names))


def make_predictor(name: str, args: argparse.Namespace):
    """(label, predictor) of a peer name (labelled `peer:NAME`, so a table row never reads
    "grabcut | grabcut") or an exported segmenter file."""
    if name in PEERS:
        return f"peer:{name}", peer_predictor(name)
    from dig_jax.export import load_segmenter

    segmenter = load_segmenter(name)
    predict = segmenter_predictor(
        segmenter, context_strategy=args.context, gesture_encoding=args.gesture_encoding,
        seed=args.seed, batch_size=args.batch_size, paper_mode=args.paper_mode or None,
    )  # fmt: skip
    return checkpoint_name(name) + (" (paper mode)" if args.paper_mode else ""), predict


def _list(text: str) -> list[str]:
    return [x for x in text.split(",") if x]


def evals_from_flags(args: argparse.Namespace) -> dict[str, dict]:
    """The evaluators the flags describe (the same entries a config's `evals` holds)."""
    common = dict(datasets=tuple(_list(args.datasets)), max_side=args.max_side, seed=args.seed,
                  limit=args.limit)  # fmt: skip
    modes = tuple(_list(args.modes))
    evals = {"dig": dict(type="dig_tables", modes=modes, batch_size=args.batch_size,
                         sampling=args.sampling, **common)}  # fmt: skip
    if args.nog_kinds:
        evals["nog"] = dict(type="iterative", kinds=tuple(_list(args.nog_kinds)),
                            starts=tuple(_list(args.nog_starts)),
                            max_interactions=args.nog_max, **common)  # fmt: skip
    return evals


def check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """parser.error (exit 2, one line) on the first bad flag."""
    if not predictor_names(args):
        parser.error("name at least one predictor (--checkpoint FILE or --predictor ...)")
    if args.max_side is not None and args.max_side < 32:
        parser.error(f"--max-side must be >= 32 px, got {args.max_side}")
    if args.batch_size < 1:
        parser.error(f"--batch-size must be >= 1, got {args.batch_size}")
    if not 1 <= args.nog_max <= 20:
        parser.error(f"--nog-max must be in 1..20, got {args.nog_max}")
    if args.limit is not None and args.limit < 1:
        parser.error(f"--limit must be >= 1, got {args.limit}")
    bad = [k for k in _list(args.nog_kinds) if k not in (*KIND_NAMES, MIXED)]
    if bad:
        parser.error(f"--nog-kinds: unknown {bad}; use {[*KIND_NAMES, MIXED]}")
    bad = [s for s in _list(args.nog_starts) if s not in STARTS]
    if bad:
        parser.error(f"--nog-starts: unknown {bad}; use {list(STARTS)}")
    modes = _list(args.modes)
    if not modes or set(modes) - set(MODES):
        parser.error(f"--modes: use some of {list(MODES)}, got {args.modes!r}")
    if not _list(args.datasets) and not args.config:
        parser.error("--datasets: name at least one dataset")
    if args.seed < 0:
        parser.error(f"--seed must be >= 0, got {args.seed}")
    if args.gallery < 0:
        parser.error(f"--gallery must be >= 0, got {args.gallery}")


def output_names(args: argparse.Namespace, evals: dict) -> list[str]:
    """The files a run writes into --out (tables, metrics and any galleries)."""
    specs = [d for e in evals.values() if e["type"] == "dig_tables" for d in e["datasets"]]
    galleries = [gallery_name(spec) for spec in dict.fromkeys(specs)] if args.gallery else []
    return ["tables.md", "metrics.json", *galleries]


def gallery_name(spec: str) -> str:
    """The gallery file of one dataset spec."""
    return f"gallery_{re.sub(r'[^A-Za-z0-9_.-]', '_', spec)}.png"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--checkpoint", action="append", default=[],
        help="an exported .digjax segmenter file (repeat for several)",
    )  # fmt: skip
    parser.add_argument(
        "--predictor", default="", help=f"comma list of .digjax files and peers {PEERS}"
    )
    parser.add_argument("--config", default="", help="experiments/FILE.py:variant: its evals")
    parser.add_argument("--datasets", default="grabcut,berkeley")
    parser.add_argument("--modes", default="creation,refinement", help=f"some of {MODES}")
    parser.add_argument(
        "--sampling", default="paper", choices=SAMPLINGS,
        help="paper: every part and occluded whole region, every correction >= 100 px (DIG); "
        "largest: the largest part and correction of each region (the earlier protocol)",
    )  # fmt: skip
    parser.add_argument(
        "--max-side", type=int, default=None, help="shrink photos to this long side (px)"
    )
    parser.add_argument("--limit", type=int, default=None, help="records per dataset")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--context", default="oracle", choices=CONTEXT_STRATEGIES)
    parser.add_argument(
        "--gesture-encoding",
        default="model",
        choices=GESTURE_ENCODINGS,
        help="context models: gestures as trained (model), as skeleton clicks, or as a box",
    )
    parser.add_argument(
        "--paper-mode", action="store_true",
        help="models see the whole photo resized to their working size, no zoom-in crop and "
        "no paste-back (DIG §16.1, §16.3; default: as each model was trained, "
        "config.data.paper_mode); peers are unchanged",
    )  # fmt: skip
    parser.add_argument("--nog-kinds", default="", help="e.g. click,mixed: run NoG for these")
    parser.add_argument("--nog-starts", default="scratch", help=f"some of {STARTS}")
    parser.add_argument("--nog-max", type=int, default=20, help="gestures per NoG trajectory")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--gallery", type=int, default=0, help="draw N photos x kinds per predictor (PNG)"
    )
    add_out(parser, "evaluate")
    add_progress(parser)
    args = parser.parse_args(argv)
    check_args(parser, args)
    try:
        if args.config:
            from dig_jax.train.__main__ import load_config

            evals = {k: dict(v) for k, v in load_config(args.config).get("evals", {}).items()}
            if not evals:
                parser.error(f"--config {args.config} has no evals")
        else:
            evals = evals_from_flags(args)
        check_out_dir(args.out, output_names(args, evals))  # before any work
        for spec in {d for entry in evals.values() for d in entry.get("datasets", ())}:
            load_dataset(spec)  # an unknown or missing dataset fails here, before any work
        predictors = [make_predictor(name, args) for name in predictor_names(args)]
        labels = [label for label, _ in predictors]
        if len(set(labels)) < len(labels):
            parser.error(f"predictors must have distinct names in the tables, got {labels}")
        build_evaluators(evals, predictors[0][1])  # bad settings fail before any work
    except ValueError as error:  # unknown source spec, unreadable or NaN checkpoint
        parser.error(str(error))
    try:
        results, skipped = run(evals, predictors, progress=not args.no_progress)
    except FloatingPointError as error:  # NaN predictions: no table of 0.000 scores
        print(f"error: {error}; nothing was written", file=sys.stderr)
        return 1
    if not any(entry["metrics"] for evals_ in results.values() for entry in evals_.values()):
        print(f"error: no sample was evaluated; {args.out} was left as it was", file=sys.stderr)
        return 1
    if args.gallery > 0:
        save_galleries(args, evals, predictors)
    write_results(args, evals, results, skipped)
    return 0


def run(
    evals: dict, predictors: list, progress: bool = True
) -> tuple[dict[str, dict[str, Any]], list]:
    """({predictor label: {evaluator name: {type, metrics}}}, skipped items)."""
    results, skipped = {}, []
    for label, predict in predictors:
        results[label] = {}
        for name, evaluator in build_evaluators(evals, predict, progress=progress).items():
            metrics = evaluator.compute(evaluator.run())
            results[label][name] = {"type": evals[name]["type"], "metrics": metrics}
            if evals[name]["type"] == "iterative":  # the NoG tables state the cap
                results[label][name]["max_interactions"] = evaluator.max_interactions
                results[label][name]["trajectories"] = {  # for paired comparisons
                    key: {"instances": t["instances"], "ious": np.asarray(t["ious"]).tolist()}
                    for key, t in evaluator.trajectories.items()
                }
            skipped += [item for item in evaluator.skipped.items if item not in skipped]
    return results, skipped


def save_galleries(args: argparse.Namespace, evals: dict, predictors: list) -> None:
    """The creation samples of the first `--gallery` regions of each DIG-tables dataset."""
    from dig_jax.evaluation.gallery import save_prediction_gallery

    specs = [d for e in evals.values() if e["type"] == "dig_tables" for d in e["datasets"]]
    for spec in dict.fromkeys(specs):
        samples = list(evaluation_samples(load_dataset(spec)[: args.gallery],
                                          max_side=args.max_side, modes=("creation",),
                                          seed=args.seed))  # fmt: skip
        if samples:
            figure = Path(args.out) / gallery_name(spec)
            record_written(args.out, [figure.name])
            save_prediction_gallery(samples, dict(predictors), figure, photos=args.gallery)


def write_results(args: argparse.Namespace, evals: dict, results: dict, skipped: list) -> None:
    """Print the tables; write `tables.md` and `metrics.json` (each replaced atomically)."""
    text = all_tables(results)
    print(text)
    if skipped:
        print(f"\nskipped {len(skipped)} item(s); see metrics.json")
    out_dir = Path(args.out)
    record_written(out_dir, ["tables.md", "metrics.json"])
    write_text_atomic(out_dir / "tables.md", text + "\n")
    settings = {k: v for k, v in vars(args).items() if k != "out"}
    payload = {
        "predictors": predictor_names(args),
        "settings": settings,
        "evals": evals,
        "results": results,
        "skipped": skipped,
    }
    write_text_atomic(out_dir / "metrics.json", json.dumps(payload, indent=1, default=str))
    print_written([out_dir / "tables.md", out_dir / "metrics.json"])


if __name__ == "__main__":
    from dig_jax.cpu import prepare_entry_point

    prepare_entry_point()  # on jemalloc: CPU calls on this thread (see it)
    sys.exit(main())
