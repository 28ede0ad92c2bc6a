"""The baseline clicker of interactive benchmarks (RITM / RClicks `Clicker._get_next_click`).

Pad the false-negative and false-positive masks by one pixel, take their Euclidean distance
transforms, zero the pixels already clicked, and click the maximum: positive (ADD) iff
max DT(FN) > max DT(FP), at the first maximum in raster order. The same choice of error (FN or
FP) is what RClicks' group clickers sample within. Masks are [H, W]; clicks are (x, y) =
(column, row) at pixel centres. When no error pixel is left to click (no error, or every error
pixel already clicked) the result is None — the reference would then click pixel (0, 0).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from dig_jax.gestures.types import Context, Gesture, GestureKind
from dig_jax.robustness.rclicks.maps import as_mask, error_masks, padded_edt


@dataclasses.dataclass(frozen=True)
class ErrorChoice:
    """The error to click next: `positive` (FN, ADD) or not (FP, REMOVE), its whole mask
    bool[H, W], its padded distance transform float32[H, W] with clicked pixels zeroed, and
    `free` bool[H, W], the pixels not clicked yet (a map is multiplied by it before sampling)."""

    positive: bool
    error: np.ndarray
    distance: np.ndarray
    free: np.ndarray

    @property
    def context(self) -> int:
        return int(Context.ADD if self.positive else Context.REMOVE)


@dataclasses.dataclass(frozen=True)
class Click:
    """A click at (x, y) = (column, row); `positive` = adds to the mask (Context.ADD)."""

    x: float
    y: float
    positive: bool

    @property
    def context(self) -> int:
        return int(Context.ADD if self.positive else Context.REMOVE)

    def gesture(self) -> Gesture:
        """The click as a DIG gesture (kind CLICK, one point, no context)."""
        return Gesture(GestureKind.CLICK, np.array([[self.x, self.y]], np.float32), False)


def choose_error(pred: Any, gt: Any, clicked: Any | None = None) -> ErrorChoice | None:
    """Which error the next click fixes (see module docstring), or None if nothing is left.

    pred {0,1}[H, W]; gt {0,1,255}[H, W] (void ignored); clicked bool[H, W] or None.
    """
    fn, fp = error_masks(pred, gt)
    free = np.ones(fn.shape, bool) if clicked is None else ~as_mask(clicked, "clicked", fn.shape)
    dt_fn = padded_edt(fn) * free
    dt_fp = padded_edt(fp) * free
    best_fn, best_fp = float(dt_fn.max()), float(dt_fp.max())
    if max(best_fn, best_fp) <= 0:
        return None
    positive = best_fn > best_fp
    return ErrorChoice(positive, fn if positive else fp, dt_fn if positive else dt_fp, free)


def argmax_click(choice: ErrorChoice) -> Click:
    """The click at the first maximum (raster order) of the choice's distance transform."""
    row, col = np.unravel_index(int(np.argmax(choice.distance)), choice.distance.shape)
    return Click(float(col), float(row), choice.positive)


def baseline_click(pred: Any, gt: Any, clicked: Any | None = None) -> Click | None:
    """The baseline click for prediction `pred` against `gt`, or None when no error is left."""
    choice = choose_error(pred, gt, clicked)
    return None if choice is None else argmax_click(choice)
