"""Gesture simulators (numpy + the compiled kernels of this package), following the DIG recipe.

Every simulator takes a region mask (bool or uint8 {0, 1}, [H, W]) and an explicit
`numpy.random.Generator`; the same seed gives the same points. Points are float32 (x, y) inside the
image's continuous extent [-0.5, W - 0.5] x [-0.5, H - 0.5] (pixel centres at integers).

- Click: a uniformly random pixel of the region.
- Scribble: 4-6 control points drawn from the region's pixels; the x coordinates are sorted with
  probability 0.3 and, independently, the y coordinates with probability 0.6; a cubic B-spline
  (centripetal parameter) is interpolated through them and sampled about every `SPACING` px.
- Lassos: N points spread evenly (random phase) along the outer boundary L of the region (holes
  filled; the longest outline if the region has several pieces), N ~ U{ceil(|L|/512), floor(|L|/8)},
  at least 3; each point jittered by U(-J, J) per axis (J = 4 loose, 0 tight); a periodic cubic
  B-spline closes the curve. Loose lassos trace the region dilated by a disc of radius
  `loose_dilation_radius(area)` = clip(round(0.1 * sqrt(area)), 6, 30) px. Collinear points are
  redrawn up to 10 times (then kept: a degenerate but valid closed stroke).
- Rectangle: the tight box with x_min, x_max, y_min, y_max each moved by v * g_i * (extent on that
  axis), g_i ~ N(0, 1), v ~ U(0.10, 0.15); clipped to the image; redrawn up to 10 times if under
  1 px wide or high, then the tight box itself.

A refinement gesture is the creation gesture of the targeted error component.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dig_jax import _numba
from dig_jax.gestures.contours import MASK_EMPTY, MASK_NOT_BINARY, box_outline, mask_outline
from dig_jax.gestures.encode import box_outline_points
from dig_jax.gestures.scan import (
    _BIG_ENDIAN,
    _CHUNK,
    MarkedPixels,
    boxes_at,
    checked_box,
    counts_at,
    nth_at,
    tight_box,
)
from dig_jax.gestures.spline import clipped_curve, outline_samples, sample_curve
from dig_jax.gestures.threads import available_cpus, map_chunked, map_in_order, resolve_workers
from dig_jax.gestures.types import Context, Gesture, GestureKind

SPACING = 2.0  # px between consecutive samples of an interpolated curve
SCRIBBLE_POINTS = (4, 6)  # inclusive range of control points
SORT_X_PROB, SORT_Y_PROB = 0.3, 0.6
LOOSE_JITTER, TIGHT_JITTER = 4.0, 0.0
RECT_SPREAD = (0.10, 0.15)
MAX_REDRAWS = 10
_NO_OFFSETS = np.zeros((0, 2))  # a tight lasso's (no jitter)


def check_rng(rng: object) -> np.random.Generator:
    """`rng` itself if it is a numpy Generator; ValueError naming `rng` otherwise (None too:
    every simulator takes an explicit Generator, so the same seed gives the same gesture)."""
    if not isinstance(rng, np.random.Generator):
        raise ValueError(
            f"rng must be a numpy.random.Generator (e.g. np.random.default_rng(0)), got {rng!r}"
        )
    return rng


def as_region(mask: np.ndarray, name: str = "target") -> np.ndarray:
    """Validate a region mask (bool or integer {0, 1}, 2-D, non-empty) and return it as bool.

    Float masks are refused: 0.5 or NaN have no unambiguous meaning as a region.
    """
    mask = np.asarray(mask)
    if mask.ndim != 2:
        raise ValueError(f"{name} must be a 2-D [H, W] mask, got shape {mask.shape}")
    if mask.dtype != bool and not np.issubdtype(mask.dtype, np.integer):
        raise ValueError(f"{name} must be a bool or integer mask, got dtype {mask.dtype}")
    if mask.dtype in (np.uint8, np.int8):
        # One pass: the maximum says both "only 0 and 1" and "not empty"; the bytes of a {0, 1}
        # mask are already a valid bool array (a view, no copy).
        top = int(mask.max()) if mask.size else 0
        if top > 1 or (mask.dtype == np.int8 and mask.size and mask.min() < 0):
            raise ValueError(f"{name} must hold only 0 and 1 (or be bool)")
        if top == 0:
            raise ValueError(f"{name} is empty: no pixel to aim a gesture at")
        return mask.view(bool)
    if mask.dtype != bool:
        if mask.size and (mask.max() > 1 or mask.min() < 0):
            raise ValueError(f"{name} must hold only 0 and 1 (or be bool)")
        mask = mask.astype(bool)
    if not mask.any():
        raise ValueError(f"{name} is empty: no pixel to aim a gesture at")
    return mask


def _clip_to_image(points: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """f32[N, 2]: points clipped to the image's extent — the numpy reference of the clip that
    `spline.clipped_curve` and `spline.outline_samples` do in their compiled loops."""
    h, w = shape
    out = np.empty_like(points, dtype=np.float32)
    out[:, 0] = np.clip(points[:, 0], -0.5, w - 0.5)
    out[:, 1] = np.clip(points[:, 1], -0.5, h - 0.5)
    return out


def _dedupe(points: np.ndarray, closed: bool) -> np.ndarray:
    """Drop points equal to their predecessor (and, closed, a last point equal to the first)."""
    keep = np.ones(len(points), bool)
    keep[1:] = np.any(points[1:] != points[:-1], axis=1)
    points = points[keep]
    if closed and len(points) > 1 and np.array_equal(points[0], points[-1]):
        points = points[:-1]
    return points


def interpolate_curve(control: np.ndarray, closed: bool) -> np.ndarray:
    """Interpolating cubic spline through `control` f64[M, 2], sampled about every SPACING px.

    Open: the not-a-knot cubic spline (scipy's `make_interp_spline`), degree M - 1 for fewer
    than 4 distinct points. Closed: the periodic cubic interpolant (C2 at the joint; scipy's
    `CubicSpline(..., bc_type="periodic")`). Centripetal parameter (square root of the chord
    lengths, which curbs overshoot); the control points themselves are among the samples. One
    distinct point (or two, closed) is returned as is. Computed by `spline.sample_curve` (one
    compiled call; scipy's curves to ~1e-15 relative, tested).
    """
    control = _dedupe(np.asarray(control, np.float64), closed)
    if len(control) == 1 or (closed and len(control) < 3):
        return control
    return sample_curve(np.ascontiguousarray(control), closed, SPACING)


def click_points(region: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One uniformly random pixel of the region, f32[1, 2] (x, y)."""
    return _click_from(MarkedPixels(region), rng)


def _click_from(pixels: MarkedPixels, rng: np.random.Generator) -> np.ndarray:
    i = rng.integers(pixels.count)
    rows, cols = pixels.at(np.array([i]))
    return np.array([[cols[0], rows[0]]], np.float32)


def scribble_control_points(region: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """4-6 control points f64[K, 2] drawn from the region's pixels, coordinates maybe sorted."""
    return _scribble_from(MarkedPixels(region), rng)


def _scribble_from(pixels: MarkedPixels, rng: np.random.Generator) -> np.ndarray:
    k = int(rng.integers(SCRIBBLE_POINTS[0], SCRIBBLE_POINTS[1] + 1))
    pick = rng.choice(pixels.count, size=k, replace=pixels.count < k)
    rows, cols = pixels.at(pick)
    xs, ys = cols.astype(np.float64), rows.astype(np.float64)
    if rng.random() < SORT_X_PROB:
        xs = np.sort(xs)
    if rng.random() < SORT_Y_PROB:
        ys = np.sort(ys)
    return np.stack([xs, ys], axis=-1)


def loose_dilation_radius(area: int) -> int:
    """Radius (px) of the disc that dilates a region before a loose lasso traces it."""
    return int(np.clip(round(0.1 * np.sqrt(area)), 6, 30))


def region_outline(
    region: np.ndarray, dilation: int = 0, box: np.ndarray | None = None
) -> np.ndarray:
    """Longest outer outline f64[P, 2] (x, y), closed (first == last), of the (dilated) region.

    Works on a crop around the region; the outline runs half-way between marked and unmarked
    pixel centres (level 0.5 of scikit-image's `find_contours` on the zero-padded crop, through
    `longest_contour`, which returns the same points faster), with marked pixels 8-connected
    (`fully_connected="high"`), like the region's parts: pieces that touch only at a corner get
    one outline around both. `box`: the region's `tight_box` when the caller has it.
    """
    return _outline_and_arc(region, dilation, box)[0]


def _outline_and_arc(
    region: np.ndarray, dilation: int, box: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """(`region_outline`, its arc length f64[P] px from the first point), one compiled call
    (`contours.box_outline`: holes filled, dilated by a disc of `dilation` px — -1: the
    loose lasso's radius of the region's area — and traced in a crop around the region)."""
    marked = np.ascontiguousarray(region if region.dtype == bool else region > 0).view(np.uint8)
    box = tight_box(marked) if box is None else box
    if box[0] < 0:  # tight_box's answer for no marked pixel
        raise ValueError("region is empty: it has no outline")
    return box_outline(marked, box, dilation)


def _collinear(points: np.ndarray) -> bool:
    if len(points) < 3:
        return True
    centred = points - points.mean(axis=0)
    return bool(np.linalg.svd(centred, compute_uv=False)[-1] <= 1e-3)


def lasso_control_points(
    region: np.ndarray, jitter: float, rng: np.random.Generator, dilation: int = 0
) -> np.ndarray:
    """N >= 3 points f64[N, 2] evenly spread (random phase) along the outline, then jittered."""
    outline, arc = _outline_and_arc(region, dilation, None)
    return _lasso_from(outline, arc, jitter, region.shape, rng)


def _lasso_from(
    outline: np.ndarray,
    arc: np.ndarray,
    jitter: float,
    shape: tuple[int, int],
    rng: np.random.Generator,
) -> np.ndarray:
    """`lasso_control_points` from the outline f64[P, 2] and its arc length f64[P] (px)."""
    perimeter = arc[-1]
    low = int(np.ceil(perimeter / 512))
    high = max(low, int(np.floor(perimeter / 8)))
    n = max(3, int(rng.integers(low, high + 1)))
    for _ in range(MAX_REDRAWS + 1):
        phase = rng.random()
        offsets = rng.uniform(-jitter, jitter, size=(n, 2)) if jitter > 0 else _NO_OFFSETS
        # interpolated, jittered, clipped to the image and rounded to float32, in one call
        pts, spread = outline_samples(outline, arc, phase, n, offsets, *shape)
        if spread or not _collinear(pts):
            break
    return pts


def rectangle_box(region: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Perturbed tight box f32[4] (x1, y1, x2, y2), clipped to the image, at least 1 px each way."""
    return _rectangle_from(tight_box(region), region.shape, rng)


def _rectangle_from(
    box: np.ndarray, shape: tuple[int, int], rng: np.random.Generator
) -> np.ndarray:
    h, w = shape
    corners = [float(v) for v in box]
    x_extent, y_extent = corners[2] - corners[0], corners[3] - corners[1]
    extent, upper = (x_extent, y_extent, x_extent, y_extent), (w, h, w, h)
    for _ in range(MAX_REDRAWS):
        v = rng.uniform(*RECT_SPREAD)
        g = rng.standard_normal(4).tolist()
        # box + v * g * extent, clipped to [0, upper], in float64 as numpy did: Python floats
        # are the same doubles, the same operations in the same order, without the arrays
        x1, y1, x2, y2 = (
            min(max(b + v * gi * e, 0.0), u)
            for b, gi, e, u in zip(corners, g, extent, upper, strict=True)
        )
        if x2 - x1 >= 1 and y2 - y1 >= 1:
            return np.array([x1, y1, x2, y2], np.float32)
    return np.array(box, np.float32)


@_numba.njit(cache=True)
def _rectangle_corners(rng, boxes, h, w, low, high, redraws):
    """`_rectangle_from` of every tight box f64[B, 4] (x1, y1, x2, y2) -> f32[B, 4], drawing
    from `rng` (a numpy Generator: numba draws uniform and standard_normal with numpy's
    algorithms on its bit generator, so the stream and the values are the loop's; tested)."""
    out = np.empty((boxes.shape[0], 4), np.float32)
    upper = (float(w), float(h), float(w), float(h))
    c = np.empty(4)
    for i in range(boxes.shape[0]):
        b = boxes[i]
        extent = (b[2] - b[0], b[3] - b[1], b[2] - b[0], b[3] - b[1])
        out[i] = b  # the tight box itself when every draw is degenerate
        for _ in range(redraws):
            v = rng.uniform(low, high)
            g = rng.standard_normal(4)
            for k in range(4):  # Python's min(max(x, 0.0), u): the same comparisons
                x = b[k] + v * g[k] * extent[k]
                x = 0.0 if 0.0 > x else x
                c[k] = upper[k] if upper[k] < x else x
            if c[2] - c[0] >= 1 and c[3] - c[1] >= 1:
                out[i] = c
                break
    return out


_BYTE_DTYPES = (np.dtype(np.bool_), np.dtype(np.uint8), np.dtype(np.int8))


def _addresses(targets: list) -> tuple[np.ndarray, tuple[int, int]] | None:
    """(addresses int64[B] of the targets' bytes, their shape) when every target is a
    C-contiguous 2-D bool / uint8 / int8 numpy array of one non-empty shape, which the batch
    scans read in one compiled call; None otherwise (each target then on its own)."""
    if not targets or type(targets[0]) is not np.ndarray or _BIG_ENDIAN:
        return None
    shape = targets[0].shape
    if len(shape) != 2 or not targets[0].size:
        return None
    addresses = np.empty(len(targets), np.int64)
    for i, target in enumerate(targets):
        if (type(target) is not np.ndarray or target.shape != shape
                or target.dtype not in _BYTE_DTYPES or not target.flags.c_contiguous):  # fmt: skip
            return None
        addresses[i] = target.ctypes.data
    return addresses, shape


def _raise_first_bad(kind: GestureKind, targets: list, bad: np.ndarray) -> None:
    """The loop's ValueError for the first target flagged in `bad` (bool[B]), if any."""
    for i in np.flatnonzero(bad)[:1]:
        try:
            _survey(kind, targets[i], "target")
        except ValueError as err:
            raise ValueError(f"targets[{i}]: {err}") from None


@_numba.njit(cache=True, nogil=True)
def _scribble_controls(flat, picked, sort_x, sort_y, w):
    """Control points f64[B, K, 2] (x, y) of scribbles from the flat indices of their picked
    pixels (int64[B, K], the first picked[i] used): `_scribble_from`'s columns and rows, each
    axis sorted where asked."""
    out = np.zeros((flat.shape[0], flat.shape[1], 2))
    for i in range(flat.shape[0]):
        k = picked[i]
        xs = (flat[i, :k] % w).astype(np.float64)
        ys = (flat[i, :k] // w).astype(np.float64)
        if sort_x[i]:
            xs = np.sort(xs)
        if sort_y[i]:
            ys = np.sort(ys)
        out[i, :k, 0] = xs
        out[i, :k, 1] = ys
    return out


def _scribbles_from_counts(
    addresses: np.ndarray,
    shape: tuple[int, int],
    chunks: np.ndarray,
    counts: np.ndarray,
    rng: np.random.Generator,
) -> list[Gesture]:
    """The scribbles of `_simulate_batch`: `_scribble_from`'s draws in its order per target
    (numpy's choice has no array form), the pixel lookups and the sorts in one call each."""
    n, (h, w) = len(counts), shape
    most = SCRIBBLE_POINTS[1]
    picks = np.zeros((n, most), np.int64)
    picked = np.empty(n, np.int64)
    sort_x, sort_y = np.empty(n, bool), np.empty(n, bool)
    for i, count in enumerate(counts.tolist()):
        k = int(rng.integers(SCRIBBLE_POINTS[0], SCRIBBLE_POINTS[1] + 1))
        picks[i, :k] = rng.choice(count, size=k, replace=count < k)
        picked[i] = k
        sort_x[i] = rng.random() < SORT_X_PROB
        sort_y[i] = rng.random() < SORT_Y_PROB
    flat = nth_at(addresses, h, w, chunks, picks, picked)
    controls = _scribble_controls(flat, picked, sort_x, sort_y, w)
    kind = GestureKind.SCRIBBLE
    return [
        Gesture._trusted(kind, clipped_curve(controls[i, : picked[i]], False, SPACING, h, w), False)
        for i in range(n)
    ]


def _simulate_batch(
    kind: GestureKind,
    targets: list,
    addresses: np.ndarray,
    shape: tuple[int, int],
    rng: np.random.Generator,
    workers: int,
) -> list[Gesture]:
    """`simulate_many` of clicks, scribbles or rectangles on masks of one shape
    (`_addresses`): the scans in one compiled call per thread, the draws in one call where
    numpy or numba can make them (the loop's stream), the points in a few array operations."""
    n, (h, w) = len(targets), shape
    bounds = [n * k // workers for k in range(workers + 1)]
    binary = np.empty(n, bool)
    if kind in (GestureKind.CLICK, GestureKind.SCRIBBLE):
        chunks = np.empty((n, -(-(h * w // 8) // _CHUNK)), np.int64)
        counts = np.empty(n, np.int64)

        def scan(k: int) -> None:  # compiled, GIL released
            lo, hi = bounds[k], bounds[k + 1]
            counts_at(addresses[lo:hi], h, w, chunks[lo:hi], counts[lo:hi], binary[lo:hi])

        map_chunked(scan, range(workers), workers)
        _raise_first_bad(kind, targets, ~binary | (counts == 0))
        if kind == GestureKind.SCRIBBLE:
            return _scribbles_from_counts(addresses, shape, chunks, counts, rng)
        # numpy draws an array of bounds one element after the other: the loop's stream
        flat = nth_at(addresses, h, w, chunks, rng.integers(counts)[:, None], np.ones(n, np.int64))
        points = np.empty((n, 1, 2), np.float32)
        points[:, 0, 0], points[:, 0, 1] = flat[:, 0] % w, flat[:, 0] // w
        return [Gesture._trusted(kind, points[i], False) for i in range(n)]
    boxes = np.empty((n, 4), np.int64)

    def scan_boxes(k: int) -> None:
        lo, hi = bounds[k], bounds[k + 1]
        boxes_at(addresses[lo:hi], h, w, boxes[lo:hi], binary[lo:hi])

    map_chunked(scan_boxes, range(workers), workers)
    _raise_first_bad(kind, targets, ~binary | (boxes[:, 0] < 0))
    tight = np.stack([boxes[:, 2], boxes[:, 0], boxes[:, 3] + 1, boxes[:, 1] + 1], axis=-1)
    corners = _rectangle_corners(rng, tight.astype(np.float64), h, w, *RECT_SPREAD, MAX_REDRAWS)
    outlines = box_outline_points(corners)
    return [Gesture._trusted(kind, outlines[i], True) for i in range(n)]


def _kind(kind: GestureKind | int) -> GestureKind:
    """`kind` as a GestureKind; ValueError unless it is an integer code 0-4 (2.7 is not 2)."""
    if isinstance(kind, (bool, np.bool_)) or not isinstance(kind, (int, np.integer)):
        raise ValueError(f"kind must be a GestureKind code 0-4 (an integer), got {kind!r}")
    try:
        return GestureKind(int(kind))
    except ValueError:
        raise ValueError(f"kind must be a GestureKind code 0-4, got {kind}") from None


def _survey(kind: GestureKind, target: np.ndarray, name: str) -> tuple[object, tuple[int, int]]:
    """(what drawing a `kind` gesture needs to know of the region, its shape), no randomness:
    its marked pixels (click, scribble), its tight box (rectangle) or its outline (lassos).
    Validates the target as `as_region` does; for a bool / uint8 / int8 mask the first scan
    (the pixel count, the box, or a lasso's row runs) checks its bytes on the way (one pass
    over the mask)."""
    mask = np.asarray(target)
    if mask.ndim != 2 or mask.dtype not in (np.bool_, np.uint8, np.int8) or not mask.size:
        return _survey(kind, as_region(mask, name), name)  # as_region raises, or returns bool
    if kind in (GestureKind.LOOSE_LASSO, GestureKind.TIGHT_LASSO):
        # the box, the check and the runs the outline starts from, in one pass
        dilation = -1 if kind == GestureKind.LOOSE_LASSO else 0  # -1: from the region's area
        marked = np.ascontiguousarray(mask).view(np.uint8)
        status, outline, arc = mask_outline(marked, dilation)
        binary, empty, found = status != MASK_NOT_BINARY, status == MASK_EMPTY, (outline, arc)
    elif kind in (GestureKind.CLICK, GestureKind.SCRIBBLE):
        pixels = MarkedPixels(mask.view(bool))
        found, binary, empty = pixels, pixels.binary, pixels.count == 0
    else:  # the box of a rectangle
        box, binary = checked_box(mask)
        found, empty = box, box[0] < 0
    if not binary:
        raise ValueError(f"{name} must hold only 0 and 1 (or be bool)")
    if empty:
        raise ValueError(f"{name} is empty: no pixel to aim a gesture at")
    return found, mask.shape


def _draw(
    kind: GestureKind, survey: object, shape: tuple[int, int], rng: np.random.Generator
) -> np.ndarray:
    """The random part: a click point, control points or a box, from `_survey`'s answer."""
    if kind == GestureKind.CLICK:
        return _click_from(survey, rng)
    if kind == GestureKind.SCRIBBLE:
        return _scribble_from(survey, rng)
    if kind == GestureKind.RECTANGLE:
        return _rectangle_from(survey, shape, rng)
    loose = kind == GestureKind.LOOSE_LASSO
    outline, arc = survey
    return _lasso_from(outline, arc, LOOSE_JITTER if loose else TIGHT_JITTER, shape, rng)


def _finish(kind: GestureKind, drawn: np.ndarray, shape: tuple[int, int]) -> Gesture:
    """The gesture through `_draw`'s points: curves interpolated, boxes outlined."""
    # Every branch hands over a new finite float32 array (a pixel, a clipped box's corners, a
    # clipped curve): no need for Gesture's checks and copy.
    if kind == GestureKind.CLICK:
        return Gesture._trusted(kind, drawn, False)
    if kind == GestureKind.RECTANGLE:
        return Gesture._trusted(kind, box_outline_points(drawn), True)
    closed = kind != GestureKind.SCRIBBLE
    control = np.ascontiguousarray(drawn, np.float64)
    return Gesture._trusted(kind, clipped_curve(control, closed, SPACING, *shape), closed)


def simulate_creation(
    kind: GestureKind | int, target: np.ndarray, rng: np.random.Generator
) -> Gesture:
    """A gesture of `kind` aimed at the region `target` (bool / {0,1} [H, W]); see module doc."""
    kind = _kind(kind)
    check_rng(rng)
    found, shape = _survey(kind, target, "target")
    return _finish(kind, _draw(kind, found, shape, rng), shape)


def simulate_many(
    kind: GestureKind | int,
    targets: Sequence[np.ndarray],
    rng: np.random.Generator,
    workers: int | None = None,
) -> list[Gesture]:
    """`[simulate_creation(kind, t, rng) for t in targets]`, the same gestures, faster.

    The work that needs no randomness (scans, outlines) runs on `workers` threads; the random
    draws and the curves run in order in the calling thread, so `rng` ends where the loop
    would leave it. Clicks, scribbles and rectangles on masks of one shape (C-contiguous bool
    / uint8 / int8 [H, W], or a stacked [B, H, W] array) scan every mask in one compiled call
    per thread and draw in as few calls as numpy allows (`_simulate_batch`): the loop's
    per-target Python was most of their time. Default threads: the CPUs this process may use,
    except 1 for clicks, scribbles and rectangles on mixed masks, whose scans are short next
    to their Python and only contend for the GIL on threads (`benchmarks/gestures.py`).
    A bad target raises the loop's ValueError, prefixed with its index.
    """
    kind = _kind(kind)
    check_rng(rng)
    targets = list(targets)
    if kind in (GestureKind.CLICK, GestureKind.SCRIBBLE, GestureKind.RECTANGLE):
        batch = _addresses(targets)
        if batch is not None:
            threads = min(resolve_workers(workers), len(targets))
            return _simulate_batch(kind, targets, *batch, rng, threads)
    if workers is None:
        lasso = kind in (GestureKind.LOOSE_LASSO, GestureKind.TIGHT_LASSO)
        workers = available_cpus() if lasso else 1

    def survey(i: int) -> tuple[object, tuple[int, int]]:
        try:
            return _survey(kind, targets[i], "target")
        except ValueError as err:
            raise ValueError(f"targets[{i}]: {err}") from None

    # The draws and the curves run in this thread, in order, as the surveys come in (on
    # threads they only contended for the GIL: 0.07 against 0.13 ms per lasso's curve on two).
    return map_in_order(
        survey,
        lambda found: _finish(kind, _draw(kind, found[0], found[1], rng), found[1]),
        range(len(targets)),
        workers,
    )


def simulate_refinement(
    kind: GestureKind | int, error: np.ndarray, context: Context | int, rng: np.random.Generator
) -> Gesture:
    """A gesture aimed at the error component `error` (ADD: missing pixels, REMOVE: extra ones).

    The points come from the component exactly as `simulate_creation` takes them from a target;
    the context only says what the component is, it does not change the geometry.
    """
    if int(context) not in (Context.ADD, Context.REMOVE):
        raise ValueError(f"context must be Context.ADD (1) or Context.REMOVE (0), got {context}")
    kind = _kind(kind)
    check_rng(rng)
    found, shape = _survey(kind, error, "error")
    return _finish(kind, _draw(kind, found, shape, rng), shape)
