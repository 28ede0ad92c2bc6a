"""Iterative protocol: NoG/NoC — gestures until the mask reaches an IoU threshold (DIG Table 7).

From scratch, interaction 1 is a creation gesture on the region's largest part; from a prior
(`start` masks, e.g. a synthetic previous segmentation), it already aims at the prior's largest
error. Each later interaction aims a gesture at the largest error component of the current mask
(missing pixels: ADD, extra pixels: REMOVE), with the current mask as the previous mask; each
sample also carries "seeds", the hard labels of the gestures before it
(`peers.accumulate_seeds`), which models ignore and seeded peers (GrabCut) keep. The
kind is fixed, or "mixed": a tight lasso first, then clicks. The IoU against the whole region
(void ignored) is recorded after each interaction, `max_interactions` in all; NoG@t is the
first interaction reaching IoU >= t (else the maximum), NoF the failures. Instances are
processed as a batch: one predictor call per interaction for all unfinished instances.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dig_jax.data.regions import VOID, components
from dig_jax.data.samples import gesture_maps, make_sample
from dig_jax.evaluation.peers import accumulate_seeds
from dig_jax.evaluation.predictors import Predictor
from dig_jax.gestures import simulate_creation, simulate_refinement
from dig_jax.gestures.types import Context, GestureKind
from dig_jax.metrics import MAX_INTERACTIONS, iou, noc
from dig_jax.metrics.noc import DEFAULT_THRESHOLDS


def largest_error(pred: np.ndarray, gt: np.ndarray) -> tuple[np.ndarray, int] | None:
    """(component bool[H, W], context) of the largest error of `pred` against `gt` (255 = void),
    or None when `pred` has no error."""
    valid = gt != VOID
    best = None
    for context, error in (
        (Context.ADD, (gt == 1) & (pred == 0) & valid),
        (Context.REMOVE, (gt == 0) & (pred == 1) & valid),
    ):
        for comp in components(error):
            area = int(comp.sum())
            if best is None or area > best[2]:
                best = (comp.astype(bool), int(context), area)
    return None if best is None else best[:2]


MIXED = "mixed"  # a tight lasso first, then clicks


def gesture_kind_at(kind: int | str, step: int) -> GestureKind:
    """The gesture kind of interaction `step` (0-based) for a fixed kind or "mixed"."""
    if kind == MIXED:
        return GestureKind.TIGHT_LASSO if step == 0 else GestureKind.CLICK
    return GestureKind(int(kind))


def iterative_ious(
    predict: Predictor,
    items: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
    kind: int | str,
    *,
    seed: int = 0,
    max_interactions: int = MAX_INTERACTIONS,
    start: Sequence[np.ndarray] | None = None,
) -> np.ndarray:
    """IoU after each interaction, float64[len(items), max_interactions].

    `items`: (image uint8[H,W,3], gt uint8[H,W] {0,1,255}, first target bool[H,W]) triples,
    each at its photo's own size. `kind`: a GestureKind code or "mixed". `start`: one initial
    mask per item (from a prior), or None (from scratch). An instance whose mask has no error
    left stops there and keeps its IoU for the remaining steps.
    """
    n = len(items)
    if start is not None and len(start) != n:
        raise ValueError(f"start: {len(start)} masks for {n} items")
    ious = np.zeros((n, max_interactions))
    if start is None:
        preds = [np.zeros(gt.shape, np.uint8) for _, gt, _ in items]
    else:
        preds = [(np.asarray(m) > 0).astype(np.uint8) for m in start]
    seeds = [np.zeros(gt.shape, np.uint8) for _, gt, _ in items]
    code = 9 if kind == MIXED else int(kind)
    rngs = [np.random.default_rng([seed, i, code]) for i in range(n)]
    done = np.zeros(n, bool)
    for step in range(max_interactions):
        samples, active = [], []
        this_kind = gesture_kind_at(kind, step)
        for i, (image, gt, first) in enumerate(items):
            if done[i]:
                continue
            if step == 0 and start is None:
                gesture = simulate_creation(this_kind, first, rngs[i])
                context, prev = Context.ADD, None
            else:
                error = largest_error(preds[i], gt)
                if error is None:
                    done[i] = True
                    continue
                gesture = simulate_refinement(this_kind, error[0], error[1], rngs[i])
                context, prev = error[1], preds[i]
            raster, dist = gesture_maps(gesture, gt.shape)
            sample = make_sample(
                image=image, gesture_map=raster, distance=dist, prev_mask=prev, target=gt,
                region=gt == 1, kind=this_kind, context=context, image_id=str(i), instance_id=i,
            )  # fmt: skip
            sample["seeds"] = seeds[i]
            seeds[i] = accumulate_seeds(seeds[i], raster, prev, context)
            samples.append(sample)
            active.append(i)
        if active:
            masks = predict(samples)
            for i, mask in zip(active, masks, strict=True):
                preds[i] = mask.astype(np.uint8)
        for i, (_, gt, _) in enumerate(items):
            ious[i, step] = iou(preds[i], gt)
    return ious


def nog(
    predict: Predictor,
    items: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
    kind: int | str,
    *,
    thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
    seed: int = 0,
    max_interactions: int = MAX_INTERACTIONS,
    start: Sequence[np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """`noc(...)` of `iterative_ious` at `thresholds` (default 0.80, 0.85, 0.90, as DIG Table 7)
    plus the trajectories under `ious`."""
    ious = iterative_ious(
        predict, items, kind, seed=seed, max_interactions=max_interactions, start=start
    )
    out = noc(ious, thresholds, max_interactions)
    out["ious"] = ious
    return out
