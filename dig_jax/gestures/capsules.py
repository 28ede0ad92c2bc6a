"""The host rasteriser's kernel: a disc brush swept along segments, marked row by row (numba).

For each segment a -> b (float64) the kernel does what `raster.rasterize` documents, with the
same float64 operations as its numpy reference, so the bytes are `rasterize_reference`'s:

1. clip the segment to the image enlarged by the radius (+1 px), Liang-Barsky as
   `raster.clip_segments` computes it (a segment missing that box draws nothing);
2. for each row its capsule reaches, the x-interval [lo, hi] where the row meets the capsule
   (the union of the two end discs and the band between them, closed form);
3. mark the columns surely inside (more than `edge_eps` px from an end); a column centre within
   `edge_eps` of an end gets the reference's test: distance to the segment's pieces (the
   segment cut into equal pieces of at most `piece` px, as `rasterize_reference` cuts it)
   at most `radius`.

One compiled loop instead of ~40 numpy passes per group of segments: a 512² tight lasso is
marked in ~0.3 ms instead of ~2.9, a scribble in ~0.12 instead of ~1.4 (`benchmarks/gestures.py`).
"""

from __future__ import annotations

import math

import numpy as np

from dig_jax import _numba

_FEW_ROWS = 32.0  # px of vertical extent up to which a gesture is marked in place


@_numba.njit(cache=True, nogil=True)
def _clip(ax, ay, bx, by, x0, y0, x1, y1):
    """(keep, start x, start y, stop x, stop y): `raster.clip_segments` of one segment."""
    dx, dy = bx - ax, by - ay
    t0, t1 = 0.0, 1.0
    keep = True
    for axis in range(2):
        p, dp = (ax, dx) if axis == 0 else (ay, dy)
        lo, hi = (x0, x1) if axis == 0 else (y0, y1)
        if dp != 0:
            ta, tb = (lo - p) / dp, (hi - p) / dp
            t0 = max(t0, min(ta, tb))
            t1 = min(t1, max(ta, tb))
        elif p < lo or p > hi:
            keep = False
    if not (keep and t0 <= t1):
        return False, 0.0, 0.0, 0.0, 0.0
    sx, sy = (ax, ay) if t0 == 0.0 else (ax + t0 * dx, ay + t0 * dy)
    ex, ey = (bx, by) if t1 == 1.0 else (ax + t1 * dx, ay + t1 * dy)
    return True, sx, sy, ex, ey


@_numba.njit(cache=True, nogil=True, inline="always")
def _linear(coef, inverse, low, high):
    """{r : low <= coef * r <= high} as an interval (lo, hi), empty when lo > hi; `inverse`
    = 1 / coef (a product instead of a division per row: ~1 ulp apart, within the slack)."""
    inf = np.inf
    if coef > 0:
        return low * inverse, high * inverse
    if coef < 0:
        return high * inverse, low * inverse
    if high < 0:
        return inf, -inf
    return (-inf if low <= 0 else inf), inf


# Rounding allowance of the closed forms, relative to the coordinates' magnitude: pixel
# centres whose distance to the gesture is this close to the radius may be decided either way
# by the distance test, so the row intervals leave them to it.
_ROUNDING = 64 * 2.220446049250313e-16


@_numba.njit(cache=True, nogil=True, inline="always")
def _segment_constants(ax, ay, dx, dy, length, radius, y_most):
    """What `_row_interval` needs of a segment a -> a + (dx, dy) besides the row, once per
    segment: (1 / dx, 1 / dy (0 for 0), radius * length, the px by which rounding may move
    the band's ends set by its along-segment and its across-segment constraints, the margin
    below 0 of radius² - dy² at which a row may still touch a disc); `y_most`: the largest
    |y| of the rows it will be asked about."""
    err = _ROUNDING * (abs(ax) + abs(ay) + y_most + abs(dx) + abs(dy) + radius)
    inv_dx = 1.0 / dx if dx != 0 else 0.0
    inv_dy = 1.0 / dy if dy != 0 else 0.0
    err_t = err * length * abs(inv_dx)
    err_n = err * length * abs(inv_dy)
    return inv_dx, inv_dy, radius * length, err_t, err_n, 2.0 * radius * err + err * err


