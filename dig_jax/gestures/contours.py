"""Outlines and holes of binary masks: the longest iso-contour as scikit-image's
`find_contours` returns it, and hole filling as scipy's `binary_fill_holes` does, faster.

`longest_contour(image)` equals `max(find_contours(image, 0.5, fully_connected="high"),
key=arc length)` (the first of equal lengths, in `find_contours`' order) for a {0, 1} image with
a zero border, where every contour is closed. `find_contours` assembles its marching-squares
segments one by one in Python; here one compiled pass emits them from the image's row runs
(work per run end and per column where two rows differ, not per pixel; one table lookup per
mixed square), links each segment to its successor — the segment of the square across the
edge it ends on, which starts there — and the contours are the cycles of that map:

- segments are emitted square by square in raster order, as `_get_contour_segments` does (the
  table below was read off it for all 16 squares at level 0.5 with high values 8-connected);
- a closed contour is completed by the last of its segments in that order, so the contour
  `find_contours` returns starts (and ends) at that segment's end point and follows the
  segments' direction; contours are listed in the order of their first segment;
- arc lengths are n_diagonal·√½ + n_straight: equal exact lengths are only possible with equal
  counts, and those ties are settled by the float sums `find_contours`' caller would compute.

Property-tested against `skimage.measure.find_contours` (tests/gestures/test_contours.py).

A lasso's outline (`box_outline`) fills, dilates and traces a region's crop without a pixel
map between the steps: the crop's row runs are read once (`runs.row_runs`, eight pixels per
word), filled (`runs.filled_runs`), dilated (`edt.dilated_runs`) and traced as runs. On 50
GrabCut masks at 512², one thread, three alternating runs: a loose lasso's outline 0.58-0.78
-> 0.44-0.51 ms, a tight one's 0.35-0.41 -> 0.22 ms (2026-12-03, the same outlines;
tests/gestures/test_contours.py checks them against scipy and scikit-image).
"""

from __future__ import annotations

import math

import numpy as np

from dig_jax import _numba
from dig_jax.gestures.edt import dilated_runs, disc_row_widths
from dig_jax.gestures.runs import checked_row_runs, filled_runs, paint_runs, row_runs
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
    return _longest_of_image(np.ascontiguousarray(m), _COUNT, _FROM, _TO)


@_numba.njit(cache=True, nogil=True)
def _longest_of_image(m, counts, seg_from, seg_to):
    """`longest_contour` of a checked uint8 image."""
    starts, stops, row_first = row_runs(m)
    return _longest(starts, stops, row_first, m.shape[1], counts, seg_from, seg_to)


@_numba.njit(cache=True, nogil=True)
def _all_segments(starts, stops, row_first, w, counts, seg_from, seg_to):
    """The marching-squares segments of the {0, 1} image (zero border) whose `row_runs` are
    given, W = `w` wide, in emission order, and each one's successor (the segment starting
    where it ends, in the square across that edge): (from row, from col, to row, to col,
    successor), int64[S] each, in doubled coordinates. Room for 8 (H + W) + 64 segments
    first, grown 4x on the rare outline that needs more."""
    h = row_first.shape[0] - 1
    capacity = 8 * (h + w) + 64
    while True:
        ok, from_r, from_c, to_r, to_c, successor = _segments_into(
            starts, stops, row_first, w, counts, seg_from, seg_to,
            min(capacity, 2 * (h - 1) * (w - 1)),
        )  # fmt: skip
        if ok:
            return from_r, from_c, to_r, to_c, successor
        capacity *= 4


