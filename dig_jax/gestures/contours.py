"""Outlines and holes of binary masks: the longest iso-contour as scikit-image's
`find_contours` returns it, and hole filling as scipy's `binary_fill_holes` does, faster.

`longest_contour(image)` equals `max(find_contours(image, 0.5, fully_connected="high"),
key=arc length)` (the first of equal lengths, in `find_contours`' order) for a {0, 1} image with
a zero border, where every contour is closed. `find_contours` assembles its marching-squares
segments one by one in Python; here one compiled pass emits them (one table lookup per
square), each segment's successor is the segment of the square across the edge it ends on
that starts there, and the contours are the cycles of that successor map:

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

import math

import numpy as np

from dig_jax import _numba
from dig_jax.gestures.edt import _within_runs
from dig_jax.gestures.runs import gap_runs, join_runs, row_runs, union_root
from dig_jax.gestures.spline import polyline_length

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
    if not m.any():
        raise ValueError("image: no marked pixel, so no contour")
    return _longest(np.ascontiguousarray(m), _COUNT, _FROM, _TO)


@_numba.njit(cache=True, nogil=True)
def _all_segments(m, counts, starts, ends):
    """The marching-squares segments of m (uint8 {0, 1} [H, W], zero border) in emission order,
    and each one's successor (the segment starting where it ends, in the square across that
    edge): (from row, from col, to row, to col, successor), int64[S] each, in doubled
    coordinates. Room for 8 (H + W) + 64 segments first, grown 4x on the rare outline that
    needs more."""
    h, w = m.shape
    capacity = 8 * (h + w) + 64
    while True:
        ok, from_r, from_c, to_r, to_c, successor = _segments_into(
            m, counts, starts, ends, min(capacity, 2 * (h - 1) * (w - 1))
        )
        if ok:
            return from_r, from_c, to_r, to_c, successor
        capacity *= 4


@_numba.njit(cache=True, nogil=True)
def _longest(m, counts, starts, ends):
    """`longest_contour` of a checked image: the cycles of the segments, the longest by its
    exact length n_diagonal·√½ + n_straight (cycles numbered by their first segment,
    find_contours' order),
    ties settled by the float arc lengths numpy would sum; traced from its last-emitted
    segment's end. f64[P, 2] (row, col)."""
    from_r, from_c, to_r, to_c, successor = _all_segments(m, counts, starts, ends)
    count, cycle, last = _cycles(successor)
    straight = np.zeros(count)
    total = np.zeros(count)
    for s in range(successor.shape[0]):
        total[cycle[s]] += 1.0
        if from_r[s] == to_r[s] or from_c[s] == to_c[s]:
            straight[cycle[s]] += 1.0
    diagonal = total - straight
    exact = diagonal * math.sqrt(0.5) + straight
    best = int(np.argmax(exact))
    if _tied_count(diagonal, straight, best) == 1:
        return _trace(successor, last[best], to_r, to_c)
    chosen, chosen_arc = -1, -1.0
    for k in range(count):  # equal counts: the first of the longest float sums
        if diagonal[k] != diagonal[best] or straight[k] != straight[best]:
            continue
        arc = polyline_length(_trace(successor, last[k], to_r, to_c))
        if arc > chosen_arc:
            chosen, chosen_arc = k, arc
    return _trace(successor, last[chosen], to_r, to_c)


@_numba.njit(cache=True, nogil=True)
def _tied_count(diagonal, straight, best):
    """How many cycles have the same diagonal and straight counts as cycle `best`."""
    n = 0
    for k in range(diagonal.shape[0]):
        if diagonal[k] == diagonal[best] and straight[k] == straight[best]:
            n += 1
    return n


@_numba.njit(cache=True, nogil=True)
def _trace(successor, closing, to_r, to_c):
    """The cycle through segment `closing` as points f64[L + 1, 2] (row, col), from its end
    back to it."""
    ends = _walk(successor, closing)
    out = np.empty((ends.shape[0], 2))
    for i in range(ends.shape[0]):
        out[i, 0] = to_r[ends[i]] / 2.0
        out[i, 1] = to_c[ends[i]] / 2.0
    return out


@_numba.njit(cache=True, nogil=True)
def _segments_into(m, counts, starts, ends, capacity):
    """(fits, `_all_segments`' five arrays) with room for `capacity` segments; `fits` is False
    (and the arrays empty) when there are more."""
    h, w = m.shape
    from_r, from_c = np.empty(capacity, np.int64), np.empty(capacity, np.int64)
    to_r, to_c = np.empty(capacity, np.int64), np.empty(capacity, np.int64)
    first = np.empty((h - 1) * (w - 1), np.int64)  # first segment of each square that has one
    # Per pair of rows, a branch-free (vectorised) pass marks the squares whose four pixels
    # are not all equal; the squares are then visited eight at a time through a word view,
    # so the uniform inside and outside cost ~1/8 of a visit each (2x faster on a lasso crop).
    n_words = (w - 1 + 7) // 8
    mixed = np.zeros(n_words * 8, np.uint8)
    mixed_words = mixed.view(np.uint64)
    n = 0
    for r in range(h - 1):
        up, down = m[r], m[r + 1]
        for c in range(w - 1):
            mixed[c] = (up[c] ^ up[c + 1]) | (down[c] ^ down[c + 1]) | (up[c] ^ down[c])
        for j in range(n_words):
            if mixed_words[j] == 0:
                continue
            for c in range(8 * j, min(8 * j + 8, w - 1)):
                if not mixed[c]:
                    continue
                case = (up[c] << 3) | (up[c + 1] << 2) | (down[c] << 1) | down[c + 1]
                if n + counts[case] > capacity:
                    empty = np.empty(0, np.int64)
                    return False, empty, empty, empty, empty, empty
                first[r * (w - 1) + c] = n
                for k in range(counts[case]):
                    from_r[n], from_c[n] = 2 * r + starts[case, k, 0], 2 * c + starts[case, k, 1]
                    to_r[n], to_c[n] = 2 * r + ends[case, k, 0], 2 * c + ends[case, k, 1]
                    n += 1
    successor = np.empty(n, np.int64)
    for s in range(n):
        nxt = first[_square_across(to_r[s], to_c[s], from_r[s], from_c[s], w)]
        if from_r[nxt] != to_r[s] or from_c[nxt] != to_c[s]:
            nxt += 1  # the square's second segment (a saddle)
        successor[s] = nxt
    return True, from_r[:n], from_c[:n], to_r[:n], to_c[:n], successor


@_numba.njit(cache=True, nogil=True)
def _square_across(tr, tc, fr, fc, w):
    """Index of the square beyond the edge midpoint (tr, tc) that a segment starting at (fr,
    fc) ends on (doubled coordinates; the segment's own square holds both points)."""
    r, c = min(fr, tr) // 2, min(fc, tc) // 2  # own square's top-left pixel, from either point
    if tr % 2 == 0:  # on a horizontal edge: its top (row 2r) or its bottom (row 2r + 2)
        r = r - 1 if tr == 2 * r else r + 1
    else:  # on a vertical edge: its left (col 2c) or its right (col 2c + 2)
        c = c - 1 if tc == 2 * c else c + 1
    return r * (w - 1) + c


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
    """`ndimage.binary_fill_holes(mask)` (its default cross structure): the mask plus every
    unmarked pixel that no 4-connected path of unmarked pixels joins to the image border.
    bool or {0, 1} [H, W] in, bool[H, W] out."""
    return np.ascontiguousarray(filled_padded(mask)[1:-1, 1:-1]).view(bool)


def filled_padded(mask: np.ndarray) -> np.ndarray:
    """uint8[H + 2, W + 2]: `fill_holes(mask)` as {0, 1} inside a border of zeros (the input
    `longest_contour` takes): the unmarked row runs that union-find joins to the border are
    the outside, everything else is filled."""
    mask = np.asarray(mask)
    if mask.ndim != 2:
        raise ValueError(f"mask: expected a 2-D array, got shape {mask.shape}")
    # A bool crop of a larger mask is read in place (numba takes strided rows), not copied.
    marked = (mask if mask.dtype == bool else mask > 0).view(np.uint8)
    return _fill_from_border(marked)


@_numba.njit(cache=True, nogil=True)
def _fill_from_border(marked):
    """{0, 1} [H + 2, W + 2], zero border: 0 on the unmarked pixels of `marked` (uint8 {0, 1}
    [H, W]) that a 4-connected path of unmarked pixels joins to the border, 1 elsewhere.

    The unmarked pixels are cut into row runs; runs of consecutive rows that share a column
    are joined (union-find), and the components holding a run on the image's edge are the
    outside. One pass over the pixels, then work per run, not per pixel."""
    h, w = marked.shape
    starts, stops, row_first = gap_runs(*row_runs(marked), w)  # the unmarked pixels' runs
    parent = join_runs(starts, stops, row_first, 0)
    outside = np.zeros(starts.shape[0], np.bool_)
    for r in range(h):
        for k in range(row_first[r], row_first[r + 1]):
            if r == 0 or r == h - 1 or starts[k] == 0 or stops[k] == w:
                outside[union_root(parent, k)] = True
    out = np.ones((h + 2, w + 2), np.uint8)
    out[0, :] = 0
    out[h + 1, :] = 0
    out[:, 0] = 0
    out[:, w + 1] = 0
    for r in range(h):
        for k in range(row_first[r], row_first[r + 1]):
            if outside[union_root(parent, k)]:
                out[r + 1, starts[k] + 1 : stops[k] + 1] = 0
    return out


def crop_outline(
    marked: np.ndarray, rows: tuple[int, int], cols: tuple[int, int], widths: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The longest outer outline of a crop of a mask and its arc length, in one compiled call
    that releases the GIL: (f64[P, 2] (x, y) in image coordinates, closed, f64[P] px from its
    first point). `marked`: uint8 {0, 1} [H, W]; the crop is rows [rows[0], rows[1]) x columns
    [cols[0], cols[1]), read in place; its holes are filled, then, when `widths`
    (`edt.disc_widths`) has more than one row, it is dilated by that disc inside its zero
    border, then traced (`longest_contour`). The crop is cut inside the kernel, so every crop
    of a C-contiguous mask runs one compiled specialisation."""
    return _crop_outline(marked, rows[0], rows[1], cols[0], cols[1], widths, _COUNT, _FROM, _TO)


@_numba.njit(cache=True, nogil=True)
def _crop_outline(marked, row0, row1, col0, col1, widths, counts, starts, ends):
    """`crop_outline` (the same operations as filled_padded, edt.within, longest_contour and
    numpy's diff / norm / cumsum, in the same order)."""
    padded = _fill_from_border(marked[row0:row1, col0:col1])
    if widths.shape[0] > 1:
        padded = _within_runs(padded, widths)
        h, w = padded.shape
        padded[0, :] = 0  # the border stays unmarked, as padding after the dilation
        padded[h - 1, :] = 0
        padded[:, 0] = 0
        padded[:, w - 1] = 0
    contour = _longest(padded, counts, starts, ends)
    n = contour.shape[0]
    outline = np.empty((n, 2))
    arc = np.empty(n)
    for i in range(n):
        outline[i, 0] = contour[i, 1] - 1.0 + col0
        outline[i, 1] = contour[i, 0] - 1.0 + row0
    arc[0] = 0.0
    for i in range(1, n):
        dx = outline[i, 0] - outline[i - 1, 0]
        dy = outline[i, 1] - outline[i - 1, 1]
        arc[i] = arc[i - 1] + math.sqrt(dx * dx + dy * dy)
    return outline, arc
