"""Rasterisers: known answers, numpy/jnp agreement (hypothesis), padding, distance maps."""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dig_jax.gestures import (
    Gesture,
    GestureKind,
    distance_map,
    pad_gestures,
    rasterize,
    rasterize_batch,
    rasterize_many,
)
from dig_jax.gestures.raster import (
    _pair_budget,
    _rasterize_batch,
    clip_segments,
    gesture_segments,
    rasterize_reference,
    segment_distance_np,
)

SHAPE = (48, 48)
N_MAX = 12
EDGE_TOL = 1e-3


def _edge_pixels(gesture: Gesture, shape, radius=5.0) -> np.ndarray:
    """Pixels whose centre is within EDGE_TOL px of the brush edge (float64 distance)."""
    a, b = gesture_segments(gesture)
    yy, xx = np.mgrid[: shape[0], : shape[1]]
    d = segment_distance_np(xx[..., None], yy[..., None], a, b).min(axis=-1)
    return np.abs(d - radius) <= EDGE_TOL


def _batch(gestures, shape=SHAPE, n_max=N_MAX):
    return np.asarray(rasterize_batch(*pad_gestures(gestures, n_max), shape))


points_st = st.lists(
    st.tuples(st.floats(-8, 56, width=32), st.floats(-8, 56, width=32)), min_size=1, max_size=N_MAX
)


def _gesture(points, closed: bool, integral: bool) -> Gesture:
    pts = np.asarray(points, np.float32)
    if integral:
        pts = np.round(pts)
    kind = GestureKind.CLICK if len(pts) == 1 else GestureKind.TIGHT_LASSO
    return Gesture(kind, pts, closed=closed and len(pts) > 1)


def test_click_disc_known_answer():
    g = Gesture(GestureKind.CLICK, [[10, 10]], closed=False)
    out = rasterize(g, SHAPE)
    assert out.dtype == np.uint8 and out.sum() == 81  # lattice points with dx^2 + dy^2 <= 25
    assert out[10, 15] == 1 and out[10, 16] == 0 and out[13, 14] == 1 and out[14, 14] == 0
    np.testing.assert_array_equal(_batch([g])[0], out)


def test_segment_known_answer():
    g = Gesture(GestureKind.SCRIBBLE, [[10, 10], [20, 10]], closed=False)
    out = rasterize(g, SHAPE)
    assert out.sum() == 46 + 46 + 9 * 11  # two half discs + 9 full columns
    np.testing.assert_array_equal(_batch([g])[0], out)


def test_closed_adds_the_closing_segment():
    pts = [[10, 10], [30, 10], [30, 30]]
    open_map = rasterize(Gesture(GestureKind.SCRIBBLE, pts, closed=False), SHAPE)
    closed_map = rasterize(Gesture(GestureKind.TIGHT_LASSO, pts, closed=True), SHAPE)
    assert open_map[20, 20] == 0 and closed_map[20, 20] == 1
    assert np.all(closed_map >= open_map)


def test_click_kind_uses_first_point_only():
    pts = np.array([[10, 10], [40, 40], [5, 40]], np.float32)
    batch = rasterize_batch(pts[None], np.array([3]), np.array([0]), np.array([False]), SHAPE)
    expected = rasterize(Gesture(GestureKind.CLICK, pts[:1], closed=False), SHAPE)
    np.testing.assert_array_equal(np.asarray(batch)[0], expected)


def test_padding_beyond_length_is_ignored():
    g = Gesture(GestureKind.SCRIBBLE, [[5, 5], [20, 8]], closed=False)
    points, lengths, kinds, closed = pad_gestures([g], N_MAX)
    points[0, 2:] = [[40, 40]] * (N_MAX - 2)  # garbage padding must not be drawn
    out = np.asarray(rasterize_batch(points, lengths, kinds, closed, SHAPE))[0]
    np.testing.assert_array_equal(out, rasterize(g, SHAPE))