@_numba.njit(cache=True, nogil=True)
def _longest(starts, stops, row_first, w, counts, seg_from, seg_to):
    """`longest_contour` of the image given by its `row_runs` (W = `w`): the cycles of the
    segments, the longest by its exact length n_diagonal·√½ + n_straight (cycles numbered by
    their first segment, find_contours' order), ties settled by the float arc lengths numpy
    would sum; traced from its last-emitted segment's end. f64[P, 2] (row, col)."""
    from_r, from_c, to_r, to_c, successor = _all_segments(
        starts, stops, row_first, w, counts, seg_from, seg_to
    )
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
def _segments_into(starts, stops, row_first, w, counts, seg_from, seg_to, capacity):
    """(fits, `_all_segments`' five arrays) with room for `capacity` segments; `fits` is False
    (and the arrays empty) when there are more.

    Each pair of rows is read from its runs, not its pixels: walking the two rows' run ends
    in column order, the states (up, down) are constant between consecutive ends, so the
    squares there are uniform unless up != down (a run of squares of one case), and the
    square across each end is mixed. Work per run end and per column where the rows differ,
    not per pixel (the inside and outside of a lasso's crop cost nothing)."""
    h = row_first.shape[0] - 1
    from_r, from_c = np.empty(capacity, np.int64), np.empty(capacity, np.int64)
    to_r, to_c = np.empty(capacity, np.int64), np.empty(capacity, np.int64)
    successor = np.empty(capacity, np.int64)
    # The segment touching each crossed edge, to link it to the one across once that is
    # emitted: bottom edges of the previous and this row of squares (by column), the right
    # edge of the previous square and of this one.
    bottoms = np.empty(2 * w, np.int64)
    right_out = -1
    beyond = w + 1  # past every run end
    n = 0
    for r in range(h - 1):
        above, below = ((r + 1) % 2) * w, (r % 2) * w  # offsets in bottoms (no views)
        i, i_stop = row_first[r], row_first[r + 1]  # the upper row's runs
        j, j_stop = row_first[r + 1], row_first[r + 2]  # the lower row's
        up, down, p = 0, 0, 0  # states of columns p.. (up to the next end)
        while True:
            next_up = beyond if i == i_stop else (stops[i] if up else starts[i])
            next_down = beyond if j == j_stop else (stops[j] if down else starts[j])
            q = min(next_up, next_down)
            if q == beyond:
                break
            new_up = up ^ (1 if next_up == q else 0)
            new_down = down ^ (1 if next_down == q else 0)
            # squares p..q - 2 (both columns (up, down)) are mixed when up != down; square
            # q - 1 (columns (up, down) and (new_up, new_down)) always is
            for c in range(p if up != down else q - 1, q):
                if c < q - 1:
                    case = 12 if up else 3
                else:
                    case = (up << 3) | (new_up << 2) | (down << 1) | new_down
                if n + counts[case] > capacity:
                    empty = np.empty(0, np.int64)
                    return False, empty, empty, empty, empty, empty
                left_in = right_out
                # emitted inline: a call per square cost more than the rest of the pass
                for k in range(counts[case]):
                    fr, fc = seg_from[case, k, 0], seg_from[case, k, 1]
                    tr, tc = seg_to[case, k, 0], seg_to[case, k, 1]
                    from_r[n], from_c[n] = 2 * r + fr, 2 * c + fc
                    to_r[n], to_c[n] = 2 * r + tr, 2 * c + tc
                    # a start on the left / top edge continues the segment across it; an
                    # end there is continued by it; right / bottom edges wait for theirs
                    if fc == 0:
                        successor[left_in] = n
                    elif fr == 0:
                        successor[bottoms[above + c]] = n
                    elif fc == 2:
                        right_out = n
                    else:
                        bottoms[below + c] = n
                    if tc == 0:
                        successor[n] = left_in
                    elif tr == 0:
                        successor[n] = bottoms[above + c]
                    elif tc == 2:
                        right_out = n
                    else:
                        bottoms[below + c] = n
                    n += 1
            if next_up == q:
                i += up  # a stop: the next run
                up = new_up
            if next_down == q:
                j += down
                down = new_down
            p = q
    return True, from_r[:n], from_c[:n], to_r[:n], to_c[:n], successor[:n]


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
    [H, W]) that a 4-connected path of unmarked pixels joins to the border, 1 elsewhere
    (`runs.filled_runs`: work per run, not per pixel)."""
    h, w = marked.shape
    out = np.zeros((h + 2, w + 2), np.uint8)
    paint_runs(*filled_runs(*row_runs(marked), w), out, 1, 1)
    return out


def box_outline(marked: np.ndarray, box: np.ndarray, radius: int) -> tuple[np.ndarray, np.ndarray]:
    """The longest outer outline of a region and its arc length, in one compiled call that
    releases the GIL: (f64[P, 2] (x, y) in image coordinates, closed, f64[P] px from its
    first point). `marked`: uint8 {0, 1} [H, W] (C-contiguous: every mask runs one compiled
    specialisation), `box`: its `tight_box` (x1, y1, x2, y2), not empty. The region's holes
    are filled, it is dilated by the disc of `radius` px (0: not; -1: the loose lasso's
    `simulate.loose_dilation_radius` of its area) and traced (`longest_contour`) in a crop
    around it with a margin of radius + 1 px (clipped to the image)."""
    x1, y1, x2, y2 = (int(v) for v in box)
    return _box_outline(marked, x1, y1, x2, y2, int(radius), _COUNT, _FROM, _TO)


@_numba.njit(cache=True, nogil=True)
def loose_radius(area):
    """`simulate.loose_dilation_radius` (int px) of a region of `area` px, compiled:
    clip(round(0.1 * sqrt(area)), 6, 30), rounding half to even as Python's round."""
    return min(max(int(np.rint(0.1 * math.sqrt(area))), 6), 30)


