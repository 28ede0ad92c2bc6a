"""Fixed-shape inputs for batched attacks: resize the longer side to `size`, pad to size x size.

Padding is void (255) in the GT and black in the image; the returned `bounds` (W', H') keep the
boxes on the real image, so one compiled attack serves a whole dataset of mixed image sizes.
"""

from __future__ import annotations

from typing import NamedTuple

import cv2
import numpy as np

VOID = 255


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
