"""Boxes `(x1, y1, x2, y2)` in continuous pixel-edge coordinates: tight box, IoU, CIoU loss.

`box_iou` and `ciou_loss` broadcast over leading axes and are differentiable and NaN-free in jnp,
also for touching, nested, identical or zero-area boxes.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dig_jax.metrics._backend import check_broadcast, check_mask, concrete, is_jax, xp_of


def tight_box(mask: Any) -> Any:
    """Tight box `(cmin, rmin, cmax + 1, rmax + 1)` of the pixels equal to 1 in `mask[..., H, W]`.

    numpy: raises ValueError for an empty mask. jnp (jit-safe): an empty mask gives (0, 0, 0, 0).
    Void (255) pixels are not object.
    """
    check_mask("mask", mask, allow_void=True)
    xp = xp_of(mask)
    fg = mask == 1
    rows = xp.any(fg, axis=-1)  # [..., H]
    cols = xp.any(fg, axis=-2)  # [..., W]
    if not is_jax(mask) and not rows.any(axis=-1).all():
        raise ValueError("mask is empty: it has no pixel equal to 1, so it has no tight box")
    h, w = fg.shape[-2], fg.shape[-1]

    def first_last(any_along: Any, n: int) -> tuple[Any, Any]:
        first = xp.argmax(any_along, axis=-1)
        last = n - 1 - xp.argmax(any_along[..., ::-1], axis=-1)
        nonempty = xp.any(any_along, axis=-1)
        return xp.where(nonempty, first, 0), xp.where(nonempty, last + 1, 0)

    r0, r1 = first_last(rows, h)
    c0, c1 = first_last(cols, w)
    return xp.stack([c0, r0, c1, r1], axis=-1).astype(xp.float32)


def _check_boxes(name: str, box: Any) -> None:
    if box.shape[-1:] != (4,):
        raise ValueError(f"{name} must have shape [..., 4], got {tuple(box.shape)}")
    arr = concrete(box)
    if arr is None:
        return  # a tracer
    if not (arr.dtype == np.bool_ or np.issubdtype(arr.dtype, np.number)):
        raise ValueError(f"{name} must hold numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or inf")
    if (arr[..., 2] < arr[..., 0]).any() or (arr[..., 3] < arr[..., 1]).any():
        raise ValueError(f"{name} is inverted: need x1 <= x2 and y1 <= y2")


def _parts(box: Any) -> tuple[Any, Any, Any, Any]:
    return box[..., 0], box[..., 1], box[..., 2], box[..., 3]


def _common_frame(a: Any, b: Any, xp: Any) -> tuple[Any, Any]:
    """`a` and `b` moved and scaled together so that their enclosing box is at most 1 wide and
    tall: IoU and CIoU do not change, and boxes far out (1e200) no longer overflow. The frame
    is held constant in jnp gradients (both scores are invariant to it)."""
    lo = xp.minimum(a[..., :2], b[..., :2])
    extent = xp.max(xp.maximum(a[..., 2:], b[..., 2:]) - lo, axis=-1, keepdims=True)
    scale = xp.where(extent > 0, extent, 1)
    if xp is jnp:
        lo, scale = jax.lax.stop_gradient(lo), jax.lax.stop_gradient(scale)
    origin = xp.concatenate([lo, lo], axis=-1)
    return (a - origin) / scale, (b - origin) / scale


def _inter_union(a: Any, b: Any, xp: Any) -> tuple[Any, Any]:
    ax1, ay1, ax2, ay2 = _parts(a)
    bx1, by1, bx2, by2 = _parts(b)
    iw = xp.maximum(xp.minimum(ax2, bx2) - xp.maximum(ax1, bx1), 0)
    ih = xp.maximum(xp.minimum(ay2, by2) - xp.maximum(ay1, by1), 0)
    inter = iw * ih
    union = (ax2 - ax1) * (ay2 - ay1) + (bx2 - bx1) * (by2 - by1) - inter
    return inter, union


def _safe_iou(a: Any, b: Any, xp: Any) -> Any:
    a, b = _common_frame(a, b, xp)
    inter, union = _inter_union(a, b, xp)
    same = xp.all(a == b, axis=-1)
    positive = union > 0
    value = inter / xp.where(positive, union, 1)
    # Two zero-area boxes: identical ones match perfectly (like two empty masks), others do not.
    return xp.where(positive, value, xp.where(same, 1.0, 0.0))


def box_iou(a: Any, b: Any) -> Any:
    """IoU of boxes `a[..., 4]` and `b[..., 4]` (broadcasting). Zero-area identical boxes give 1."""
    a_, b_ = (jnp.asarray(a), jnp.asarray(b)) if is_jax(a, b) else (np.asarray(a), np.asarray(b))
    _check_boxes("a", a_)
    _check_boxes("b", b_)
    check_broadcast(a=a_, b=b_)
    xp = xp_of(a_, b_)
    dtype = xp.float32 if xp is jnp else xp.float64
    return _safe_iou(a_.astype(dtype), b_.astype(dtype), xp)


def ciou_loss(box: Any, target_box: Any) -> Any:
    """Complete-IoU loss `1 − IoU + ρ²/c² + α·v` (Zheng et al., 2020) of `box` to `target_box`.

    ρ: distance between box centres; c: diagonal of the smallest enclosing box;
    v = 4/π² · (atan(w_t/h_t) − atan(w/h))²; α = v / ((1 − IoU) + v), held constant in the
    gradient as in the paper. 0 for identical boxes; every term is guarded against 0/0.
    """
    b_, t_ = (
        (jnp.asarray(box), jnp.asarray(target_box))
        if is_jax(box, target_box)
        else (np.asarray(box), np.asarray(target_box))
    )
    _check_boxes("box", b_)
    _check_boxes("target_box", t_)
    check_broadcast(box=b_, target_box=t_)
    xp = xp_of(b_, t_)
    dtype = xp.float32 if xp is jnp else xp.float64
    b_, t_ = _common_frame(b_.astype(dtype), t_.astype(dtype), xp)
    iou = _safe_iou(b_, t_, xp)

    bx1, by1, bx2, by2 = _parts(b_)
    tx1, ty1, tx2, ty2 = _parts(t_)
    rho2 = ((bx1 + bx2) - (tx1 + tx2)) ** 2 / 4 + ((by1 + by2) - (ty1 + ty2)) ** 2 / 4
    cw = xp.maximum(bx2, tx2) - xp.minimum(bx1, tx1)
    ch = xp.maximum(by2, ty2) - xp.minimum(by1, ty1)
    c2 = cw**2 + ch**2
    dist = xp.where(c2 > 0, rho2 / xp.where(c2 > 0, c2, 1), 0.0)

    def aspect(w: Any, h: Any) -> Any:
        # atan(w / h) written as atan2, with a safe argument where both are 0 (a point box).
        point = (w == 0) & (h == 0)
        return xp.where(point, 0.0, xp.arctan2(xp.where(point, 1.0, w), xp.where(point, 1.0, h)))

    v = (4 / math.pi**2) * (aspect(tx2 - tx1, ty2 - ty1) - aspect(bx2 - bx1, by2 - by1)) ** 2
    den = (1 - iou) + v
    alpha = xp.where(den > 0, v / xp.where(den > 0, den, 1), 0.0)
    if xp is jnp:
        alpha = jax.lax.stop_gradient(alpha)
    return 1 - iou + dist + alpha * v
