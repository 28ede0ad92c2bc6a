"""DIG tables: RICE / IoU per gesture kind, creation vs refinement, on a fixed sample set."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import jax
import numpy as np
from tqdm import tqdm

from dig_jax.evaluation.predictors import Predictor
from dig_jax.evaluation.protocol import batches
from dig_jax.evaluation.scores import score_batch, summarize_scores

_score = jax.jit(score_batch)


def evaluate_samples(
    predict: Predictor,
    samples: Iterable[dict[str, Any]],
    *,
    batch_size: int = 8,
    total: int | None = None,
    desc: str = "evaluate",
) -> tuple[dict[str, float], int]:
    """Means named `<score>/<kind>/<create|refine>` (and `/all/`) over the samples, and the
    number of samples scored. Scores: rice_local, rice_global, iou_local, iou_global."""
    scored, count = [], 0
    keys = ("prev_mask", "region", "target", "gesture_kind", "has_prev")
    with tqdm(total=total, desc=desc, unit="sample", leave=False) as bar:
        for batch in batches(samples, batch_size):
            pred = predict(batch)
            scored.append(jax.device_get(_score(pred, {k: batch[k] for k in keys})))
            count += len(pred)
            bar.update(len(pred))
    return summarize_scores(scored), count


def kind_table(
    results: dict[str, dict[str, float]], score: str = "iou_global", phase: str = "create"
) -> str:
    """Plain-text table: rows = datasets, columns = gesture kinds (+ all)."""
    kinds = ["click", "scribble", "loose_lasso", "tight_lasso", "rectangle", "all"]
    lines = [f"{score} ({phase})", f"{'dataset':<16}" + "".join(f"{k:>13}" for k in kinds)]
    for name, metrics in results.items():
        cells = [metrics.get(f"{score}/{k}/{phase}", np.nan) for k in kinds]
        lines.append(f"{name:<16}" + "".join(f"{c:>13.3f}" for c in cells))
    return "\n".join(lines)
