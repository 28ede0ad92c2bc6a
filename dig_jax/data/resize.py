"""The one resize policy for photos and their label maps (docs/design.md, "Resize").

A photo is used at its own size; when its long side exceeds `max_side` it is shrunk, aspect
ratio kept, to a long side of `max_side` (`shrunk_shape`: each side rounded, at least 1 px).
Pixels (`resize_image`, `resize_labels`): the image is averaged (cv2.INTER_AREA) when no side
grows and bilinear (cv2.INTER_LINEAR) when one does; masks, void, gesture maps and every other
label map are nearest (cv2.INTER_NEAREST), so {0, 1, 255} stay exact.
"""

from __future__ import annotations

import cv2
import numpy as np


def fit_within(shape: tuple[int, int], max_side: int) -> tuple[int, int]:
    """(H, W) scaled so the long side is `max_side` (aspect ratio kept, at least 1 px)."""
    h, w = shape
    scale = max_side / max(h, w)
    return max(1, round(h * scale)), max(1, round(w * scale))


def shrunk_shape(shape: tuple[int, int], max_side: int | None) -> tuple[int, int]:
    """(H, W) a photo of `shape` is used at: `shape` itself when `max_side` is None or its long
    side is within `max_side`, else `fit_within(shape, max_side)`."""
    h, w = (int(s) for s in shape[:2])
    if max_side is None or max(h, w) <= max_side:
        return h, w
    return fit_within((h, w), max_side)


def resize_image(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """uint8[H, W(, C)] resampled to `size` = (H', W'): cv2.INTER_AREA when neither side grows,
    else cv2.INTER_LINEAR; the array itself when the size is unchanged."""
    h, w = size
    if image.shape[:2] == (h, w):
        return image
    shrink = h <= image.shape[0] and w <= image.shape[1]
    return cv2.resize(image, (w, h), interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)


def resize_labels(labels: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """A label map [H, W] (mask, void, gesture map) resampled nearest to `size` = (H', W')."""
    h, w = size
    return cv2.resize(labels, (w, h), interpolation=cv2.INTER_NEAREST)


def shrink_image(image: np.ndarray, max_side: int | None) -> np.ndarray:
    """`image` at `shrunk_shape(image.shape, max_side)` (itself when no shrinking is due)."""
    return resize_image(image, shrunk_shape(image.shape[:2], max_side))
