"""BREPS robustness metrics: IoU-Tight, IoU-Min, IoU-Max and IoU-Δ = IoU-Max − IoU-Min.

Per instance: IoU with the tight box, and the lowest / highest IoU the attack found among
plausible boxes (both include the tight box, so Min <= Tight <= Max). Dataset values are means
over instances; Δ is the mean per-instance spread (= mean Max − mean Min).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

METRIC_NAMES = ("iou_tight", "iou_min", "iou_max", "iou_delta")
TOLERANCE = 1e-5


def breps_metrics(iou_tight: Any, iou_min: Any, iou_max: Any) -> dict[str, float]:
    """Means of per-instance IoUs `[N]` → dict(n, iou_tight, iou_min, iou_max, iou_delta).

    Raises ValueError when shapes differ, values leave [0, 1], or Min > Tight / Max < Tight.
    """
    arrays = {}
    for name, value in (("iou_tight", iou_tight), ("iou_min", iou_min), ("iou_max", iou_max)):
        arr = np.asarray(value, dtype=np.float64).ravel()
        if not np.isfinite(arr).all() or (arr < 0).any() or (arr > 1).any():
            raise ValueError(f"{name} must be finite values in [0, 1]")
        arrays[name] = arr
    sizes = {k: v.size for k, v in arrays.items()}
    if len(set(sizes.values())) != 1:
        raise ValueError(f"iou arrays differ in length: {sizes}")
    tight, lo, hi = arrays["iou_tight"], arrays["iou_min"], arrays["iou_max"]
    if (lo > tight + TOLERANCE).any():
        raise ValueError("iou_min exceeds iou_tight for some instance (Min includes the tight box)")
    if (hi < tight - TOLERANCE).any():
        raise ValueError(
            "iou_max is below iou_tight for some instance (Max includes the tight box)"
        )
    n = tight.size
    mean = lambda a: float(a.mean()) if n else float("nan")
    return {
        "n": n,
        "iou_tight": mean(tight),
        "iou_min": mean(lo),
        "iou_max": mean(hi),
        "iou_delta": mean(hi - lo),
    }


def breps_table(rows: Mapping[tuple[str, str], Mapping[str, float]], digits: int = 3) -> str:
    """Markdown table of `breps_metrics` results keyed by (dataset, model)."""
    header = "| dataset | model | n | IoU-Tight | IoU-Min | IoU-Max | IoU-Δ |"
    lines = [header, "|---|---|---:|---:|---:|---:|---:|"]
    for (dataset, model), m in rows.items():
        values = " | ".join(f"{m[k]:.{digits}f}" for k in METRIC_NAMES)
        lines.append(f"| {dataset} | {model} | {m['n']} | {values} |")
    return "\n".join(lines)
