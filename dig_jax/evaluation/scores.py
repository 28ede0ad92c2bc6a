"""Scoring of predictions: RICE / IoU per gesture kind, creation vs refinement (used by the
training loop's validation and by the evaluation CLI)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dig_jax.data.regions import VOID
from dig_jax.gestures.types import GestureKind
from dig_jax.metrics import Averages, rice_scores

SCORES = ("rice_local", "rice_global", "iou_local", "iou_global")
GLOBAL_SCORES = ("rice_global", "iou_global")
PHASES = ("create", "refine", "multi")
MODE_PHASE = {"creation": 0, "refinement": 1, "multi_region": 2}  # sample["mode"] -> PHASES index
_NOT_SCORES = ("gesture_kind", "has_prev", "phase", "has_region")


class GlobalTruthMissingError(ValueError):
    """A global score was asked of a sample whose global GT (the whole region) is unknown."""


def has_global_truth(sample: dict[str, Any]) -> bool:
    """False for a sample flagged `has_region` False (e.g. DIG JSON without `obj_gt` or source
    annotations): its `region` is not the global GT."""
    return bool(sample.get("has_region", True))


def global_truth(sample: dict[str, Any], xp: Any = np) -> Any:
    """The global GT {0,1,255} of one sample: its region with the dataset's void as 255;
    `GlobalTruthMissingError` when it is unknown (no stand-in is ever scored)."""
    if not has_global_truth(sample):
        raise GlobalTruthMissingError(
            f"sample {sample.get('image_id')}#{sample.get('instance_id')}: no global ground "
            "truth (a DIG JSON row without `obj_gt` and no source annotations, `gt_dir`); "
            "RICE_global / IoU_global are refused, not computed on the local target"
        )
    return ground_truths(sample, xp)[0]


def ground_truths(sample: dict[str, Any], xp: Any = jnp) -> tuple[Any, Any]:
    """(global GT, local GT) {0,1,255} of a sample or batch: the region and the local GT
    (`local`) with the dataset's `void` pixels as 255. Batches without `local` (older static
    sets) fall back to the training target, whose void also hides untargeted errors."""
    region = xp.asarray(sample["region"]).astype(xp.uint8)
    if "local" not in sample:
        return region, xp.asarray(sample["target"])
    void = xp.asarray(sample["void"]) > 0
    local = xp.asarray(sample["local"]).astype(xp.uint8)
    return xp.where(void, VOID, region).astype(xp.uint8), xp.where(void, VOID, local).astype(
        xp.uint8
    )


def score_batch(pred: jax.Array, batch: dict[str, Any]) -> dict[str, jax.Array]:
    """Per-sample scores f32[B] of binary `pred` uint8[B, H, W] (jit-able), plus kind/has_prev.

    Creation samples (has_prev False) use no previous mask (RICE = IoU).
    """
    has_prev = jnp.asarray(batch["has_prev"]).astype(bool)
    prev = jnp.asarray(batch["prev_mask"]) * has_prev[:, None, None].astype(jnp.uint8)
    gt_global, gt_local = ground_truths(batch)
    scores = rice_scores(pred, prev, gt_global, gt_local)
    out = {
        **{k: scores[k] for k in SCORES},
        "gesture_kind": jnp.asarray(batch["gesture_kind"], jnp.int32),
        "has_prev": has_prev,
    }
    if "has_region" in batch:  # rows without a global GT: left out of GLOBAL_SCORES
        out["has_region"] = jnp.asarray(batch["has_region"]).astype(bool)
    return out


def score_sample(pred: np.ndarray, sample: dict[str, Any]) -> dict[str, Any]:
    """Scores of one prediction uint8[H, W] at the sample's own resolution (numpy), shaped
    like one row of `score_batch` (arrays of length 1). A sample without a global GT
    (`has_global_truth` False) gets the local scores only: its row has no `GLOBAL_SCORES`."""
    prev = sample["prev_mask"] if bool(sample["has_prev"]) else None
    gt_global, gt_local = ground_truths(sample, np)
    scores = rice_scores(np.asarray(pred, np.uint8), prev, gt_global, gt_local)
    phase = MODE_PHASE.get(sample.get("mode", ""), int(bool(sample["has_prev"])))
    names = SCORES if has_global_truth(sample) else tuple(set(SCORES) - set(GLOBAL_SCORES))
    return {
        **{k: np.asarray([scores[k]], np.float64) for k in SCORES if k in names},
        "gesture_kind": np.asarray([sample["gesture_kind"]], np.int32),
        "has_prev": np.asarray([bool(sample["has_prev"])]),
        "phase": np.asarray([phase], np.int32),
    }


def summarize_scores(score_batches: Iterable[dict[str, Any]]) -> dict[str, float]:
    """Means named `<score>/<kind>/<phase>` and `<score>/all/<phase>` over all batches, for every
    per-sample score in the batches (RICE/IoU, and context_acc/kind_acc for multi-head models).
    Phases (`PHASES`) come from a `phase` entry when present, else from `has_prev`."""
    return summarize_state(score_batches).compute()


def summarize_state(score_batches: Iterable[dict[str, Any]]) -> Averages:
    """The mergeable state behind `summarize_scores` (NaN-free means per name)."""
    acc = Averages()
    for scores in score_batches:
        kinds = np.asarray(scores["gesture_kind"])
        phases = np.asarray(scores.get("phase", np.asarray(scores["has_prev"]).astype(np.int32)))
        known = np.asarray(scores.get("has_region", np.ones(kinds.shape, bool))).astype(bool)
        for p, phase in enumerate(PHASES):
            phase_mask = phases == p
            if not phase_mask.any():
                continue
            for name in [k for k in scores if k not in _NOT_SCORES]:
                values = np.asarray(scores[name])
                rows = phase_mask & (known if name in GLOBAL_SCORES else True)
                if not rows.any():
                    continue
                acc = acc.add(f"{name}/all/{phase}", values, rows)
                for kind in GestureKind:
                    mask = rows & (kinds == int(kind))
                    if mask.any():
                        acc = acc.add(f"{name}/{kind.name.lower()}/{phase}", values, mask)
    return acc


def format_rice_table(metrics: dict[str, float], title: str = "", score: str = "rice_local") -> str:
    """Plain-text table: rows = gesture kinds (+ all), columns = creation / refinement."""
    rows = [f"{title} ({score}, higher is better)" if title else score]
    rows.append(f"{'gesture':<14}{'creation':>10}{'refinement':>12}")
    for kind in [k.name.lower() for k in GestureKind] + ["all"]:
        cells = [metrics.get(f"{score}/{kind}/{phase}") for phase in PHASES]
        if all(c is None for c in cells):
            continue
        text = [f"{c:>10.3f}" if c is not None else f"{'-':>10}" for c in cells]
        rows.append(f"{kind:<14}{text[0]}{text[1]:>12}")
    return "\n".join(rows)