def test_pad_gestures_layout_and_errors():
    gs = [
        Gesture(GestureKind.CLICK, [[1, 2]], closed=False),
        Gesture(GestureKind.RECTANGLE, [[0, 0], [5, 0], [5, 5], [0, 5]], closed=True),
    ]
    points, lengths, kinds, closed = pad_gestures(gs)
    assert points.shape == (2, 4, 2) and points.dtype == np.float32
    assert (
        lengths.tolist() == [1, 4] and kinds.tolist() == [0, 4] and closed.tolist() == [False, True]
    )
    with pytest.raises(ValueError, match="n_max"):
        pad_gestures(gs, n_max=2)
    with pytest.raises(ValueError, match="gestures"):
        pad_gestures([])


def test_sparse_and_dense_paths_agree_with_reference():
    # Few short segments fit the sparse budget; a full-height zigzag overflows it (dense path).
    short = Gesture(GestureKind.SCRIBBLE, [[5, 5], [9, 7], [12, 12]], closed=False)
    zigzag_pts = [[4 * i, -5 if i % 2 else 53] for i in range(N_MAX)]
    zigzag = Gesture(GestureKind.SCRIBBLE, zigzag_pts, closed=False)
    assert 11 * 58 > _pair_budget(N_MAX, SHAPE, 5.0)
    out = _batch([short, zigzag])
    np.testing.assert_array_equal(out[0], rasterize(short, SHAPE))
    np.testing.assert_array_equal(out[1], rasterize(zigzag, SHAPE))
    np.testing.assert_array_equal(_batch([short])[0], rasterize(short, SHAPE))


@given(
    points_st,
    st.booleans(),
    st.sampled_from(["float", "integral", "half"]),
    st.sampled_from([0.0, 0.5, 1.0, 2.0**0.5, 2.5, 3.0, 5.0, 7.3]),
    st.integers(1, 60),
    st.integers(1, 60),
)
def test_interval_rasteriser_equals_the_window_reference_bytes(points, closed, grid, radius, h, w):
    # Integral and half-integral points with integral radii put pixel centres exactly on the
    # brush edge: the host path must decide those ties as the reference does.
    pts = np.asarray(points, np.float32)
    pts = {"float": pts, "integral": np.round(pts), "half": np.round(pts * 2) / 2}[grid]
    kind = GestureKind.CLICK if len(pts) == 1 else GestureKind.SCRIBBLE
    g = Gesture(kind, pts, closed=closed and len(pts) > 2)
    out = rasterize(g, (h, w), radius)
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out, rasterize_reference(g, (h, w), radius))


far_points_st = st.tuples(st.floats(-1e6, 1e6, width=32), st.floats(-1e6, 1e6, width=32))
near_points_st = st.tuples(st.floats(-8, 56, width=32), st.floats(-8, 56, width=32))


@given(
    st.lists(far_points_st, min_size=2, max_size=5),
    st.lists(near_points_st, min_size=1, max_size=3),
    st.booleans(),
)
def test_strokes_from_far_away_equal_the_reference_bytes(far, near, closed):
    """Segments crossing the image from up to 1e6 px away: the compiled kernel clips them in
    float64 exactly as the reference does (clipping in float32 moved the ends by ~0.01 px)."""
    pts = np.asarray(far + near, np.float32)
    g = Gesture(GestureKind.SCRIBBLE, pts, closed=closed)
    np.testing.assert_array_equal(rasterize(g, SHAPE), rasterize_reference(g, SHAPE))


@given(
    st.lists(
        st.tuples(points_st, st.booleans(), st.sampled_from(["float", "integral", "half"])),
        min_size=1,
        max_size=6,
    ),
    st.sampled_from([0.0, 1.0, 2.5, 5.0]),
)
def test_rasterize_many_is_rasterize_of_each_gesture(items, radius):
    """Clicks on and off pixel centres, strokes, outlines, points off the image, zero radius
    (the reference path): one batch gives each gesture's own bytes."""
    gestures = []
    for points, closed, grid in items:
        pts = np.asarray(points, np.float32)
        pts = {"float": pts, "integral": np.round(pts), "half": np.round(pts * 2) / 2}[grid]
        gestures.append(_gesture(pts, closed, integral=False))
    out = rasterize_many(gestures, SHAPE, radius)
    assert out.shape == (len(gestures), *SHAPE) and out.dtype == np.uint8
    for image, gesture in zip(out, gestures, strict=True):
        np.testing.assert_array_equal(image, rasterize(gesture, SHAPE, radius))


