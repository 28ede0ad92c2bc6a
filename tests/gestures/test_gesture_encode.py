"""Encodings: box outlines, bounding boxes, clicks from gesture maps; the gallery figure."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dig_jax.gestures import (
    Gesture,
    GestureKind,
    box_outline_points,
    rasterize,
    simulate_creation,
    to_box,
    to_clicks,
)


def test_box_outline_points_known_answer():
    pts = box_outline_points(np.array([2.0, 3.0, 10.0, 8.0]))
    expected = [[1.5, 2.5], [9.5, 2.5], [9.5, 7.5], [1.5, 7.5]]
    assert pts.dtype == np.float32 and pts.shape == (4, 2)
    np.testing.assert_array_equal(pts, expected)
    jpts = jax.jit(box_outline_points)(jnp.array([2.0, 3.0, 10.0, 8.0]))
    assert isinstance(jpts, jax.Array)
    np.testing.assert_array_equal(np.asarray(jpts), expected)
    batched = box_outline_points(np.zeros((3, 2, 4)))
    assert batched.shape == (3, 2, 4, 2)
    with pytest.raises(ValueError, match="box"):
        box_outline_points(np.zeros(3))


def test_box_outline_gradient_flows():
    grad = jax.grad(lambda b: box_outline_points(b).sum())(jnp.array([1.0, 2.0, 5.0, 6.0]))
    np.testing.assert_array_equal(np.asarray(grad), [2.0, 2.0, 2.0, 2.0])


@given(
    st.floats(-50, 400, width=32),
    st.floats(-50, 400, width=32),
    st.floats(1, 300, width=32),
    st.floats(1, 300, width=32),
)
def test_to_box_inverts_box_outline_points(x1, y1, w, h):
    box = np.array([x1, y1, x1 + w, y1 + h], np.float32)
    g = Gesture(GestureKind.RECTANGLE, box_outline_points(box), closed=True)
    np.testing.assert_allclose(to_box(g), box, atol=1e-4)


def test_to_box_of_click_and_stroke_is_non_degenerate():
    np.testing.assert_array_equal(
        to_box(Gesture(GestureKind.CLICK, [[4, 7]], closed=False)), [4, 7, 5, 8]
    )
    line = Gesture(GestureKind.SCRIBBLE, [[2, 5], [12, 5]], closed=False)
    np.testing.assert_array_equal(to_box(line), [2.5, 5, 12.5, 6])


def test_to_clicks_of_a_click_is_its_centre():
    g = Gesture(GestureKind.CLICK, [[20, 14]], closed=False)
    np.testing.assert_array_equal(to_clicks(rasterize(g, (40, 40))), [[20, 14]])


def test_to_clicks_spreads_evenly_along_a_stroke():
    g = Gesture(GestureKind.SCRIBBLE, [[5, 20], [60, 20]], closed=False)
    marks = rasterize(g, (40, 70))
    clicks = to_clicks(marks, max_points=6)
    assert clicks.shape == (6, 2) and clicks.dtype == np.float32
    assert np.all(marks[clicks[:, 1].astype(int), clicks[:, 0].astype(int)] == 1)
    xs = np.sort(clicks[:, 0])
    gaps = np.diff(xs)
    assert gaps.min() > 0.6 * gaps.max() and xs[-1] - xs[0] > 40
    np.testing.assert_array_equal(to_clicks(marks, max_points=6), clicks)  # deterministic


def test_to_clicks_on_simulated_lasso_and_edge_cases():
    mask = np.zeros((64, 64), np.uint8)
    mask[16:48, 20:44] = 1
    g = simulate_creation(GestureKind.TIGHT_LASSO, mask, np.random.default_rng(0))
    marks = rasterize(g, mask.shape)
    clicks = to_clicks(marks)
    assert 1 <= len(clicks) <= 24
    assert np.all(marks[clicks[:, 1].astype(int), clicks[:, 0].astype(int)] == 1)
    assert to_clicks(np.zeros((8, 8), np.uint8)).shape == (0, 2)
    with pytest.raises(ValueError, match="max_points"):
        to_clicks(marks, max_points=0)
    with pytest.raises(ValueError, match="gesture_map"):
        to_clicks(np.zeros(8))


def test_save_gallery_writes_a_png(shared_data: Path, tmp_path: Path):
    from dig_jax.gestures.gallery import save_gallery

    out = save_gallery(tmp_path / "gallery.png", shared_data, np.random.default_rng(0))
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 50_000
