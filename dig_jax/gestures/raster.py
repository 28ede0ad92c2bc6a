"""Hard rasterisation of gestures with a disc brush: two host paths and a batched jnp path.

A pixel (row r, column c) is marked iff its centre (x=c, y=r) lies within `radius` px (Euclidean,
inclusive) of the gesture: of the point for a click, of the open polyline for a scribble, of the
closed polyline (last point joined back to the first) for lassos and rectangles.

- `rasterize_reference` (numpy): segments are first clipped to the image enlarged by the radius
  (+1 px), which cannot change a pixel inside the image (its nearest gesture point within
  `radius` lies in that box), then split into pieces of at most `_PIECE` px, and the distance to
  every piece is evaluated on a fixed window of pixels around it. Far-away points cost nothing.
- `rasterize` (the host path used everywhere; `rasterize_many` for several): each clipped
  segment's capsule meets each row in one x-interval computed in closed form (float64) and the
  interval's columns are marked; pixel centres within 1e-4 px of an interval end get the
  reference's distance test against the same pieces, so both return the same bytes
  (property-tested). The loop is one numba kernel (`dig_jax.gestures.capsules`).
- `rasterize_batch` (jnp, jit/vmap): every segment's capsule meets each image row in one interval
  of x, computed in closed form; the intervals are merged per row with a difference array and a
  cumulative sum, so the cost is O(N * H + H * W) per gesture instead of O(N * H * W).

The batch path agrees with the host paths except for pixel centres within ~1e-3 px of the brush
edge (float32 rounding).
Far-away points: both refuse coordinates beyond ±`MAX_COORD` px (ValueError), and
`rasterize_batch` clips segments reaching far outside the image on the host in float64, as
`rasterize` does, before the float32 device code sees them (inside a caller's jit it cannot:
keep traced points within a few image sizes there).
`distance_map` is the exact Euclidean distance transform to the marked pixels.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from dig_jax.gestures.capsules import mark_gesture, mark_gestures
from dig_jax.gestures.edt import edt_lookup
from dig_jax.gestures.threads import map_chunked, resolve_workers
from dig_jax.gestures.types import BRUSH_RADIUS, Gesture, GestureKind

_PIECE = 4.0  # px, longest segment piece in the numpy reference
MAX_COORD = 1e10  # px: beyond this even float64 clipping loses sub-pixel precision


def _check_coords(points: np.ndarray) -> None:
    """ValueError naming `points` when a finite coordinate lies beyond ±MAX_COORD px."""
    points = np.asarray(points, np.float64)
    finite = points[np.isfinite(points)]
    if finite.size and np.abs(finite).max() > MAX_COORD:
        raise ValueError(
            f"points: coordinates must lie within ±{MAX_COORD:g} px, got {np.abs(finite).max():g}"
        )


def _host(value: object) -> np.ndarray | None:
    """`value` as numpy when concrete; None for a tracer (inside a caller's jit)."""
    try:
        return np.asarray(value)
    except jax.errors.TracerArrayConversionError:
        return None


def check_strokes(points: object, lengths: object, kinds: object) -> None:
    """ValueError naming the argument for concrete batched strokes points [B, N, 2] whose used
    points (the first `lengths`, one for a click) are NaN or inf, lengths outside 0..N, or kinds
    outside -1..4 (-1: no kind, the polyline as given). Tracers are not inspected."""
    pts, lens, codes = _host(points), _host(lengths), _host(kinds)
    n = np.shape(points)[1]
    if lens is not None and lens.size and (lens.min() < 0 or lens.max() > n):
        raise ValueError(f"lengths must be in 0..{n} (points per gesture), got {lens.tolist()}")
    if codes is not None and codes.size and (codes.min() < -1 or codes.max() > 4):
        raise ValueError(f"kinds must be GestureKind codes 0..4 (or -1), got {codes.tolist()}")
    if pts is None or lens is None or codes is None:
        return
    used = (
        np.arange(n) < np.where(codes == int(GestureKind.CLICK), np.minimum(lens, 1), lens)[:, None]
    )
    bad = used & ~np.isfinite(pts.astype(np.float64)).all(-1)
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise ValueError(f"points[{row}, {col}] is NaN or inf (within its gesture's length)")


def _check_shape(shape: Sequence[int]) -> tuple[int, int]:
    if len(shape) != 2 or int(shape[0]) < 1 or int(shape[1]) < 1:
        raise ValueError(f"shape must be (H, W) with H, W >= 1, got {tuple(shape)}")
    return int(shape[0]), int(shape[1])


def _check_radius(radius: float) -> float:
    if not np.isfinite(radius) or radius < 0:
        raise ValueError(f"radius must be a finite number >= 0, got {radius}")
    return float(radius)


def gesture_segments(gesture: Gesture) -> tuple[np.ndarray, np.ndarray]:
    """Segment end points (A float64[S, 2], B float64[S, 2]) whose capsules make up the brush."""
    pts = np.asarray(gesture.points, dtype=np.float64)
    if gesture.kind == GestureKind.CLICK or len(pts) == 1:
        pts = pts[:1]
        return pts, pts
    if gesture.closed:
        return pts, np.roll(pts, -1, axis=0)
    return pts[:-1], pts[1:]


def clip_segments(
    a: np.ndarray, b: np.ndarray, box: tuple[float, float, float, float]
) -> tuple[np.ndarray, np.ndarray]:
    """The parts of segments a->b (float64[S, 2]) inside `box` = (x0, y0, x1, y1) (Liang-Barsky).

    Segments missing the box are dropped; end points already inside are kept bit for bit.
    """
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    d = b - a
    t0, t1 = np.zeros(len(a)), np.ones(len(a))
    keep = np.ones(len(a), bool)
    for axis, lo, hi in ((0, box[0], box[2]), (1, box[1], box[3])):
        p, dp = a[:, axis], d[:, axis]
        moving = dp != 0
        keep &= moving | ((p >= lo) & (p <= hi))
        safe = np.where(moving, dp, 1.0)
        ta, tb = (lo - p) / safe, (hi - p) / safe
        t0 = np.maximum(t0, np.where(moving, np.minimum(ta, tb), 0.0))
        t1 = np.minimum(t1, np.where(moving, np.maximum(ta, tb), 1.0))
    keep &= t0 <= t1
    a, b, d, t0, t1 = a[keep], b[keep], d[keep], t0[keep, None], t1[keep, None]
    start = np.where(t0 == 0.0, a, a + t0 * d)
    stop = np.where(t1 == 1.0, b, a + t1 * d)
    return start, stop


def _split_segments(a: np.ndarray, b: np.ndarray, piece: float) -> tuple[np.ndarray, np.ndarray]:
    """Split each segment into equal pieces no longer than `piece` (same union of capsules)."""
    lengths = np.linalg.norm(b - a, axis=1)
    counts = np.maximum(1, np.ceil(lengths / piece).astype(np.int64))
    seg = np.repeat(np.arange(len(a)), counts)
    first = np.cumsum(counts) - counts
    k = np.arange(counts.sum()) - np.repeat(first, counts)
    t0 = (k / counts[seg])[:, None]
    t1 = ((k + 1) / counts[seg])[:, None]
    d = b[seg] - a[seg]
    return a[seg] + t0 * d, a[seg] + t1 * d


def segment_distance_np(px: np.ndarray, py: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Euclidean distance from points (px, py) to segments a->b (all broadcast), float64."""
    dx, dy = b[..., 0] - a[..., 0], b[..., 1] - a[..., 1]
    rx, ry = px - a[..., 0], py - a[..., 1]
    len2 = dx * dx + dy * dy
    t = np.where(len2 > 0, (rx * dx + ry * dy) / np.where(len2 > 0, len2, 1.0), 0.0)
    t = np.clip(t, 0.0, 1.0)
    return np.hypot(rx - t * dx, ry - t * dy)


def _clipped(a: np.ndarray, b: np.ndarray, h: int, w: int, radius: float):
    """Segments a -> b (`gesture_segments`) clipped to the image enlarged by the radius (+1 px),
    which cannot change a pixel inside the image: (A f64[S, 2], B f64[S, 2])."""
    return clip_segments(a, b, (-radius - 1.0, -radius - 1.0, w + radius, h + radius))


# Interval ends are exact to ~1e-6 px (float64; the square root of a disc's edge amplifies
# rounding); a pixel centre closer than this to an end is decided by the reference's test.
_EDGE_EPS = 1e-4
# Below this radius a row parallel to a segment at exactly `radius` from it is decided by the
# reference's rounding (its distance there is hypot(~1e-13, radius)): such brushes use it.
_MIN_INTERVAL_RADIUS = 1e-3


def stroke_map(
    points: object, shape: Sequence[int], *, closed: bool = False, radius: float = BRUSH_RADIUS
) -> np.ndarray:
    """What a person drew -> gesture map uint8[H, W] {0, 1}, without a gesture kind.

    `points`: [[x, y], ...] in photo pixels (x = column, y = row, pixel centres at integers) in
    drawing order. One point is a dot, several an open polyline, `closed` joins the last point
    back to the first (a lasso, at least 3 points); drawn with the disc brush of `radius` px.
    No kind is inferred or needed: the models are gesture-agnostic. ValueError, naming the
    problem, for an empty, malformed or non-finite stroke, or one that misses the photo.
    """
    if points is None or (hasattr(points, "__len__") and len(points) == 0):
        raise ValueError("empty stroke: give at least one [x, y] point")
    try:
        pts = np.asarray(points, np.float64)
    except (TypeError, ValueError):
        raise ValueError("a stroke is a list of [x, y] pairs of numbers") from None
    if pts.ndim != 2 or pts.shape[1] != 2:
        raise ValueError(f"a stroke is a list of [x, y] pairs, got shape {pts.shape}")
    if not np.isfinite(pts).all():
        raise ValueError("a stroke is a list of [x, y] pairs of finite numbers (NaN or inf seen)")
    if closed and len(pts) < 3:
        raise ValueError(f"a closed stroke (lasso) needs at least 3 points, got {len(pts)}")
    if closed:
        kind = GestureKind.LOOSE_LASSO
    else:
        kind = GestureKind.CLICK if len(pts) == 1 else GestureKind.SCRIBBLE
    gesture = rasterize(Gesture(kind, pts.astype(np.float32), closed=closed), shape, radius)
    if not gesture.any():
        h, w = shape[:2]
        raise ValueError(f"the stroke does not touch the {w}×{h} photo")
    return gesture


def rasterize(gesture: Gesture, shape: Sequence[int], radius: float = BRUSH_RADIUS) -> np.ndarray:
    """uint8[H, W] in {0, 1}: 1 where the brush covers the pixel centre (host path, exact).

    Each clipped segment's capsule meets each row it reaches in one interval of x, in closed
    form (float64); the integer columns of the intervals are marked. Pixel centres within
    `_EDGE_EPS` of an interval end are decided by the distance test of `rasterize_reference`
    (against the same pieces), so the two return the same bytes, at a fraction of the cost.
    """
    h, w = _check_shape(shape)
    radius = _check_radius(radius)
    _check_coords(gesture.points)
    if radius < _MIN_INTERVAL_RADIUS:
        return rasterize_reference(gesture, shape, radius)
    out = np.zeros((h, w), np.uint8)
    click = gesture.kind == GestureKind.CLICK
    points = np.asarray(gesture.points, np.float64)
    mark_gesture(out, points, click, gesture.closed, radius, _PIECE, _EDGE_EPS)
    return out


def rasterize_many(
    gestures: Sequence[Gesture],
    shape: Sequence[int],
    radius: float = BRUSH_RADIUS,
    out: np.ndarray | None = None,
    workers: int | None = None,
) -> np.ndarray:
    """uint8[B, H, W]: `rasterize` of every gesture, byte for byte (one compiled call per thread).

    out: an optional uint8[B, H, W] C-contiguous buffer to fill (it is cleared first) and
    return; reusing one spares a fresh allocation's page faults, which cost more than drawing
    (~0.06 ms per 512² map on this machine). workers: threads, each clearing and drawing a
    contiguous chunk of the maps (None: the CPUs this process may use).
    """
    h, w = _check_shape(shape)
    radius = _check_radius(radius)
    gestures = list(gestures)
    lengths = [len(gesture.points) for gesture in gestures]
    points = np.concatenate([g.points for g in gestures] or [np.zeros((0, 2))], dtype=np.float64)
    _check_coords(points)
    if out is None:
        out = np.empty((len(gestures), h, w), np.uint8)
    elif out.shape != (len(gestures), h, w) or out.dtype != np.uint8:
        raise ValueError(
            f"out must be uint8[{len(gestures)}, {h}, {w}], got {out.dtype}{list(out.shape)}"
        )
    elif not out.flags.c_contiguous or not out.flags.writeable:
        raise ValueError("out must be a writeable C-contiguous array")

    if radius < _MIN_INTERVAL_RADIUS:
        for i, gesture in enumerate(gestures):
            out[i] = rasterize_reference(gesture, shape, radius)
        return out
    starts = np.zeros(len(gestures) + 1, np.int64)
    np.cumsum(lengths, out=starts[1:])
    one_point = np.array([g.kind == GestureKind.CLICK for g in gestures], bool)
    closed = np.array([g.closed for g in gestures], bool)
    chunks = min(resolve_workers(workers), len(gestures))
    bounds = [len(gestures) * k // max(chunks, 1) for k in range(chunks + 1)]

    def draw(k: int) -> None:  # one compiled call per chunk of maps, GIL released
        lo, hi = bounds[k], bounds[k + 1]
        mark_gestures(
            out[lo:hi], points, starts[lo : hi + 1], one_point[lo:hi], closed[lo:hi], radius,
            _PIECE, _EDGE_EPS,
        )  # fmt: skip

    map_chunked(draw, range(chunks), chunks or 1)
    return out


def rasterize_reference(
    gesture: Gesture, shape: Sequence[int], radius: float = BRUSH_RADIUS
) -> np.ndarray:
    """Reference rasteriser: uint8[H, W] in {0, 1}, 1 where the brush covers the pixel centre.

    The distance to every piece is evaluated on a window of pixels around it (slow, simple).
    """
    h, w = _check_shape(shape)
    radius = _check_radius(radius)
    _check_coords(gesture.points)
    a, b = _split_segments(*_clipped(*gesture_segments(gesture), h, w, radius), _PIECE)
    size = int(np.ceil(2 * radius + _PIECE)) + 2
    origin_x = np.floor(np.minimum(a[:, 0], b[:, 0]) - radius).astype(np.int64)
    origin_y = np.floor(np.minimum(a[:, 1], b[:, 1]) - radius).astype(np.int64)
    grid = np.arange(size)
    xs = origin_x[:, None, None] + grid[None, None, :]  # [S, 1, size]
    ys = origin_y[:, None, None] + grid[None, :, None]  # [S, size, 1]
    dist = segment_distance_np(xs, ys, a[:, None, None, :], b[:, None, None, :])
    xs, ys = np.broadcast_arrays(xs, ys)
    hit = (dist <= radius) & (xs >= 0) & (xs < w) & (ys >= 0) & (ys < h)
    out = np.zeros((h, w), np.uint8)
    out[ys[hit], xs[hit]] = 1
    return out


def pad_gestures(
    gestures: Sequence[Gesture], n_max: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Pack gestures for `rasterize_batch`.

    Returns points float32[B, N, 2] (rows past a gesture's length repeat its last point and are
    ignored downstream), lengths int32[B], kinds int32[B], closed bool[B]; N = n_max or the longest.
    """
    if len(gestures) == 0:
        raise ValueError("gestures must not be empty")
    longest = max(len(g.points) for g in gestures)
    n = longest if n_max is None else int(n_max)
    if n < longest:
        raise ValueError(f"n_max={n} is shorter than the longest gesture ({longest} points)")
    points = np.zeros((len(gestures), n, 2), np.float32)
    for i, g in enumerate(gestures):
        k = len(g.points)
        points[i, :k] = g.points
        points[i, k:] = g.points[-1]
    lengths = np.array([len(g.points) for g in gestures], np.int32)
    kinds = np.array([int(g.kind) for g in gestures], np.int32)
    closed = np.array([g.closed for g in gestures], bool)
    return points, lengths, kinds, closed


def padded_segments(
    points: jax.Array, length: jax.Array, kind: jax.Array, closed: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Segments (A f32[N, 2], B f32[N, 2], valid bool[N]) of one padded gesture (jnp).

    Segment i joins point i to point i+1; the last real point joins back to point 0 when `closed`,
    else to itself (a disc); clicks keep only point 0. Padding rows, segments touching a
    non-finite point (NaN / inf), and every segment of a gesture with `length` <= 0 are invalid:
    they are not drawn. `kind` < 0 (no kind) uses the polyline as given.
    """
    n = points.shape[0]
    present = length > 0
    length = jnp.where(kind == int(GestureKind.CLICK), 1, jnp.clip(length, 1, n))
    idx = jnp.arange(n)
    last = idx == length - 1
    nxt = jnp.where(last, jnp.where(closed, 0, idx), jnp.minimum(idx + 1, n - 1))
    b = points[nxt]
    finite = jnp.all(jnp.isfinite(points), axis=-1) & jnp.all(jnp.isfinite(b), axis=-1)
    return points, b, (idx < length) & finite & present


def _capsule_row_intervals(a, b, y, radius):
    """x-interval [lo, hi] where the row at height y meets capsule(a, b, radius); empty: lo > hi.

    a, b: f32[..., 2] and y: f32[...] broadcast together (elementwise; traceable). The host
    rasteriser computes the same interval per scalar in `capsules._row_interval` (float64).
    """
    inf = jnp.asarray(jnp.inf, a.dtype)
    ax, ay = a[..., 0], a[..., 1]
    dx, dy = b[..., 0] - ax, b[..., 1] - ay
    ry = y - ay

    def disc(cx_off, cy_off):  # disc centred at a + offset; x relative to ax
        v = radius * radius - (ry - cy_off) ** 2
        half = jnp.sqrt(jnp.maximum(v, 0.0))
        ok = v >= 0
        return jnp.where(ok, cx_off - half, inf), jnp.where(ok, cx_off + half, -inf)

    lo_a, hi_a = disc(0.0, 0.0)
    lo_b, hi_b = disc(dx, dy)
    # Band: 0 <= rx*dx + ry*dy <= len2 and |rx*dy - ry*dx| <= radius*len, each linear in rx.
    len2 = dx * dx + dy * dy
    length = jnp.sqrt(len2)

    def linear(coef, low, high):  # {rx : low <= coef * rx <= high}
        safe = jnp.where(coef == 0, 1.0, coef)
        p, q = low / safe, high / safe
        lo = jnp.where(coef > 0, p, jnp.where(coef < 0, q, jnp.where(low <= 0, -inf, inf)))
        hi = jnp.where(coef > 0, q, jnp.where(coef < 0, p, jnp.where(high >= 0, inf, -inf)))
        lo = jnp.where((coef == 0) & (high < 0), inf, lo)
        return lo, hi

    lo_t, hi_t = linear(dx, -ry * dy, len2 - ry * dy)
    lo_n, hi_n = linear(dy, ry * dx - radius * length, ry * dx + radius * length)
    lo_band, hi_band = jnp.maximum(lo_t, lo_n), jnp.minimum(hi_t, hi_n)
    band = (len2 > 0) & (lo_band <= hi_band)
    lo_band, hi_band = jnp.where(band, lo_band, inf), jnp.where(band, hi_band, -inf)
    lo = jnp.minimum(jnp.minimum(lo_a, lo_b), lo_band) + ax
    hi = jnp.maximum(jnp.maximum(hi_a, hi_b), hi_band) + ax
    return lo, hi


def _mark_intervals(rows, lo, hi, use, shape, n_segments):
    """uint8[H, W]: union over pairs of the integer columns in [lo, hi] on row `rows`."""
    h, w = shape
    start = jnp.clip(jnp.ceil(lo), 0, w).astype(jnp.int32)
    stop = jnp.clip(jnp.floor(hi) + 1, 0, w).astype(jnp.int32)
    use = use & (stop > start)
    start = jnp.where(use, start, w)  # column w is a dump, dropped below
    stop = jnp.where(use, stop, w)
    rows = jnp.clip(rows, 0, h - 1)
    # A pixel is covered by at most one interval per segment: int16 cannot overflow for N < 2**15.
    dtype = jnp.int16 if n_segments < 2**15 else jnp.int32
    diff = jnp.zeros((h, w + 1), dtype)
    diff = diff.at[rows, start].add(1).at[rows, stop].add(-1)
    return (jnp.cumsum(diff[:, :w], axis=1) > 0).astype(jnp.uint8)


def _rasterize_dense(a, b, valid, shape, radius):
    """Every (segment, row) pair: O(N * H) intervals."""
    h, _ = shape
    ys = jnp.arange(h, dtype=jnp.float32)
    lo, hi = _capsule_row_intervals(a[:, None, :], b[:, None, :], ys[None, :], radius)
    rows = jnp.broadcast_to(jnp.arange(h)[None, :], lo.shape)
    return _mark_intervals(rows, lo, hi, valid[:, None], shape, a.shape[0])


def _pair_budget(n: int, shape: tuple[int, int], radius: float) -> int:
    """Static number of (segment, row) pairs for the sparse path; beyond it the dense path runs."""
    return n * (2 * int(np.ceil(radius)) + 3) + 4 * shape[0]


def _row_ranges(a, b, valid, h, radius):
    """First row and number of rows each segment's capsule can reach (i32[N] each)."""
    y_lo = jnp.minimum(a[:, 1], b[:, 1]) - radius
    y_hi = jnp.maximum(a[:, 1], b[:, 1]) + radius
    row0 = jnp.clip(jnp.ceil(y_lo), 0, h).astype(jnp.int32)
    row1 = jnp.clip(jnp.floor(y_hi) + 1, 0, h).astype(jnp.int32)
    return row0, jnp.where(valid, jnp.maximum(row1 - row0, 0), 0)


def _rasterize_sparse(a, b, valid, shape, radius, budget):
    """Only the rows each segment's capsule can reach, packed into `budget` (segment, row) pairs."""
    row0, counts = _row_ranges(a, b, valid, shape[0], radius)
    ends = jnp.cumsum(counts)
    slot = jnp.arange(budget)
    seg = jnp.minimum(jnp.searchsorted(ends, slot, side="right"), a.shape[0] - 1)
    rows = row0[seg] + slot - (ends[seg] - counts[seg])
    lo, hi = _capsule_row_intervals(a[seg], b[seg], rows.astype(jnp.float32), radius)
    return _mark_intervals(rows, lo, hi, slot < ends[-1], shape, a.shape[0])


def _check_batch_shapes(points, lengths, kinds, closed) -> None:
    """ValueError unless points is [B, N >= 1, 2] and lengths, kinds, closed are [B]."""
    shape = tuple(np.shape(points))
    if len(shape) != 3 or shape[1] < 1 or shape[2] != 2:
        raise ValueError(f"points must have shape [B, N>=1, 2], got {shape}")
    for name, value in (("lengths", lengths), ("kinds", kinds), ("closed", closed)):
        if tuple(np.shape(value)) != shape[:1]:
            raise ValueError(f"{name} must have shape ({shape[0]},), got {tuple(np.shape(value))}")


@functools.partial(jax.jit, static_argnames=("shape", "radius"))
def _rasterize_batch(points, lengths, kinds, closed, shape, radius):
    a, b, valid = jax.vmap(padded_segments)(points.astype(jnp.float32), lengths, kinds, closed)
    dense = jax.vmap(functools.partial(_rasterize_dense, shape=shape, radius=radius))
    budget = _pair_budget(points.shape[1], shape, radius)
    if budget >= points.shape[1] * shape[0]:
        return dense(a, b, valid)
    sparse = jax.vmap(
        functools.partial(_rasterize_sparse, shape=shape, radius=radius, budget=budget)
    )
    needed = jax.vmap(lambda a, b, v: _row_ranges(a, b, v, shape[0], radius)[1].sum())(a, b, valid)
    # One branch for the whole batch (a vmapped cond would evaluate both).
    return jax.lax.cond(jnp.all(needed <= budget), sparse, dense, a, b, valid)


def rasterize_batch(
    points: jax.Array,
    lengths: jax.Array,
    kinds: jax.Array,
    closed: jax.Array,
    shape: Sequence[int],
    radius: float = BRUSH_RADIUS,
) -> jax.Array:
    """Batched jnp rasteriser: points f32[B, N, 2], lengths i32[B], kinds i32[B], closed bool[B].

    Returns uint8[B, H, W] in {0, 1}; the same pixels as `rasterize` (see module docstring).
    Jitted with `shape` and `radius` static; also traceable inside a caller's jit. Rows with
    length 0 draw nothing. Concrete inputs are checked (`check_strokes`): a NaN point within a
    gesture's length, a length outside 0..N or a kind outside -1..4 is a ValueError.
    """
    shape = _check_shape(shape)
    _check_batch_shapes(points, lengths, kinds, closed)
    check_strokes(points, lengths, kinds)
    radius = _check_radius(radius)
    try:  # concrete points are checked, and clipped on the host when they reach far out
        host = np.asarray(points, np.float64)
    except jax.errors.TracerArrayConversionError:  # traced inside a caller's jit
        host = None
    if host is not None:
        _check_coords(host)
        if np.abs(np.nan_to_num(host)).max() > 2 * max(shape) + 16:
            clipped = _host_clip(host, lengths, kinds, closed, shape, radius)
            points, lengths, kinds, closed = clipped
    return _rasterize_batch(points, lengths, kinds, closed, shape, radius)


def _host_clip(points, lengths, kinds, closed, shape, radius):
    """The same brush strokes with every segment clipped (float64, as `rasterize` does) to the
    image enlarged by the radius: each gesture becomes an open polyline a0 b0 NaN a1 b1 NaN ...
    whose NaN rows break it into the clipped segments."""
    points, lengths = np.asarray(points, np.float64), np.asarray(lengths)
    kinds, closed = np.asarray(kinds), np.asarray(closed)
    h, w = shape
    box = (-radius - 1.0, -radius - 1.0, w + radius, h + radius)
    n = points.shape[1]
    lines = []
    for pts, length, kind, loop in zip(points, lengths, kinds, closed, strict=True):
        count = 0 if length <= 0 else (1 if kind == GestureKind.CLICK else min(int(length), n))
        p = pts[:count]
        q = np.roll(p, -1, axis=0) if loop else np.concatenate([p[1:], p[-1:]])
        ok = np.isfinite(p).all(1) & np.isfinite(q).all(1)
        a, b = clip_segments(p[ok], q[ok], box)
        line = np.stack([a, b, np.full_like(a, np.nan)], 1).reshape(-1, 2)[:-1]
        lines.append(line)
    longest = max(1, *(len(line) for line in lines))
    out = np.zeros((len(lines), longest, 2), np.float32)
    for i, line in enumerate(lines):
        out[i, : len(line)] = line
    count = np.array([len(line) for line in lines], np.int32)
    scribble = np.full(len(lines), int(GestureKind.SCRIBBLE), np.int32)
    return out, count, scribble, np.zeros(len(lines), bool)


def distance_map(gesture_map: np.ndarray) -> np.ndarray:
    """float32[H, W]: EDT (px) of every pixel to the nearest marked pixel, truncated at 255, / 255.

    An empty map gives all ones (no marked pixel: distance beyond the truncation). The values
    are exactly scipy's `ndimage.distance_transform_edt` (sqrt of an integer squared distance,
    in float64, then float32), from the exact integer transform `dig_jax.gestures.edt`.
    """
    return edt_lookup(_check_map(gesture_map), _DISTANCE_CAP, _UNIT_DISTANCE)


def distance_uint8(gesture_map: np.ndarray) -> np.ndarray:
    """uint8[H, W]: `distance_map` * 255 rounded, i.e. the EDT in px rounded and truncated at 255.

    Equal to `np.rint(distance_map(g) * 255).astype(np.uint8)` without the float pass: looked
    up per integer squared distance (an EDT value, the square root of an integer, is never a
    rounding tie).
    """
    return edt_lookup(_check_map(gesture_map), _DISTANCE_CAP, _ROUNDED_DISTANCE)


def _check_map(gesture_map: object) -> np.ndarray:
    """A 2-D gesture map (nonzero = marked) as numpy; ValueError for another rank or a float
    map holding NaN or Inf (NaN would read as marked everywhere)."""
    gesture_map = np.asarray(gesture_map)
    if gesture_map.ndim != 2:
        raise ValueError(f"gesture_map must be 2-D [H, W], got shape {gesture_map.shape}")
    if np.issubdtype(gesture_map.dtype, np.inexact) and not np.isfinite(gesture_map).all():
        raise ValueError("gesture_map holds NaN or Inf values")
    return gesture_map


# Per integer squared distance d² ≤ 256²: the truncated distance as distance_map and
# distance_uint8 give it (256² and beyond read 255).
_DISTANCE_CAP = 256
_TRUNCATED = np.minimum(np.sqrt(np.arange(_DISTANCE_CAP**2 + 1, dtype=np.float64)), 255.0)
_UNIT_DISTANCE = (_TRUNCATED / 255.0).astype(np.float32)
_ROUNDED_DISTANCE = np.rint(_UNIT_DISTANCE.astype(np.float64) * 255.0).astype(np.uint8)