def test_rasterize_many_edge_cases():
    assert rasterize_many([], SHAPE).shape == (0, *SHAPE)
    off = Gesture(GestureKind.SCRIBBLE, np.array([[-90.0, 3.0], [-20.0, 60.0]], np.float32), False)
    far = Gesture(GestureKind.CLICK, np.array([[-500.0, 20.0]], np.float32), False)
    click = Gesture(GestureKind.CLICK, np.array([[20.0, 20.0]], np.float32), False)
    out = rasterize_many([off, far, click], SHAPE)
    assert out[0].sum() == 0 and out[1].sum() == 0  # nothing drawn, nothing leaked
    np.testing.assert_array_equal(out[2], rasterize(click, SHAPE))
    with pytest.raises(ValueError, match="shape"):
        rasterize_many([click], (0, 5))


def test_click_disc_clipped_at_every_border():
    for x, y in [(0, 0), (47, 47), (-3, 20), (20, 50), (-5, -5), (-6, 10), (53, 2)]:
        g = Gesture(GestureKind.CLICK, np.array([[x, y]], np.float32), closed=False)
        np.testing.assert_array_equal(rasterize(g, SHAPE), rasterize_reference(g, SHAPE))


@given(points_st, st.booleans(), st.booleans())
def test_reference_and_batch_agree(points, closed, integral):
    g = _gesture(points, closed, integral)
    ref = rasterize(g, SHAPE)
    out = _batch([g])[0]
    differ = ref != out
    assert not np.any(differ & ~_edge_pixels(g, SHAPE))


@given(st.lists(st.tuples(points_st, st.booleans()), min_size=2, max_size=4))
def test_batch_matches_each_gesture(items):
    gestures = [_gesture(p, c, False) for p, c in items]
    out = _batch(gestures + [gestures[0]] * (4 - len(gestures)))  # fixed batch of 4
    for g, m in zip(gestures, out, strict=False):
        assert not np.any((m != rasterize(g, SHAPE)) & ~_edge_pixels(g, SHAPE))


def test_rasterize_batch_under_user_jit_and_radius():
    g = Gesture(GestureKind.SCRIBBLE, [[10, 10], [30, 20]], closed=False)
    args = pad_gestures([g], N_MAX)
    fn = jax.jit(functools.partial(rasterize_batch, shape=SHAPE, radius=3))
    np.testing.assert_array_equal(np.asarray(fn(*args))[0], rasterize(g, SHAPE, radius=3))


def test_bad_shape_and_radius():
    g = Gesture(GestureKind.CLICK, [[1, 1]], closed=False)
    with pytest.raises(ValueError, match="shape"):
        rasterize(g, (0, 5))
    with pytest.raises(ValueError, match="radius"):
        rasterize(g, SHAPE, radius=-1)
    with pytest.raises(ValueError, match="NaN"):
        Gesture(GestureKind.SCRIBBLE, [[1, np.nan], [2, 2]], closed=False)


def test_points_outside_image_are_clipped_not_wrapped():
    g = Gesture(GestureKind.CLICK, [[-3, 24]], closed=False)
    out = rasterize(g, SHAPE)
    assert out[:, -5:].sum() == 0 and out[24, :3].all()
    np.testing.assert_array_equal(_batch([g])[0], out)


