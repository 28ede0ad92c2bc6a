"""Gesture inputs as users write them (tests/reliability_cases.md, section "gestures")."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dig_jax.gestures import (
    distance_map,
    pad_gestures,
    rasterize,
    rasterize_batch,
    simulate_creation,
    simulate_refinement,
    soft_rasterize,
)
from dig_jax.gestures.raster import (
    MAX_COORD,
    distance_uint8,
    gesture_segments,
    segment_distance_np,
)
from dig_jax.gestures.types import Context, Gesture, GestureKind

SHAPE = (48, 64)


def edge_pixels(gesture: Gesture, radius: float = 5.0, tol: float = 1e-3) -> np.ndarray:
    """Pixel centres within `tol` px of the brush edge (float64): the documented ties."""
    a, b = gesture_segments(gesture)
    yy, xx = np.mgrid[: SHAPE[0], : SHAPE[1]]
    d = segment_distance_np(xx[..., None], yy[..., None], a, b).min(axis=-1)
    return np.abs(d - radius) <= tol


@pytest.mark.parametrize("reach", [1e4, 1e6, 1e8])
def test_far_away_points_rasterize_alike_in_numpy_and_jnp(reach):
    """Case G1: strokes through the image from points far outside it."""
    rng = np.random.default_rng(int(np.log10(reach)))
    gestures = []
    for kind in (GestureKind.SCRIBBLE, GestureKind.TIGHT_LASSO, GestureKind.CLICK):
        for _ in range(6):
            centre = rng.uniform([0, 0], [SHAPE[1], SHAPE[0]])
            angle = rng.uniform(0, np.pi)
            step = np.array([np.cos(angle), np.sin(angle)]) * reach
            points = [centre + step, centre - step, centre + np.array([3.0, -reach])]
            gestures.append(Gesture(kind, np.asarray(points, np.float32), kind != 1))
    batch = np.asarray(rasterize_batch(*pad_gestures(gestures), SHAPE))
    for gesture, got in zip(gestures, batch, strict=True):
        ref = rasterize(gesture, SHAPE)
        assert not np.any((ref != got) & ~edge_pixels(gesture))
    assert batch[:6].any()  # the strokes do cross the image


def test_coordinates_beyond_the_limit_are_refused_by_both():
    far = Gesture(GestureKind.SCRIBBLE, [[-1e30, 10], [1e30, 10]], closed=False)
    with pytest.raises(ValueError, match="points: coordinates must lie within"):
        rasterize(far, SHAPE)
    with pytest.raises(ValueError, match="points: coordinates must lie within"):
        rasterize_batch(*pad_gestures([far]), SHAPE)
    assert MAX_COORD >= 1e9


def test_simulators_need_an_explicit_generator():
    """Case G2: simulate_*(rng=None) raised AttributeError."""
    region = np.zeros((40, 40), np.uint8)
    region[10:30, 10:30] = 1
    with pytest.raises(ValueError, match=r"rng must be a numpy\.random\.Generator"):
        simulate_creation(GestureKind.CLICK, region, None)
    with pytest.raises(ValueError, match=r"rng must be a numpy\.random\.Generator"):
        simulate_refinement(GestureKind.SCRIBBLE, region, Context.ADD, 0)
    assert simulate_creation(GestureKind.CLICK, region, np.random.default_rng(0)).points.shape


def test_float_gesture_kinds_are_refused():
    """Case G3: simulate_creation(2.7, ...) drew a loose lasso."""
    target = np.zeros((40, 40), np.uint8)
    target[10:30, 10:30] = 1
    for kind in (2.7, 2.0, True, "2", None):
        with pytest.raises(ValueError, match="kind must be a GestureKind code 0-4"):
            simulate_creation(kind, target, np.random.default_rng(0))
    assert simulate_creation(np.int64(2), target, np.random.default_rng(0)).kind == 2


@pytest.mark.parametrize(
    ("points", "lengths", "kinds", "message"),
    [
        ([[[10.0, 10.0], [np.nan, 5.0]]], [2], [1], r"points\[0, 1\] is NaN or inf"),
        ([[[np.nan, 10.0], [5.0, 5.0]]], [2], [0], r"points\[0, 0\] is NaN or inf"),
        ([[[10.0, 10.0], [5.0, 5.0]]], [-3], [1], r"lengths must be in 0\.\.2"),
        ([[[10.0, 10.0], [5.0, 5.0]]], [3], [1], r"lengths must be in 0\.\.2"),
        ([[[10.0, 10.0], [5.0, 5.0]]], [2], [9], r"kinds must be GestureKind codes 0\.\.4"),
    ],
)
def test_rasterize_batch_refuses_what_it_would_draw_wrongly(points, lengths, kinds, message):
    """Case G4: a NaN point or length -3 drew an empty map; kind 9 drew a polyline."""
    args = (np.array(points, np.float32), np.array(lengths), np.array(kinds), np.array([False]))
    with pytest.raises(ValueError, match=message):
        rasterize_batch(*args, (32, 32))
    jitted = jax.jit(lambda p: rasterize_batch(p, *args[1:], (32, 32)))  # tracers: unchecked
    if "NaN" in message:
        jitted(args[0])


def test_soft_rasterize_and_distance_map_refuse_nan():
    """Cases G5, G6: soft_rasterize with a NaN point returned zeros; distance_map of an
    all-NaN map returned zeros."""
    points = jnp.array([[10.0, 10.0], [jnp.nan, 3.0]])
    with pytest.raises(ValueError, match=r"points\[0, 1\] is NaN or inf"):
        soft_rasterize(points, 2, False, (16, 16))
    assert float(soft_rasterize(points, 1, False, (16, 16)).max()) > 0.9  # NaN past the length
    grad = jax.grad(lambda p: soft_rasterize(p, 1, False, (16, 16)).sum())(points.at[1].set(0))
    assert np.isfinite(np.asarray(grad)).all()
    with pytest.raises(ValueError, match="gesture_map holds NaN or Inf"):
        distance_map(np.full((8, 8), np.nan, np.float32))
    with pytest.raises(ValueError, match="gesture_map holds NaN or Inf"):
        distance_uint8(np.full((8, 8), np.inf))


@pytest.mark.parametrize("kind", [2.7, 9, -1, True, "1"])
def test_gesture_kind_must_be_an_integer_code(kind):
    """Case G3 for `Gesture` itself: 2.7 read as 2, 9 gave a bare enum error."""
    with pytest.raises(ValueError, match=r"Gesture\.kind must be a GestureKind code 0-4"):
        Gesture(kind, [[1.0, 2.0]], False)


@pytest.mark.parametrize("closed", ["no", 2, None, 0.5])
def test_gesture_closed_must_be_a_bool(closed):
    with pytest.raises(ValueError, match=r"Gesture\.closed must be a bool"):
        Gesture(GestureKind.SCRIBBLE, [[1.0, 2.0], [3.0, 4.0]], closed)
