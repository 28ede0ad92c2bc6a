"""DIG tables: RICE / IoU per gesture kind, creation vs refinement, on a fixed sample set."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
from tqdm import tqdm

from dig_jax.evaluation.predictors import Predictor
from dig_jax.evaluation.protocol import chunks
from dig_jax.evaluation.scores import score_sample, summarize_state
from dig_jax.metrics import Averages


def score_samples(
    predict: Predictor,
    samples: Iterable[dict[str, Any]],
    *,
    batch_size: int = 8,
    total: int | None = None,
    desc: str = "evaluate",
    progress: bool = True,
) -> Averages:
    """Mergeable means named `<score>/<kind>/<create|refine|multi>` (and `/all/`) of the
    predictions on `samples`: rice_local, rice_global, iou_local, iou_global, each at the
    sample's own resolution; `predict` gets `batch_size` samples at a time."""
    rows = []
    with tqdm(total=total, desc=desc, unit="sample", disable=not progress) as bar:
        for chunk in chunks(samples, batch_size):
            preds = predict(chunk)
            rows.extend(score_sample(p, s) for p, s in zip(preds, chunk, strict=True))
            bar.update(len(chunk))
    return summarize_state(rows)


def evaluate_samples(
    predict: Predictor, samples: Iterable[dict[str, Any]], **options: Any
) -> tuple[dict[str, float], int]:
    """(means of `score_samples` with its keywords `options`, number of samples scored)."""
    state = score_samples(predict, samples, **options)
    counts = state.counts()
    count = sum(v for k, v in counts.items() if k.startswith("iou_local/all/"))
    return state.compute(), count


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
