"""Outlines and holes of binary masks: the longest iso-contour as scikit-image's
`find_contours` returns it, and hole filling as scipy's `binary_fill_holes` does, faster.

`longest_contour(image)` equals `max(find_contours(image, 0.5, fully_connected="high"),
key=arc length)` (the first of equal lengths, in `find_contours`' order) for a {0, 1} image with
a zero border, where every contour is closed. `find_contours` assembles its marching-squares
segments one by one in Python; here the segments come from one table lookup per square and
the contours are the cycles of the segment successor map:

- segments are emitted square by square in raster order, as `_get_contour_segments` does (the
  table below was read off it for all 16 squares at level 0.5 with high values 8-connected);
- a closed contour is completed by the last of its segments in that order, so the contour
  `find_contours` returns starts (and ends) at that segment's end point and follows the
  segments' direction; contours are listed in the order of their first segment;
- arc lengths are n_diagonal·√½ + n_straight: equal exact lengths are only possible with equal
  counts, and those ties are settled by the float sums `find_contours`' caller would compute.

Property-tested against `skimage.measure.find_contours` (tests/gestures/test_contours.py).
"""

from __future__ import annotations

import cv2
import numpy as np

from dig_jax import _numba

# Edge midpoints of the square whose top-left pixel is (r, c), in doubled coordinates
# relative to (2r, 2c): top, left, right, bottom.
_T, _L, _R, _B = (0, 1), (1, 0), (1, 2), (2, 1)
# Square case = 8·upper-left + 4·upper-right + 2·lower-left + lower-right -> its segments
# (from, to), in the order marching squares emits them.
_SEGMENTS = {
    1: [(_B, _R)], 2: [(_L, _B)], 3: [(_L, _R)], 4: [(_R, _T)], 5: [(_B, _T)],
    6: [(_L, _T), (_R, _B)], 7: [(_L, _T)], 8: [(_T, _L)], 9: [(_T, _R), (_B, _L)],
    10: [(_T, _B)], 11: [(_T, _R)], 12: [(_R, _L)], 13: [(_B, _L)], 14: [(_R, _B)],
}  # fmt: skip
_COUNT = np.zeros(16, np.int64)
_FROM = np.zeros((16, 2, 2), np.int64)
_TO = np.zeros((16, 2, 2), np.int64)
for _case, _segs in _SEGMENTS.items():
    _COUNT[_case] = len(_segs)
    for _k, (_f, _t) in enumerate(_segs):
        _FROM[_case, _k], _TO[_case, _k] = _f, _t


def _arc_length(contour: np.ndarray) -> float:
    return float(np.linalg.norm(np.diff(contour, axis=0), axis=1).sum())


def longest_contour(image: np.ndarray) -> np.ndarray:
    """f64[P, 2] (row, col), closed (first == last): the longest level-0.5 contour of `image`.

    image: bool or {0, 1} integer [H, W] (H, W >= 2) whose border pixels are all 0 and with at
    least one marked pixel. Raises ValueError otherwise.
    """
    image = np.asarray(image)
    if image.ndim != 2 or min(image.shape) < 2:
        raise ValueError(f"image: expected a 2-D array of at least 2x2, got shape {image.shape}")
    m = image.astype(np.uint8, copy=False)
    if m.max(initial=0) > 1:
        raise ValueError("image: expected values in {0, 1}")
    if m[0].any() or m[-1].any() or m[:, 0].any() or m[:, -1].any():
        raise ValueError("image: border pixels must be 0 (every contour closed)")
    w = m.shape[1]
    case = (m[:-1, :-1] << 3) | (m[:-1, 1:] << 2) | (m[1:, :-1] << 1) | m[1:, 1:]
    square = np.flatnonzero((case != 0) & (case != 15))
    if square.size == 0:
        raise ValueError("image: no marked pixel, so no contour")
    kinds = case.reshape(-1)[square]
    per_square = _COUNT[kinds]
    square, kinds = np.repeat(square, per_square), np.repeat(kinds, per_square)
    k = np.arange(len(square)) - np.repeat(np.cumsum(per_square) - per_square, per_square)
    r, c = (square // (w - 1)) * 2, (square % (w - 1)) * 2
    from_r, from_c = r + _FROM[kinds, k, 0], c + _FROM[kinds, k, 1]
    to_r, to_c = r + _TO[kinds, k, 0], c + _TO[kinds, k, 1]
    # Segment s is the s-th emitted; its successor starts where it ends.
    width = 2 * w + 1
    from_key = from_r * width + from_c
    by_start = np.argsort(from_key)
    successor = by_start[np.searchsorted(from_key, to_r * width + to_c, sorter=by_start)]
    count, cycle, last = _cycles(successor)
    straight = np.bincount(cycle, weights=(from_r == to_r) | (from_c == to_c), minlength=count)
    diagonal = np.bincount(cycle, minlength=count) - straight
    # Cycles are numbered by their first segment, which is find_contours' order.
    exact = diagonal * np.sqrt(0.5) + straight
    best = int(np.argmax(exact))
    tied = np.flatnonzero((diagonal == diagonal[best]) & (straight == straight[best]))

    def trace(which: int) -> np.ndarray:
        ends = _walk(successor, int(last[which]))
        return np.stack([to_r[ends] / 2.0, to_c[ends] / 2.0], axis=-1)

    if len(tied) == 1:
        return trace(int(tied[0]))
    candidates = [trace(int(t)) for t in tied]
    return candidates[int(np.argmax([_arc_length(x) for x in candidates]))]


@_numba.njit(cache=True, nogil=True)
def _cycles(successor: np.ndarray):
    """Cycles of the permutation `successor` int64[N], numbered in order of their first (lowest)
    member: (count, cycle id int64[N], last (highest) member int64[count])."""
    n = successor.shape[0]
    cycle = np.full(n, -1, np.int64)
    last = np.empty(n, np.int64)
    count = 0
    for start in range(n):
        if cycle[start] >= 0:
            continue
        last[count] = start
        s = start
        while cycle[s] < 0:
            cycle[s] = count
            last[count] = max(last[count], s)
            s = successor[s]
        count += 1
    return count, cycle, last[:count]


@_numba.njit(cache=True, nogil=True)
def _walk(successor: np.ndarray, closing: int) -> np.ndarray:
    """int64[L + 1]: the cycle through `closing`, from it back to it."""
    length = 1
    s = successor[closing]
    while s != closing:
        length += 1
        s = successor[s]
    ends = np.empty(length + 1, np.int64)
    ends[0] = closing
    s = successor[closing]
    for i in range(1, length):
        ends[i] = s
        s = successor[s]
    ends[length] = closing
    return ends


def fill_holes(mask: np.ndarray) -> np.ndarray:
    """`ndimage.binary_fill_holes(mask)` (its default cross structure) through OpenCV's
    labelling: the mask plus every unmarked pixel that no 4-connected path of unmarked pixels
    joins to the image border. bool or {0, 1} [H, W] in, bool[H, W] out."""
    mask = np.asarray(mask)
    if mask.ndim != 2:
        raise ValueError(f"mask: expected a 2-D array, got shape {mask.shape}")
    outside = np.pad(~(mask > 0), 1, constant_values=True).astype(np.uint8)
    _, labels = cv2.connectedComponents(outside, connectivity=4)
    return labels[1:-1, 1:-1] != labels[0, 0]