def test_distance_map_known_answers():
    m = np.zeros((5, 7), np.uint8)
    m[2, 3] = 1
    d = distance_map(m) * 255
    assert d.dtype == np.float32 and d[2, 3] == 0
    np.testing.assert_allclose(d[0, 0], np.hypot(2, 3), rtol=1e-6)
    np.testing.assert_allclose(d[2, 6], 3.0, rtol=1e-6)
    far = np.zeros((1, 300), np.uint8)
    far[0, 0] = 1
    df = distance_map(far)
    assert df[0, 200] == pytest.approx(200 / 255) and df[0, 299] == 1.0  # truncated at 255
    np.testing.assert_array_equal(distance_map(np.zeros((4, 4), np.uint8)), np.ones((4, 4)))
    with pytest.raises(ValueError, match="gesture_map"):
        distance_map(np.zeros(4))


def test_non_finite_points_in_a_batch_are_refused_or_not_drawn():
    """A NaN point within a gesture's length is refused (issue 43: it drew an empty map);
    inside the device code (the host clipping's separators) it breaks the polyline."""
    points = np.array([[[10, 10], [np.nan, 5], [30, 30], [30, 40]]], np.float32)
    args = (np.array([4]), np.array([1]), np.array([False]))
    with pytest.raises(ValueError, match=r"points\[0, 1\] is NaN or inf"):
        rasterize_batch(points, *args, SHAPE)
    out = _rasterize_batch(points, *args, SHAPE, 5.0)
    # Both segments touching the NaN point are dropped (so (10, 10) is not drawn either).
    expected = rasterize(Gesture(GestureKind.SCRIBBLE, [[30, 30], [30, 40]], False), SHAPE)
    np.testing.assert_array_equal(np.asarray(out)[0], expected)
    ok = rasterize_batch(points, np.array([1]), *args[1:], SHAPE)  # NaN beyond the length
    assert np.asarray(ok).sum() == 81


def test_length_zero_rows_draw_nothing():
    points = np.full((2, N_MAX, 2), 20.0, np.float32)
    lengths, kinds, closed = np.array([0, 0]), np.array([0, 1]), np.array([False, True])
    out = np.asarray(rasterize_batch(points, lengths, kinds, closed, SHAPE))
    assert out.shape == (2, *SHAPE) and out.sum() == 0
    lengths[1] = 1  # the same row with one point is a disc of 81 px
    assert np.asarray(rasterize_batch(points, lengths, kinds, closed, SHAPE))[1].sum() == 81


def test_rasterize_batch_validates_shapes():
    points, lengths, kinds, closed = pad_gestures(
        [Gesture(GestureKind.CLICK, [[1, 2]], closed=False)] * 2, N_MAX
    )
    with pytest.raises(ValueError, match=r"points must have shape \[B, N>=1, 2\]"):
        rasterize_batch(points[0], lengths, kinds, closed, SHAPE)
    with pytest.raises(ValueError, match="points must have shape"):
        rasterize_batch(points[..., :1], lengths, kinds, closed, SHAPE)
    with pytest.raises(ValueError, match=r"lengths must have shape \(2,\)"):
        rasterize_batch(points, lengths[:1], kinds, closed, SHAPE)
    with pytest.raises(ValueError, match="kinds must have shape"):
        rasterize_batch(points, lengths, kinds[:, None], closed, SHAPE)
    with pytest.raises(ValueError, match="closed must have shape"):
        rasterize_batch(points, lengths, kinds, np.array(True), SHAPE)


def test_clip_segments_known_answer():
    a = np.array([[-10.0, 5.0], [2.0, 2.0], [20.0, 20.0], [3.0, 3.0], [3.0, 50.0]])
    b = np.array([[10.0, 5.0], [4.0, 6.0], [30.0, 20.0], [3.0, 3.0], [3.0, -50.0]])
    start, stop = clip_segments(a, b, (0.0, 0.0, 8.0, 8.0))
    # Row 2 (fully outside) is dropped; the inside segment and the click stay bit for bit.
    np.testing.assert_array_equal(start, [[0, 5], [2, 2], [3, 3], [3, 8]])
    np.testing.assert_array_equal(stop, [[8, 5], [4, 6], [3, 3], [3, 0]])