@_numba.njit(cache=True, nogil=True, inline="always")
def _row_interval(ax, ay, dx, dy, len2, radius, constants, y):
    """(lo, hi, slack_lo, slack_hi): the x-interval where the row at height y meets the capsule
    of a -> a + (dx, dy) (len2 = dx² + dy²; `constants`: `_segment_constants`), empty
    (lo > hi) when they do not meet, and the px by which rounding may have moved each end
    either way.

    The band's ends divide by dx or dy: for a segment nearly parallel to an axis they carry
    rounding errors far above the pixel grid's, and a row tangent to a disc may come out
    just missing it; both widen the slack (or keep a tangent point) instead of deciding."""
    inv_dx, inv_dy, reach, err_t, err_n, tangent = constants
    inf = np.inf
    ry = y - ay
    lo, hi = inf, -inf
    v = radius * radius - ry * ry  # the disc at a
    if v >= -tangent:
        half = math.sqrt(max(v, 0.0))
        lo, hi = -half, half
    v = radius * radius - (ry - dy) * (ry - dy)  # the disc at b
    if v >= -tangent:
        half = math.sqrt(max(v, 0.0))
        lo, hi = min(lo, dx - half), max(hi, dx + half)
    slack_lo, slack_hi = 0.0, 0.0
    if len2 > 0:  # the band: 0 <= r·d <= |d|² and |r × d| <= radius·|d|, linear in r's x
        lo_t, hi_t = _linear(dx, inv_dx, -ry * dy, len2 - ry * dy)
        lo_n, hi_n = _linear(dy, inv_dy, ry * dx - reach, ry * dx + reach)
        lo_band, err_lo = (lo_t, err_t) if lo_t >= lo_n else (lo_n, err_n)
        hi_band, err_hi = (hi_t, err_t) if hi_t <= hi_n else (hi_n, err_n)
        if lo_band - err_lo <= hi_band + err_hi:  # the true band may be non-empty
            if lo_band - err_lo < lo:
                new_lo = min(lo, lo_band)
                slack_lo = new_lo - lo_band + err_lo
                lo = new_lo
            if hi_band + err_hi > hi:
                new_hi = max(hi, hi_band)
                slack_hi = hi_band - new_hi + err_hi
                hi = new_hi
    return lo + ax, hi + ax, slack_lo, slack_hi


@_numba.njit(cache=True, nogil=True, inline="always")
def _index(value, size):
    """int index of a float position clipped to [0, size] (infinities included)."""
    return int(min(max(value, 0.0), float(size)))


@_numba.njit(cache=True, nogil=True)
def _near_pieces(c, r, ax, ay, dx, dy, pieces, radius):
    """Whether pixel centre (c, r) lies within `radius` of one of the `pieces` equal pieces of
    a -> a + (dx, dy): `raster.segment_distance_np` on the pieces `_split_segments` makes."""
    for k in range(pieces):
        t0, t1 = k / pieces, (k + 1) / pieces
        pax, pay = ax + t0 * dx, ay + t0 * dy
        pdx, pdy = (ax + t1 * dx) - pax, (ay + t1 * dy) - pay
        rx, ry = c - pax, r - pay
        len2 = pdx * pdx + pdy * pdy
        t = (rx * pdx + ry * pdy) / len2 if len2 > 0 else 0.0
        t = min(max(t, 0.0), 1.0)
        if math.hypot(rx - t * pdx, ry - t * pdy) <= radius:
            return True
    return False


