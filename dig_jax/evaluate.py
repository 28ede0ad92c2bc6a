"""Evaluate an exported segmenter: DIG tables per gesture kind, optionally the NoG protocol.

    python -m dig_jax.evaluate --checkpoint checkpoints/hrnet_dataaug_offline.digjax \
        --datasets grabcut,berkeley --modes creation --out results/eval

A dataset is a source spec of `dig_jax.data.pipeline.resolve_source` (grabcut, berkeley,
coco_mval, procedural:N, folder:PATH, ...) with an optional held-out split suffix as in the
training configs (`coco_mval%val` = every 10th record) and an optional slice, e.g. `grabcut[0:10]`.
Writes `<out>/metrics.json` and `<out>/tables.txt`; prints the tables.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np

from dig_jax.data.regions import VOID, extract_regions
from dig_jax.data.sources.record import resize_loaded
from dig_jax.evaluation import (
    CONTEXT_STRATEGIES,
    GESTURE_ENCODINGS,
    SkipLog,
    evaluate_samples,
    evaluation_samples,
    kind_table,
    nog,
    segmenter_predictor,
)
from dig_jax.gestures.types import GestureKind

_SLICE = re.compile(r"^(?P<spec>.+?)\[(?P<start>-?\d*):(?P<stop>-?\d*)\]$")


def load_dataset(spec: str, size: int) -> list:
    """Records of a source spec with an optional `%train|%val` split and `[start:stop]` slice."""
    from dig_jax.train.input_pipeline import resolve_records

    match = _SLICE.match(spec)
    base = match["spec"] if match else spec
    records = resolve_records(base, size)
    if match:
        start = int(match["start"]) if match["start"] else None
        stop = int(match["stop"]) if match["stop"] else None
        records = records[start:stop]
    return list(records)


def nog_items(records: list, size: int, skipped: SkipLog) -> list:
    """(image, gt with void, largest part) triples of every region, at `size` x `size`."""
    items = []
    for record in records:
        try:
            loaded = resize_loaded(record.load(), (size, size))
        except (OSError, ValueError) as error:
            skipped.add(f"{record.source}:{record.image_id}", str(error))
            continue
        for region in extract_regions(loaded.instances, loaded.instance_ids):
            gt = np.where(loaded.void > 0, VOID, region.mask).astype(np.uint8)
            largest = region.parts[int(np.argmax(region.parts.sum((1, 2))))] > 0
            items.append((loaded.image, gt, largest))
    return items


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", required=True, help="exported .digjax segmenter file")
    parser.add_argument("--datasets", default="grabcut,berkeley")
    parser.add_argument("--modes", default="creation,refinement")
    parser.add_argument("--size", type=int, default=320, help="evaluation resolution (px)")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--context", default="oracle", choices=CONTEXT_STRATEGIES)
    parser.add_argument(
        "--gesture-encoding",
        default="model",
        choices=GESTURE_ENCODINGS,
        help="context models: gestures as trained (model), as skeleton clicks, or as a box",
    )
    parser.add_argument("--nog-kinds", default="", help="e.g. click,scribble: run NoG for these")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="results/eval")
    args = parser.parse_args(argv)

    from dig_jax.export import load_segmenter

    segmenter = load_segmenter(args.checkpoint)
    try:
        predict = segmenter_predictor(
            segmenter,
            context_strategy=args.context,
            gesture_encoding=args.gesture_encoding,
            seed=args.seed,
        )
    except ValueError as error:
        parser.error(str(error))
    modes = tuple(m for m in args.modes.split(",") if m)
    results, counts, nogs = {}, {}, {}
    skipped = SkipLog()
    for spec in [d for d in args.datasets.split(",") if d]:
        records = load_dataset(spec, args.size)
        samples = evaluation_samples(
            records, size=args.size, modes=modes, seed=args.seed, skipped=skipped
        )
        results[spec], counts[spec] = evaluate_samples(
            predict, samples, batch_size=args.batch_size, desc=spec
        )
        for name in [k for k in args.nog_kinds.split(",") if k]:
            kind = GestureKind[name.upper()]
            items = nog_items(records, args.size, skipped)
            out = nog(predict, items, int(kind), seed=args.seed)
            nogs[f"{spec}/{name}"] = {
                "NoG@85": float(out["noc"][:, 0].mean()),
                "NoG@90": float(out["noc"][:, 1].mean()),
                "NoF@90": int(out["failed"][:, 1].sum()),
                "instances": len(items),
            }
    tables = []
    for phase, mode in (("create", "creation"), ("refine", "refinement")):
        if mode in modes:
            for score in ("iou_global", "rice_local", "rice_global"):
                tables.append(kind_table(results, score, phase))
    if nogs:
        tables.append("\n".join(f"{k}: {v}" for k, v in nogs.items()))
    text = "\n\n".join(tables)
    print(text)
    if skipped:
        print(f"\nskipped {len(skipped)} item(s); see metrics.json")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "tables.txt").write_text(text + "\n")
    payload = {
        "checkpoint": str(args.checkpoint),
        "size": args.size,
        "context_strategy": args.context,
        "gesture_encoding": args.gesture_encoding,
        "samples": counts,
        "metrics": results,
        "nog": nogs,
        "skipped": skipped.items,
    }
    (out_dir / "metrics.json").write_text(json.dumps(payload, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
