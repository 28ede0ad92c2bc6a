"""Soft rasteriser and analytic distance map: hard limit, gradients, agreement with the EDT."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dig_jax.gestures import (
    Gesture,
    GestureKind,
    distance_map,
    distance_map_jnp,
    polyline_distance,
    rasterize,
    soft_rasterize,
)
from dig_jax.gestures.raster import gesture_segments, segment_distance_np

SHAPE = (40, 40)
N_MAX = 8


@functools.partial(jax.jit, static_argnames=("temperature",))
def _soft(points, length, closed, temperature):
    return soft_rasterize(points, length, closed, SHAPE, 5.0, temperature)


_dist = jax.jit(lambda p, n, c: distance_map_jnp(p, n, c, SHAPE))
_polyline = jax.jit(lambda p, n, c: polyline_distance(p, n, c, SHAPE))

points_st = st.lists(
    st.tuples(st.floats(-5, 45, width=32), st.floats(-5, 45, width=32)), min_size=1, max_size=N_MAX
)


def _pad(points):
    pts = np.asarray(points, np.float32)
    padded = np.full((N_MAX, 2), 1e3, np.float32)  # far-away garbage: must be ignored
    padded[: len(pts)] = pts
    return pts, padded


def _gesture(pts, closed):
    kind = GestureKind.CLICK if len(pts) == 1 else GestureKind.SCRIBBLE
    return Gesture(kind, pts, closed=closed and len(pts) > 1)


@given(points_st, st.booleans())
def test_hard_limit_equals_reference(points, closed):
    pts, padded = _pad(points)
    g = _gesture(pts, closed)
    soft = np.asarray(_soft(padded, len(pts), g.closed, 1e-4))
    a, b = gesture_segments(g)
    yy, xx = np.mgrid[: SHAPE[0], : SHAPE[1]]
    d = segment_distance_np(xx[..., None], yy[..., None], a, b).min(axis=-1)
    edge = np.abs(d - 5.0) <= 1e-3
    differ = (soft >= 0.5) != rasterize(g, SHAPE).astype(bool)
    assert not np.any(differ & ~edge)
    np.testing.assert_allclose(np.asarray(_polyline(padded, len(pts), g.closed)), d, atol=2e-3)


inside_st = st.lists(  # the simulators keep points in the image extent [-0.5, size - 0.5]
    st.tuples(st.floats(-0.5, 39.5, width=32), st.floats(-0.5, 39.5, width=32)),
    min_size=1,
    max_size=N_MAX,
)


@settings(max_examples=25)
@given(inside_st, st.booleans())
def test_distance_map_jnp_within_one_pixel_of_edt(points, closed):
    pts, padded = _pad(points)
    g = _gesture(pts, closed)
    edt = distance_map(rasterize(g, SHAPE)) * 255
    analytic = np.asarray(_dist(padded, len(pts), g.closed)) * 255
    assert np.abs(edt - analytic).max() <= 1.0 + 1e-3
    assert analytic.min() >= 0 and analytic.max() <= 255


def test_soft_values_and_gradients():
    pts = jnp.array([[10.0, 10.0], [30.0, 25.0], [0.0, 0.0], [0.0, 0.0]])
    soft = _soft(pts, 2, False, 0.5)
    assert soft.shape == SHAPE and float(soft.min()) >= 0 and float(soft.max()) <= 1
    weights = jnp.asarray(np.random.default_rng(0).random(SHAPE), jnp.float32)
    grad = jax.grad(lambda p: jnp.sum(_soft(p, 2, False, 0.5) * weights))(pts)
    assert np.all(np.isfinite(grad)) and np.abs(grad[:2]).sum() > 0
    np.testing.assert_array_equal(np.asarray(grad[2:]), 0.0)  # padding gets no gradient
    grad_d = jax.grad(lambda p: jnp.sum(_dist(p, 2, False)))(pts)
    assert np.all(np.isfinite(grad_d)) and np.abs(grad_d[:2]).sum() > 0


def test_gradient_at_a_pixel_centre_is_finite():
    pts = jnp.array([[10.0, 10.0]] + [[0.0, 0.0]] * (N_MAX - 1))  # distance exactly 0 there
    grad = jax.grad(lambda p: jnp.sum(_soft(p, 1, False, 0.5)))(pts)
    assert np.all(np.isfinite(grad))


def test_soft_rasterize_vmaps_over_a_batch():
    pts = jnp.array([[[5.0, 5.0], [20.0, 5.0]], [[30.0, 30.0], [0.0, 0.0]]])
    out = jax.vmap(lambda p, n, c: soft_rasterize(p, n, c, SHAPE))(
        pts, jnp.array([2, 1]), jnp.array([False, False])
    )
    assert out.shape == (2, *SHAPE)
    assert float(out[1, 30, 30]) > 0.99 and float(out[1, 5, 5]) < 1e-3


def test_bad_temperature():
    with pytest.raises(ValueError, match="temperature"):
        soft_rasterize(jnp.zeros((1, 2)), 1, False, SHAPE, temperature=0.0)


_soft_kind = jax.jit(lambda p, n, c, k: soft_rasterize(p, n, c, SHAPE, 5.0, 1e-4, kind=k))
_dist_kind = jax.jit(lambda p, n, c, k: distance_map_jnp(p, n, c, SHAPE, kind=k))


def test_length_zero_draws_nothing():
    pts = jnp.full((N_MAX, 2), 20.0)
    for kind in (-1, 0, 1):
        assert float(_soft_kind(pts, 0, False, kind).max()) < 1e-6
        np.testing.assert_array_equal(np.asarray(_dist_kind(pts, 0, True, kind)), 1.0)
    empty = np.zeros(SHAPE, np.uint8)
    np.testing.assert_array_equal(np.asarray(_dist_kind(pts, 0, False, -1)), distance_map(empty))


def test_click_kind_keeps_the_first_point_only():
    pts = jnp.array([[10.0, 10.0], [30.0, 30.0], [5.0, 35.0]] + [[0.0, 0.0]] * (N_MAX - 3))
    click = Gesture(GestureKind.CLICK, np.asarray(pts[:1]), closed=False)
    expected = rasterize(click, SHAPE)
    hard = np.asarray(_soft_kind(pts, 3, True, int(GestureKind.CLICK))) >= 0.5
    np.testing.assert_array_equal(hard, expected.astype(bool))
    assert hard.sum() == 81  # the radius-5 disc around (10, 10)
    edt = distance_map(expected) * 255
    analytic = np.asarray(_dist_kind(pts, 3, True, int(GestureKind.CLICK))) * 255
    assert np.abs(edt - analytic).max() <= 1.0 + 1e-3
    # The default (-1) and non-click kinds keep using the whole closed polyline.
    lasso = Gesture(GestureKind.TIGHT_LASSO, np.asarray(pts[:3]), closed=True)
    for kind in (-1, int(GestureKind.TIGHT_LASSO)):
        hard = np.asarray(_soft_kind(pts, 3, True, kind)) >= 0.5
        assert hard.sum() > 81 and hard[30, 30] and hard[35, 5]
        assert not np.any((hard != rasterize(lasso, SHAPE).astype(bool)) & ~_edge(lasso))
    default = np.asarray(soft_rasterize(pts, 3, True, SHAPE, 5.0, 1e-4))
    np.testing.assert_array_equal(default, np.asarray(_soft_kind(pts, 3, True, -1)))


def _edge(gesture):
    a, b = gesture_segments(gesture)
    yy, xx = np.mgrid[: SHAPE[0], : SHAPE[1]]
    d = segment_distance_np(xx[..., None], yy[..., None], a, b).min(axis=-1)
    return np.abs(d - 5.0) <= 1e-3
