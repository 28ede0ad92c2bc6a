"""Fixed-shape inputs for batched attacks, so one compiled attack serves a whole dataset of
mixed photo sizes: `zoom_instance` (the crop `predict` uses for the tight box, what the dataset
attack runs on) and `letterbox` (the whole photo resized and padded, for real user boxes and
figures). Padding is void (255) in the GT; `bounds` keep the boxes on the real photo.
"""

from __future__ import annotations

from typing import NamedTuple

import cv2
import numpy as np

from dig_jax.metrics import VOID


class Letterboxed(NamedTuple):
    """image uint8[S, S, 3], gt uint8[S, S] (pad = void), bounds f32[2] = (W', H') of the resized
    photo, scale f32[2] = (W'/W, H'/H): multiply a box (x1, y1, x2, y2) by scale[[0,1,0,1]]."""

    image: np.ndarray
    gt: np.ndarray
    bounds: np.ndarray
    scale: np.ndarray


def letterbox(image: np.ndarray, gt: np.ndarray, size: int) -> Letterboxed:
    """Resize (area for the image, nearest for the GT) so the longer side is `size`, then pad."""
    image, gt = np.asarray(image), np.asarray(gt)
    if image.ndim != 3 or image.shape[-1] != 3 or image.dtype != np.uint8:
        raise ValueError(f"image must be uint8[H, W, 3], got {image.dtype}{list(image.shape)}")
    if gt.shape != image.shape[:2]:
        raise ValueError(f"gt must have shape {image.shape[:2]}, got {gt.shape}")
    if size < 1:
        raise ValueError(f"size must be >= 1, got {size}")
    h, w = gt.shape
    f = size / max(h, w)
    nh, nw = max(1, round(h * f)), max(1, round(w * f))
    img = cv2.resize(image, (nw, nh), interpolation=cv2.INTER_AREA)
    lab = cv2.resize(gt.astype(np.uint8), (nw, nh), interpolation=cv2.INTER_NEAREST)
    out_img = np.zeros((size, size, 3), np.uint8)
    out_gt = np.full((size, size), VOID, np.uint8)
    out_img[:nh, :nw], out_gt[:nh, :nw] = img, lab
    bounds = np.array([nw, nh], np.float32)
    return Letterboxed(out_img, out_gt, bounds, np.array([nw / w, nh / h], np.float32))


class Zoomed(NamedTuple):
    """One instance in the zoom crop `predict` would use for its tight box (`dig_jax.prompts`).

    image uint8[S, S, 3] (padded with the mean colour), gt uint8[S, S] (void outside the
    photo), bounds f32[4] = the photo's extent in crop pixels (x_lo, y_lo, x_hi, y_hi), box the
    `ZoomBox`, scale = crop pixels per photo pixel, shape = the photo's (H, W).
    """

    image: np.ndarray
    gt: np.ndarray
    bounds: np.ndarray
    box: object
    scale: float
    shape: tuple[int, int]

    def to_photo(self, boxes: np.ndarray) -> np.ndarray:
        """Boxes f[..., 4] in crop pixels -> photo pixels."""
        offset = np.array([self.box.x0, self.box.y0] * 2)
        return np.asarray(boxes, np.float64) / self.scale + offset


def zoom_instance(image: np.ndarray, gt: np.ndarray, size: int) -> Zoomed:
    """The instance as a model working at `size` sees it when given the tight box of `gt`
    drawn as a rectangle: the zoom box of that gesture, resampled to size x size."""
    from dig_jax import prompts
    from dig_jax.gestures import Gesture, GestureKind, box_outline_points, rasterize
    from dig_jax.metrics import tight_box

    image, gt = np.asarray(image), np.asarray(gt)
    if image.ndim != 3 or image.shape[-1] != 3 or image.dtype != np.uint8:
        raise ValueError(f"image must be uint8[H, W, 3], got {image.dtype}{list(image.shape)}")
    if gt.shape != image.shape[:2]:
        raise ValueError(f"gt must have shape {image.shape[:2]}, got {gt.shape}")
    if not (gt == 1).any():
        raise ValueError("gt has no object pixel")
    h, w = gt.shape
    tight = np.asarray(tight_box(gt), np.float32)
    outline = Gesture(GestureKind.RECTANGLE, box_outline_points(tight), True)
    box = prompts.zoom_box(rasterize(outline, (h, w)), None, size)
    s = box.scale(size)
    bounds = np.array(
        [max(0.0, -box.x0 * s), max(0.0, -box.y0 * s),
         min(float(size), (w - box.x0) * s), min(float(size), (h - box.y0) * s)], np.float32,
    )  # fmt: skip
    return Zoomed(
        prompts.warp(image, box, size, fill=prompts.PAD_RGB),
        prompts.crop_labels(gt, box, size, VOID),
        bounds,
        box,
        s,
        (h, w),
    )
