"""A picture of what the predictors do: each gesture kind on a few photos, with each predictor's
mask and its IoU (global GT), from the same samples the tables are computed on."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from dig_jax.evaluation.predictors import Predictor
from dig_jax.evaluation.scores import ground_truths
from dig_jax.gestures.types import GestureKind
from dig_jax.metrics import iou
from dig_jax.outputs import save_figure


def gallery_samples(samples: Sequence[dict[str, Any]], photos: int) -> list[list[dict]]:
    """Creation samples of the first `photos` regions, grouped per region (one per kind)."""
    groups: dict[tuple, list[dict]] = {}
    for sample in samples:
        if sample.get("mode", "creation") != "creation":
            continue
        key = (sample["image_id"], int(sample["instance_id"]))
        if key not in groups and len(groups) == photos:
            break
        groups.setdefault(key, []).append(sample)
    return list(groups.values())


def _overlay(image: np.ndarray, mask: np.ndarray, gesture: np.ndarray) -> np.ndarray:
    out = image.astype(np.float32) * 0.6
    out[mask > 0] = out[mask > 0] * 0.5 + np.array([40, 110, 255]) * 0.5
    out[gesture > 0] = (255, 40, 40)
    return np.clip(out, 0, 255).astype(np.uint8)


def save_prediction_gallery(
    samples: Sequence[dict[str, Any]],
    predictors: dict[str, Predictor],
    path: str | Path,
    photos: int = 3,
) -> Path:
    """PNG at `path`: rows = photo × predictor, columns = gesture kinds; each cell shows the
    gesture (red) and the predicted mask (blue) with IoU against the global GT."""
    groups = gallery_samples(samples, photos)
    if not groups:
        raise ValueError("samples: no creation samples to draw")
    kinds = sorted({int(s["gesture_kind"]) for group in groups for s in group})
    rows = [(group, name) for group in groups for name in predictors]
    fig, axes = plt.subplots(
        len(rows), len(kinds), figsize=(2.6 * len(kinds), 2.3 * len(rows)), squeeze=False
    )
    for r, (group, name) in enumerate(rows):
        by_kind = {int(s["gesture_kind"]): s for s in group}
        chosen = [by_kind[k] for k in kinds if k in by_kind]
        masks = dict(zip([int(s["gesture_kind"]) for s in chosen], predictors[name](chosen),
                         strict=True))  # fmt: skip
        for c, kind in enumerate(kinds):
            ax = axes[r, c]
            ax.axis("off")
            if kind not in by_kind:
                continue
            sample = by_kind[kind]
            gt, _ = ground_truths(sample, np)
            score = float(iou(masks[kind], gt))
            ax.imshow(_overlay(sample["image"], masks[kind], sample["gesture"]))
            ax.set_title(f"{name}: {GestureKind(kind).name.lower()} {score:.2f}", fontsize=7)
    return save_figure(fig, path, dpi=90)
