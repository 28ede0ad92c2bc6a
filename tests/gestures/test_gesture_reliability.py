"""Gesture inputs as users write them (tests/reliability_cases.md, section "gestures")."""

from __future__ import annotations

import numpy as np
import pytest

from dig_jax.gestures import (
    pad_gestures,
    rasterize,
    rasterize_batch,
    simulate_creation,
    simulate_refinement,
)
from dig_jax.gestures.raster import MAX_COORD, gesture_segments, segment_distance_np
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