def test_far_away_points_are_clipped_before_splitting():
    # A 2e9 px long stroke along row 10: rows 5..15 fully marked, nothing else (known answer).
    far = Gesture(GestureKind.SCRIBBLE, [[-1e9, 10], [1e9, 10]], closed=False)
    out = rasterize(far, SHAPE)
    assert out[5:16].all() and out.sum() == 11 * SHAPE[1]
    # Moderately far points (float32-exact in the jnp rasteriser): both rasterisers agree.
    diagonal = Gesture(GestureKind.TIGHT_LASSO, [[-3000, -2990], [3000, 3010], [20, 5000]], True)
    ref = rasterize(diagonal, SHAPE)
    assert ref.any() and not np.any((ref != _batch([diagonal])[0]) & ~_edge_pixels(diagonal, SHAPE))


def _sparse_map(seed: int, h: int, w: int, count: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    marked = np.zeros((h, w), np.uint8)
    marked[rng.integers(0, h, count), rng.integers(0, w, count)] = 1
    return marked


@given(st.integers(0, 2**31 - 1), st.integers(1, 90), st.integers(1, 90), st.integers(1, 6))
def test_distance_maps_equal_scipy_edt_exactly(seed, h, w, count):
    """OpenCV computes the transform (speed); the values are scipy's, bit for bit."""
    from scipy import ndimage

    from dig_jax.gestures import distance_uint8

    marked = _sparse_map(seed, h, w, count)
    edt = np.minimum(ndimage.distance_transform_edt(marked == 0), 255.0)
    expected = (edt / 255.0).astype(np.float32)
    np.testing.assert_array_equal(distance_map(marked), expected)
    np.testing.assert_array_equal(
        distance_uint8(marked), np.rint(expected * 255.0).astype(np.uint8)
    )


def test_distance_maps_equal_scipy_edt_beyond_the_truncation():
    """Large photos: distances up to ~700 px, truncated at 255 exactly as scipy's."""
    from scipy import ndimage

    from dig_jax.gestures import distance_uint8

    for seed, (h, w) in enumerate([(600, 500), (317, 733)]):
        marked = _sparse_map(seed, h, w, 3)
        edt = np.minimum(ndimage.distance_transform_edt(marked == 0), 255.0)
        expected = (edt / 255.0).astype(np.float32)
        np.testing.assert_array_equal(distance_map(marked), expected)
        np.testing.assert_array_equal(
            distance_uint8(marked), np.rint(expected * 255.0).astype(np.uint8)
        )
    assert (distance_uint8(np.zeros((4, 5), np.uint8)) == 255).all()


def test_stroke_map_needs_no_kind():
    """A person's points -> gesture map: a dot, an open stroke, a closed lasso (drawn, not
    filled), each equal to rasterising the matching gesture; bad strokes are named errors."""
    from dig_jax.gestures import Gesture, GestureKind, rasterize, stroke_map

    shape = (40, 50)
    dot = stroke_map([[20, 10]], shape)
    np.testing.assert_array_equal(
        dot, rasterize(Gesture(GestureKind.CLICK, [[20, 10]], False), shape)
    )
    line = [[5, 5], [40, 30]]
    np.testing.assert_array_equal(
        stroke_map(line, shape), rasterize(Gesture(GestureKind.SCRIBBLE, line, False), shape)
    )
    ring = stroke_map([[5, 5], [40, 5], [40, 30], [5, 30]], shape, closed=True)
    assert ring[5, 20] == 1 and ring[17, 22] == 0
    for bad, message in (
        ([], "empty"), ([[1, 2, 3]], "pairs"), ([[np.nan, 1]], "finite"),
        ([[1, 1], [2, 2]], "at least 3 points"), ([[-90, -90]], "does not touch"),
    ):  # fmt: skip
        with pytest.raises(ValueError, match=message):
            stroke_map(bad, shape, closed=message == "at least 3 points")
