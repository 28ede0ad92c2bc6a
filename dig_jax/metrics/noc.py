"""NoC / NoG (number of clicks or gestures to reach an IoU) and NoF (failures)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dig_jax.metrics._backend import as_array, check_unit_interval, is_jax, xp_of

DEFAULT_THRESHOLDS = (0.80, 0.85, 0.90)
MAX_INTERACTIONS = 20


def noc(
    ious: Any,
    thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
    max_interactions: int = MAX_INTERACTIONS,
) -> dict[str, Any]:
    """Interactions needed to reach each IoU threshold.

    Args:
      ious: float `[..., T]`, the IoU after interaction 1..T (T <= max_interactions); lists
        and integer or bool arrays (0 / 1 IoUs) are read as floats.
        IoUs must lie in [0, 1] (ValueError otherwise; not checked on tracers, under jit).
      thresholds: IoU levels t in (0, 1]; reaching means IoU >= t (ties count as reached).
    Returns:
      `noc`: int32 `[..., len(thresholds)]`, the 1-based index of the first interaction with
      IoU >= t, else `max_interactions`; `failed`: bool, same shape, True where t was never reached.
    """
    ious = as_array(ious)
    xp = xp_of(ious)
    if not xp.issubdtype(ious.dtype, xp.floating):  # int IoUs would truncate the thresholds
        ious = ious.astype(xp.float32 if is_jax(ious) else xp.float64)
    if ious.ndim < 1 or ious.shape[-1] == 0:
        raise ValueError(f"ious must have shape [..., T] with T >= 1, got {tuple(ious.shape)}")
    if ious.shape[-1] > max_interactions:
        raise ValueError(
            f"ious has {ious.shape[-1]} interactions, more than max_interactions={max_interactions}"
        )
    check_unit_interval("ious", ious)  # NaN or outside [0, 1]; skipped for tracers
    check_thresholds(thresholds)
    if isinstance(max_interactions, bool) or not isinstance(max_interactions, (int, np.integer)):
        raise ValueError(f"max_interactions must be an int, got {max_interactions!r}")
    thr = xp.asarray(thresholds, dtype=ious.dtype)
    reached = ious[..., None, :] >= thr[:, None]  # [..., K, T]
    failed = ~xp.any(reached, axis=-1)
    first = xp.argmax(reached, axis=-1) + 1
    counts = xp.where(failed, max_interactions, first).astype(xp.int32)
    return {"noc": counts, "failed": failed}


def check_thresholds(thresholds: Sequence[float]) -> None:
    """Raise ValueError unless `thresholds` is a non-empty list of numbers in (0, 1]."""
    values = np.asarray(thresholds)
    ok = values.ndim == 1 and values.size > 0 and np.issubdtype(values.dtype, np.number)
    if not ok or not np.all((values > 0) & (values <= 1)):  # NaN fails the comparison
        raise ValueError(f"thresholds must be numbers in (0, 1], got {thresholds!r:.80}")


def noc_summary(
    result: dict[str, Any], thresholds: Sequence[float] = DEFAULT_THRESHOLDS
) -> dict[str, float]:
    """Mean NoC and failure count (NoF) over instances, keyed like `NoC@85` / `NoF@85`."""
    counts = np.asarray(result["noc"]).reshape(-1, len(thresholds))
    failed = np.asarray(result["failed"]).reshape(-1, len(thresholds))
    out = {}
    for k, t in enumerate(thresholds):
        tag = f"{round(100 * t)}"
        out[f"NoC@{tag}"] = float(counts[:, k].mean()) if counts.size else float("nan")
        out[f"NoF@{tag}"] = int(failed[:, k].sum())
    return out
