"""Exhaustive box sweep (BREPS Fig. 1): keep the box centred on the object, vary its height and
width over a grid, segment with every box (one batched forward per chunk) and map the IoU."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dig_jax.metrics import iou
from dig_jax.robustness.breps.attack import EncodeBox, PredictLogits, project_box, start_box


class Heatmap(NamedTuple):
    """ious f32[nh, nw] for boxes f32[nh, nw, 4] of heights f32[nh] x widths f32[nw] (px, before
    clipping to the image); tight f32[4]; jump = largest |ΔIoU| between 4-neighbour grid cells,
    found between cells `jump_from` and `jump_to` ((row, col) index pairs)."""

    heights: np.ndarray
    widths: np.ndarray
    ious: np.ndarray
    boxes: np.ndarray
    tight: np.ndarray
    jump: float
    jump_from: tuple[int, int]
    jump_to: tuple[int, int]


def centred_boxes(tight: Any, heights: Any, widths: Any) -> np.ndarray:
    """Boxes f32[nh, nw, 4] of every (height, width) pair, centred on the centre of `tight`."""
    tight = np.asarray(tight, np.float32)
    cx, cy = (tight[0] + tight[2]) / 2, (tight[1] + tight[3]) / 2
    h = np.asarray(heights, np.float32)[:, None] * np.ones((1, len(widths)), np.float32)
    w = np.asarray(widths, np.float32)[None, :] * np.ones((len(heights), 1), np.float32)
    return np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=-1)


def largest_jump(ious: Any) -> tuple[float, tuple[int, int], tuple[int, int]]:
    """Largest absolute IoU difference between vertically or horizontally adjacent cells."""
    a = np.asarray(ious, np.float64)
    best = (0.0, (0, 0), (0, 0))
    for axis in (0, 1):
        if a.shape[axis] < 2:
            continue
        diff = np.abs(np.diff(a, axis=axis))
        i, j = np.unravel_index(int(np.argmax(diff)), diff.shape)
        if diff[i, j] > best[0]:
            to = (i + 1, j) if axis == 0 else (i, j + 1)
            best = (float(diff[i, j]), (int(i), int(j)), (int(to[0]), int(to[1])))
    return best


@functools.lru_cache(maxsize=16)
def _chunk_fn(predict_logits: PredictLogits, encode_box: EncodeBox) -> Any:
    def run(boxes: jax.Array, image: jax.Array, gt: jax.Array, bounds: jax.Array) -> jax.Array:
        boxes = project_box(boxes, bounds)
        x = jax.vmap(encode_box, in_axes=(0, None))(boxes, image.astype(jnp.float32))
        logits = predict_logits(x)
        return iou(logits > 0, jnp.broadcast_to(gt, logits.shape))

    return jax.jit(run)


def boxes_iou(
    predict_logits: PredictLogits,
    encode_box: EncodeBox,
    image: Any,
    gt: Any,
    boxes: Any,
    *,
    chunk: int = 16,
    bounds: Any = None,
) -> np.ndarray:
    """Mask IoU f32[N] of the prediction from each box f32[N, 4] (clipped to `bounds` (W, H),
    default the image) with `gt`; one batched forward per `chunk` boxes (last chunk padded)."""
    image, gt = jnp.asarray(image), jnp.asarray(gt)
    if image.ndim != 3 or gt.shape != image.shape[:2]:
        raise ValueError(f"image [H, W, 3] and gt [H, W] expected, got {image.shape}, {gt.shape}")
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    flat = np.asarray(boxes, np.float32).reshape(-1, 4)
    if len(flat) == 0:
        return np.zeros((0,), np.float32)
    bounds = jnp.asarray(
        (image.shape[1], image.shape[0]) if bounds is None else bounds, jnp.float32
    )
    pad = (-len(flat)) % chunk
    padded = np.concatenate([flat, np.repeat(flat[-1:], pad, axis=0)])
    run = _chunk_fn(predict_logits, encode_box)
    parts = [run(padded[i : i + chunk], image, gt, bounds) for i in range(0, len(padded), chunk)]
    return np.concatenate([np.asarray(p) for p in parts])[: len(flat)]


def box_heatmap(
    predict_logits: PredictLogits,
    encode_box: EncodeBox,
    image: Any,
    gt: Any,
    *,
    scales: Sequence[float] = tuple(np.linspace(0.6, 1.4, 17)),
    chunk: int = 16,
    bounds: Any = None,
) -> Heatmap:
    """IoU of every centred box with height = s_h · tight height, width = s_w · tight width,
    s_h, s_w in `scales`; image [H, W, 3], gt [H, W] {0, 1, 255}; boxes are clipped to `bounds`
    (W, H) before the model sees them. Forwards run `chunk` boxes at a time (last chunk padded).
    """
    image, gt = jnp.asarray(image), jnp.asarray(gt)
    if image.ndim != 3 or gt.shape != image.shape[:2]:
        raise ValueError(f"image [H, W, 3] and gt [H, W] expected, got {image.shape}, {gt.shape}")
    scales = np.asarray(scales, np.float32)
    if scales.ndim != 1 or scales.size == 0 or (scales <= 0).any():
        raise ValueError("scales must be a non-empty 1-D sequence of positive factors")
    bounds = jnp.asarray(
        (image.shape[1], image.shape[0]) if bounds is None else bounds, jnp.float32
    )
    tight = np.asarray(start_box(gt, bounds))
    heights = scales * (tight[3] - tight[1])
    widths = scales * (tight[2] - tight[0])
    boxes = centred_boxes(tight, heights, widths)
    ious = boxes_iou(
        predict_logits, encode_box, image, gt, boxes, chunk=chunk, bounds=bounds
    ).reshape(boxes.shape[:2])
    jump, frm, to = largest_jump(ious)
    return Heatmap(heights, widths, ious, boxes, tight, jump, frm, to)


def plot_heatmap(heatmap: Heatmap, ax: Any = None, title: str | None = None) -> Any:
    """Draw the IoU map over (width, height) in px like BREPS Fig. 1; marks the tight box (+)
    and the largest neighbour jump (white segment). Returns the matplotlib Figure."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(5, 4))
    w, h = heatmap.widths, heatmap.heights
    dw = (w[1] - w[0]) / 2 if len(w) > 1 else 0.5
    dh = (h[1] - h[0]) / 2 if len(h) > 1 else 0.5
    im = ax.imshow(
        heatmap.ious,
        origin="lower",
        cmap="viridis",
        vmin=0,
        vmax=1,
        aspect="auto",
        extent=(w[0] - dw, w[-1] + dw, h[0] - dh, h[-1] + dh),
    )
    tight = heatmap.tight
    ax.plot(tight[2] - tight[0], tight[3] - tight[1], "r+", ms=12, mew=2, label="tight box")
    (r0, c0), (r1, c1) = heatmap.jump_from, heatmap.jump_to
    ax.plot([w[c0], w[c1]], [h[r0], h[r1]], "w-", lw=3, label=f"max jump {heatmap.jump:.2f}")
    ax.set_xlabel("box width (px)")
    ax.set_ylabel("box height (px)")
    ax.set_title(title or "IoU of centred boxes")
    ax.legend(loc="upper left", fontsize=8)
    ax.figure.colorbar(im, ax=ax, label="IoU")
    return ax.figure
