"""A refinement-click lever probed on the NoG loop (not shipped): a click outside the mask and far
from it adds the object that a creation click on the same pixel would select.

Why: the default's clicks edit locally (a few hundred to a few thousand pixels, however large
the error: docs/model_quality.md, "A click edits locally"). A click far from the current mask
says a large part is missing; a creation click there selects a whole object. The rule: for a
refinement click outside the previous mask whose distance to it is at least
`--min-distance` × sqrt(mask area) px, the mask is the refinement's mask united with the
connected component, around the clicked pixel, of the creation mask of that click alone
(`seg.predict(image, click, None)`: its whole-photo pass, focus pass and cut). Every other
prompt is the plain predictor's. `--min-distance 0` unites on every ADD click.

    python benchmarks/object_add_lever.py \
        --checkpoint checkpoints/lite_iterative_offline_long3x.digjax \
        --datasets "coco_mval%val" --limit 30 --min-distance 0.1,0.05
    python benchmarks/object_add_lever.py --quick     # a procedural scene (make bench)

Prints, per dataset and rule, NoG@90 with clicks (failures counted as 20), the failures and the
mean IoU at clicks 1 / 5 / 20, the rule off first (the same instances and clicks). Choose on
held-out slices only, never on GrabCut or Berkeley.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

import cv2
import numpy as np

from dig_jax.evaluation.iterative import nog
from dig_jax.evaluation.predictors import Predictor, segmenter_predictor
from dig_jax.evaluation.protocol import iter_instances, load_dataset
from dig_jax.export import load_segmenter
from dig_jax.gestures.types import GestureKind
from dig_jax.paths import shipped_checkpoint
from dig_jax.prompts.zoom import refinement_click


def object_added(
    segmenter: Any, sample: dict[str, Any], mask: np.ndarray, min_distance: float
) -> np.ndarray:
    """`mask` (bool[H, W], the refinement's) united with the creation object at the sample's
    click when the click is outside its previous mask and far enough from it; else `mask`."""
    prev = np.asarray(sample["prev_mask"]) > 0 if sample["has_prev"] else None
    click = refinement_click(sample["gesture"], prev) if prev is not None else None
    if click is None or prev[click]:
        return mask
    distance = cv2.distanceTransform((~prev).astype(np.uint8), cv2.DIST_L2, 5)[click]
    if distance < min_distance * np.sqrt(max(int(prev.sum()), 1)):
        return mask
    created = segmenter.predict(sample["image"], sample["gesture"], None) > 0
    _, labels = cv2.connectedComponents(created.astype(np.uint8), connectivity=8)
    if labels[click] == 0:
        return mask
    return mask | (labels == labels[click])


def with_object_add(segmenter: Any, plain: Predictor, min_distance: float | None) -> Predictor:
    """The plain predictor, with `object_added` on every sample (None: the plain one)."""
    if min_distance is None:
        return plain

    def predict(samples: Sequence[dict[str, Any]]) -> list[np.ndarray]:
        masks = plain(samples)
        return [
            object_added(segmenter, s, m > 0, min_distance).astype(np.uint8)
            for s, m in zip(samples, masks, strict=True)
        ]

    return predict


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default="", help="default: the shipped default")
    parser.add_argument("--datasets", default="coco_mval%val")
    parser.add_argument("--limit", type=int, default=30, help="records per dataset")
    parser.add_argument("--min-distance", default="0.1", help="fractions of sqrt(mask area)")
    parser.add_argument("--seed", type=int, default=0, help="the protocol's gesture seed")
    parser.add_argument("--quick", action="store_true", help="3 clicks on a procedural scene")
    args = parser.parse_args(argv)
    specs = ["procedural:2:5"] if args.quick else args.datasets.split(",")
    if any(
        spec.split("%")[0].split("[")[0].split("/")[0] in ("grabcut", "berkeley") for spec in specs
    ):
        parser.error("--datasets: levers are chosen on held-out slices, not on GrabCut/Berkeley")
    if not args.checkpoint:
        shipped = shipped_checkpoint()
        if shipped is None:
            print("object_add_lever: no shipped checkpoint here, skipping")
            return 0
        args.checkpoint = str(shipped)
    segmenter = load_segmenter(args.checkpoint)
    plain = segmenter_predictor(segmenter)
    rules = [None, *(float(d) for d in args.min_distance.split(","))]
    clicks_max = 3 if args.quick else 20
    after = sorted({1, min(5, clicks_max), clicks_max})
    for spec in specs:
        instances = list(iter_instances(load_dataset(spec)[: args.limit]))
        items = [(i.loaded.image, i.gt, i.region.parts[i.largest_part] > 0) for i in instances]
        for rule in rules:
            predict = with_object_add(segmenter, plain, rule)
            ious = nog(
                predict, items, GestureKind.CLICK, max_interactions=clicks_max, seed=args.seed
            )["ious"]
            reached = ious >= 0.9
            clicks = np.where(reached.any(1), reached.argmax(1) + 1, clicks_max)
            name = "off" if rule is None else f"min distance {rule:g}"
            means = " / ".join(f"{ious[:, n - 1].mean():.3f}" for n in after)
            print(
                f"{spec} ({len(items)}, seed {args.seed}) {name}: NoG@90 {clicks.mean():.2f} "
                f"({int((~reached.any(1)).sum())} failed), mean IoU at clicks "
                f"{' / '.join(map(str, after))}: {means}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