@_numba.njit(cache=True, nogil=True)
def mark_gesture(out, points, one_point, closed, radius, piece, edge_eps):
    """Set to 1 the pixels of out (uint8[H, W], C-contiguous) whose centres lie within `radius`
    px of the gesture with `points` (float64[N, 2] (x, y), finite; float32 would round the
    clipping): of its first point when `one_point` (a click), else of its polyline, joined back
    to the first point when `closed`. Returns (first, stop): the rows it may have marked lie in
    [first, stop)."""
    h, w = out.shape
    flat = out.reshape(-1)  # out is C-contiguous
    # Strokes of many short segments: each row's sure columns wait as one pending interval;
    # the next segment's interval on that row usually overlaps it (points ~2 px apart,
    # radius 5) and is merged into it, so most columns are written once, not ~5 times (a
    # lasso 10-25 % faster, same bytes). A click or a rectangle writes directly.
    merge = not one_point and points.shape[0] > 8
    pending_lo = np.zeros(h if merge else 0, np.int64)
    pending_hi = np.zeros(h if merge else 0, np.int64)
    first_row, last_row = h, -1  # the rows that hold a pending interval lie between
    touched_first, touched_stop = h, 0
    # per row of a segment: the columns surely and maybe within the brush (a click's disc
    # spans at most 2 radius + 2 rows: a smaller allocation, a click is ~3 µs)
    rows = min(h, int(2.0 * radius) + 3) if one_point else h
    sure_starts, sure_stops = np.empty(rows, np.int64), np.empty(rows, np.int64)
    maybe_starts, maybe_stops = np.empty(rows, np.int64), np.empty(rows, np.int64)
    n = 1 if one_point else points.shape[0]
    segments = n if (closed or n == 1) else n - 1
    for i in range(segments):
        j = i if n == 1 else (i + 1) % n  # segment i joins point i to point j
        keep, sx, sy, ex, ey = _clip(
            points[i, 0], points[i, 1], points[j, 0], points[j, 1],
            -radius - 1.0, -radius - 1.0, w + radius, h + radius,
        )  # fmt: skip
        if not keep:
            continue
        dx, dy = ex - sx, ey - sy
        len2 = dx * dx + dy * dy
        length = math.sqrt(len2)
        pieces = max(1, int(np.ceil(length / piece)))
        row0 = _index(np.ceil(min(sy, ey) - radius), h)
        row1 = _index(np.floor(max(sy, ey) + radius) + 1.0, h)
        if row1 > row0:
            touched_first, touched_stop = min(touched_first, row0), max(touched_stop, row1)
        constants = _segment_constants(sx, sy, dx, dy, length, radius, float(max(row0, row1)))
        # Two passes: the column bounds of every row first (a loop of arithmetic alone, which
        # LLVM compiles far better than one that also branches on the merge and writes), then
        # the marking: tight lassos, scribbles and rectangles 1.5-1.8x faster, clicks 0.93x
        # (~0.2 µs), same bytes (alternating calls on 50 GrabCut gestures each, two runs).
        for q in range(row1 - row0):
            lo, hi, slack_lo, slack_hi = _row_interval(sx, sy, dx, dy, len2, radius, constants,
                                                       float(row0 + q))  # fmt: skip
            eps_lo, eps_hi = edge_eps + slack_lo, edge_eps + slack_hi
            sure_starts[q] = _index(np.ceil(lo + eps_lo), w)
            sure_stops[q] = _index(np.floor(hi - eps_hi) + 1.0, w)
            maybe_starts[q] = _index(np.ceil(lo - eps_lo), w)
            maybe_stops[q] = _index(np.floor(hi + eps_hi) + 1.0, w)
        for r in range(row0, row1):
            q = r - row0
            sure_start, sure_stop = sure_starts[q], sure_stops[q]
            maybe_start, maybe_stop = maybe_starts[q], maybe_stops[q]
            if sure_stop <= sure_start:
                sure_start = sure_stop = maybe_stop
            # unsigned flat indices: no negative-index wrap-around, so the loop vectorises
            base = np.uint64(r * w)
            if not merge:
                for c in range(np.uint64(sure_start), np.uint64(sure_stop)):
                    flat[base + c] = 1
            elif sure_stop > sure_start:
                lo_p, hi_p = pending_lo[r], pending_hi[r]
                if hi_p > lo_p and sure_start <= hi_p and sure_stop >= lo_p:
                    pending_lo[r], pending_hi[r] = min(lo_p, sure_start), max(hi_p, sure_stop)
                else:  # disjoint: write the pending interval, this one waits
                    for c in range(np.uint64(lo_p), np.uint64(hi_p)):
                        flat[base + c] = 1
                    pending_lo[r], pending_hi[r] = sure_start, sure_stop
                    first_row, last_row = min(first_row, r), max(last_row, r)
            for c in range(maybe_start, max(sure_start, maybe_start)):
                if _near_pieces(float(c), float(r), sx, sy, dx, dy, pieces, radius):
                    flat[base + np.uint64(c)] = 1
            for c in range(sure_stop, max(maybe_stop, sure_stop)):
                if _near_pieces(float(c), float(r), sx, sy, dx, dy, pieces, radius):
                    flat[base + np.uint64(c)] = 1
    for r in range(first_row, last_row + 1):
        base = np.uint64(r * w)
        for c in range(np.uint64(pending_lo[r]), np.uint64(pending_hi[r])):
            flat[base + c] = 1
    return touched_first, touched_stop


@_numba.njit(cache=True, nogil=True)
def mark_gestures(maps, points, starts, one_point, closed, radius, piece, edge_eps):
    """For every i: maps[i] (uint8[B, H, W], C-contiguous) set to the `mark_gesture` of the
    gesture with points[starts[i] : starts[i + 1]] (float64[N, 2], finite), `one_point[i]`,
    `closed[i]`. One call for a chunk of maps: no Python between them.

    Both ways write a map's bytes once, with streaming stores (`dig_jax._intrinsics`), which
    write whole cache lines without first reading them. A gesture within a few rows (a click,
    a short stroke): the map is cleared so, then marked in place. A taller one is drawn into
    a zeroed scratch map that stays in the core's cache, copied out, and its rows zeroed
    again: marked in place, each of its rows would miss the cache once. Against memset's
    clear and marking in place, same bytes (2026-12-03, 256 GrabCut gestures at 512² on one
    thread, medians of 9 alternating calls): clicks 40 -> 20 µs, rectangles 69 -> 64,
    scribbles 149 -> 130, tight lassos 305 -> 285.
    """
    h, w = maps.shape[1], maps.shape[2]
    scratch = np.zeros((h, w), np.uint8)
    for i in range(maps.shape[0]):
        gesture = points[starts[i] : starts[i + 1]]
        out = maps[i]
        if one_point[i]:
            gesture = gesture[:1]
        top, bottom = np.inf, -np.inf
        for k in range(gesture.shape[0]):
            top, bottom = min(top, gesture[k, 1]), max(bottom, gesture[k, 1])
        if bottom - top <= _FEW_ROWS:
            out[:, :] = 0
            mark_gesture(out, gesture, one_point[i], closed[i], radius, piece, edge_eps)
            continue
        first, stop = mark_gesture(scratch, gesture, one_point[i], closed[i], radius, piece,
                                   edge_eps)  # fmt: skip
        out[:, :] = scratch
        if stop > first:
            scratch[first:stop, :] = 0