def mask_outline(marked: np.ndarray, radius: int) -> tuple[int, np.ndarray, np.ndarray]:
    """`box_outline` of a whole mask, validated in the same pass that finds its box and reads
    its runs: (status, outline, arc), status `MASK_OK`, `MASK_NOT_BINARY` (a byte other than 0
    or 1; empty arrays) or `MASK_EMPTY` (nothing marked; empty arrays). `marked`: uint8
    [H, W], C-contiguous."""
    return _mask_outline(marked, int(radius), _COUNT, _FROM, _TO)


MASK_OK, MASK_NOT_BINARY, MASK_EMPTY = 0, 1, 2


@_numba.njit(cache=True, nogil=True)
def _mask_outline(marked, radius, counts, seg_from, seg_to):
    """`mask_outline`: the mask's runs, its box from them, then `_outline_of_runs`."""
    h, w = marked.shape
    starts, stops, row_first, binary = checked_row_runs(marked)
    empty = np.empty((0, 2)), np.empty(0)
    if not binary:
        return MASK_NOT_BINARY, empty[0], empty[1]
    if starts.shape[0] == 0:
        return MASK_EMPTY, empty[0], empty[1]
    y1, y2 = 0, h
    while row_first[y1 + 1] == row_first[y1]:
        y1 += 1
    while row_first[y2 - 1] == row_first[y2]:
        y2 -= 1
    x1, x2 = np.min(starts), np.max(stops)
    first, stop = row_first[y1], row_first[y2]
    outline, arc = _outline_of_runs(
        starts[first:stop] - x1, stops[first:stop] - x1, row_first[y1 : y2 + 1] - first,
        x1, y1, x2, y2, h, w, radius, counts, seg_from, seg_to,
    )  # fmt: skip
    return MASK_OK, outline, arc


@_numba.njit(cache=True, nogil=True)
def _box_outline(marked, x1, y1, x2, y2, radius, counts, seg_from, seg_to):
    """`box_outline`: the box's runs, then `_outline_of_runs`."""
    h, w = marked.shape
    starts, stops, row_first = row_runs(marked[y1:y2, x1:x2])
    return _outline_of_runs(
        starts, stops, row_first, x1, y1, x2, y2, h, w, radius, counts, seg_from, seg_to
    )


@_numba.njit(cache=True, nogil=True)
def _outline_of_runs(
    starts, stops, row_first, x1, y1, x2, y2, h, w, radius, counts, seg_from, seg_to
):
    """The outline f64[P, 2] (x, y) and arc f64[P] of the region in box (x1, y1, x2, y2) of an
    H x W image, given its runs in box coordinates: the same operations as filled_padded,
    edt.within, longest_contour and numpy's diff / norm / cumsum, in the same order, on runs
    (filling, dilating and tracing read and write runs, not pixels)."""
    if radius < 0:
        radius = loose_radius(np.sum(stops - starts))
    starts, stops, row_first = filled_runs(starts, stops, row_first, x2 - x1)
    margin = radius + 1
    row0, row1 = max(y1 - margin, 0), min(y2 + margin, h)
    col0, col1 = max(x1 - margin, 0), min(x2 + margin, w)
    crop_h, crop_w = row1 - row0, col1 - col0
    if radius > 0:
        starts, stops, row_first = dilated_runs(
            starts, stops, row_first, disc_row_widths(radius), y1 - row0, x1 - col0, crop_h, crop_w
        )
    else:
        starts, stops, row_first = _placed(starts, stops, row_first, y1 - row0, x1 - col0, crop_h)
    # the crop inside a zero border one pixel wide: the image longest_contour reads
    framed_first = np.empty(crop_h + 3, np.int64)
    framed_first[0] = 0
    framed_first[1 : crop_h + 2] = row_first
    framed_first[crop_h + 2] = row_first[crop_h]
    contour = _longest(starts + 1, stops + 1, framed_first, crop_w + 2, counts, seg_from, seg_to)
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


@_numba.njit(cache=True, nogil=True)
def _placed(starts, stops, row_first, row_offset, col_offset, height):
    """The runs moved by (row_offset, col_offset) into a frame of `height` rows that holds
    them."""
    out_first = np.empty(height + 1, np.int64)
    n_rows = row_first.shape[0] - 1
    for y in range(height):
        source = min(max(y - row_offset, 0), n_rows)
        out_first[y] = row_first[source]
    out_first[height] = row_first[n_rows]
    return starts + col_offset, stops + col_offset, out_first
