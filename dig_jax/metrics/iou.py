"""Mask IoU (void-aware) and the RICE score of DIG, on numpy or jnp arrays.

Every function reduces over the last two axes `[..., H, W]` and broadcasts over the leading ones,
so the same code runs on one mask, on a batch, or inside `jax.jit` / `jax.vmap`.
"""

from __future__ import annotations

from typing import Any

from dig_jax.metrics._backend import (
    as_array,
    check_broadcast,
    check_mask,
    check_same_shape,
    check_unit_interval,
    is_jax,
    xp_of,
)

VOID = 255


def iou(pred: Any, gt: Any, void: int = VOID) -> Any:
    """Intersection over union of binary masks, ignoring pixels where `gt == void`.

    Args:
      pred: bool or integer `[..., H, W]` with values {0, 1}.
      gt: bool or integer `[..., H, W]` with values {0, 1, void}.
      void: label of ignored ground-truth pixels.
    Returns:
      float `[...]`; the IoU of two empty masks (after removing void) is 1.0.
    Python lists are read as numpy arrays.
    """
    pred, gt = as_array(pred), as_array(gt)
    check_mask("pred", pred, allow_void=False)
    check_mask("gt", gt, allow_void=True, void=void)
    check_same_shape(pred=pred, gt=gt)
    xp = xp_of(pred, gt)
    valid = gt != void
    p = (pred != 0) & valid
    g = (gt == 1) & valid
    inter = xp.sum(p & g, axis=(-2, -1))
    union = xp.sum(p | g, axis=(-2, -1))
    dtype = xp.float32 if is_jax(pred, gt) else xp.float64
    inter = inter.astype(dtype)
    union = union.astype(dtype)
    return xp.where(union == 0, xp.asarray(1.0, dtype), inter / xp.maximum(union, 1))


def rice(alpha: Any, beta: Any) -> Any:
    """Relative IoU Change Error of DIG: how much of the possible gain (or loss) was realised.

    `RICE(α, β) = (α − β) / (1 − β)` if `α ≥ β`, else `α / β − 1`; with α = IoU(pred, GT) and
    β = IoU(prev, GT) (β = 0 for creation, where RICE = IoU). β = 1 is defined: 0 when α = 1,
    α − 1 otherwise. Broadcasts; result in [-1, 1]; never NaN and differentiable in jnp.
    """
    check_unit_interval("alpha", alpha)
    check_unit_interval("beta", beta)
    check_broadcast(alpha=alpha, beta=beta)
    xp = xp_of(alpha, beta)
    alpha = xp.asarray(alpha)
    beta = xp.asarray(beta)
    gain = alpha >= beta
    # Safe denominators on the branch not taken, so neither values nor gradients become NaN.
    up_den = xp.where(gain & (beta < 1), 1 - beta, 1)
    down_den = xp.where(~gain & (beta > 0), beta, 1)
    up = xp.where(beta < 1, (alpha - beta) / up_den, 0.0)
    down = alpha / down_den - 1
    return xp.where(gain, up, down)


def rice_scores(pred: Any, prev: Any | None, gt_global: Any, gt_local: Any) -> dict[str, Any]:
    """RICE and IoU against the global GT (whole region) and the local GT (targeted change).

    `prev=None` or an all-zero `prev` means creation (β = 0). All masks `[..., H, W]`; GTs may
    hold void (255). Returns `rice_global`, `rice_local`, `iou_global`, `iou_local`, each `[...]`.
    """
    pred, gt_global, gt_local = as_array(pred), as_array(gt_global), as_array(gt_local)
    prev = None if prev is None else as_array(prev)
    check_mask("pred", pred, allow_void=False)
    if prev is not None:
        check_mask("prev", prev, allow_void=False)
        check_same_shape(pred=pred, prev=prev)
    check_same_shape(pred=pred, gt_global=gt_global, gt_local=gt_local)
    xp = xp_of(pred, prev, gt_global, gt_local)
    out: dict[str, Any] = {}
    for name, gt in (("global", gt_global), ("local", gt_local)):
        alpha = iou(pred, gt)
        if prev is None:
            beta = xp.zeros_like(alpha)
        else:
            has_prev = xp.any(prev != 0, axis=(-2, -1))
            beta = xp.where(has_prev, iou(prev, gt), 0.0)
        out[f"rice_{name}"] = rice(alpha, beta)
        out[f"iou_{name}"] = alpha
    return out
