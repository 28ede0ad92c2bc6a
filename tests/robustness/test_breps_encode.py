"""Differentiable box encoders agree with the hard rasterisation and have finite gradients."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dig_jax.gestures import Gesture, GestureKind, box_outline_points, distance_map, rasterize
from dig_jax.robustness.breps import (
    box_encoder,
    encode_box_context,
    encode_box_context_add,
    encode_box_gesture,
    soft_box_fill,
)

IMAGE = jnp.full((40, 48, 3), 100.0)
BOX = jnp.array([5.0, 7.0, 30.0, 25.0])


def test_gesture_encoding_matches_rectangle_gesture():
    x = np.asarray(encode_box_gesture(BOX, IMAGE))
    assert x.shape == (40, 48, 6)
    np.testing.assert_array_equal(x[..., :3], 100.0)
    ref = rasterize(
        Gesture(GestureKind.RECTANGLE, box_outline_points(np.asarray(BOX)), True), (40, 48)
    )
    np.testing.assert_array_equal(x[..., 3] >= 0.5, ref == 1)
    assert np.abs(x[..., 4] - distance_map(ref)).max() <= 1.0 / 255 + 1e-6
    np.testing.assert_array_equal(x[..., 5], 0.0)


def test_context_encoding_puts_outline_in_box_channel():
    x = np.asarray(encode_box_context(BOX, IMAGE))
    assert x.shape == (40, 48, 7)
    np.testing.assert_array_equal(x[..., 3:5], 0.0)
    np.testing.assert_allclose(x[..., 5], np.asarray(encode_box_gesture(BOX, IMAGE))[..., 3])
    np.testing.assert_array_equal(x[..., 6], 0.0)


@pytest.mark.parametrize("encode", [encode_box_gesture, encode_box_context])
def test_gradients_are_finite_and_nonzero(encode):
    g = np.asarray(jax.grad(lambda b: encode(b, IMAGE)[..., 3:].sum())(BOX))
    assert np.isfinite(g).all() and (np.abs(g) > 0).all()


def test_soft_box_fill_hard_limit_is_the_box():
    fill = np.asarray(soft_box_fill(BOX, (40, 48), temperature=1e-3))
    ref = np.zeros((40, 48), bool)
    ref[7:25, 5:30] = True
    np.testing.assert_array_equal(fill > 0.5, ref)


def test_box_encoder_lookup():
    assert box_encoder("gesture") is encode_box_gesture
    assert box_encoder("context") is encode_box_context
    assert box_encoder("context", "gesture") is encode_box_context_add
    with pytest.raises(ValueError, match="input_kind"):
        box_encoder("clicks")
    with pytest.raises(ValueError, match="context_encoding"):
        box_encoder("context", "boxes")


def test_context_add_encoding_uses_positive_channel():
    x = np.asarray(encode_box_context_add(BOX, IMAGE))
    np.testing.assert_allclose(x[..., 3], np.asarray(encode_box_context(BOX, IMAGE))[..., 5])
    np.testing.assert_array_equal(x[..., 4:], 0.0)
