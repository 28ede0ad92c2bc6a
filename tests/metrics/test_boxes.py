"""Tight box, box IoU and CIoU loss: known answers, degenerate boxes, gradients, bad input."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dig_jax.metrics import box_iou, ciou_loss, tight_box


def test_tight_box_edges():
    mask = np.zeros((10, 12), np.uint8)
    mask[2:5, 3:9] = 1
    mask[0, 0] = 255  # void is not object
    np.testing.assert_array_equal(tight_box(mask), [3, 2, 9, 5])
    np.testing.assert_array_equal(np.asarray(tight_box(jnp.asarray(mask))), [3, 2, 9, 5])


def test_tight_box_single_pixel_and_batch():
    masks = np.zeros((2, 5, 5), np.uint8)
    masks[0, 4, 4] = 1
    masks[1, 0, 1:3] = 1
    np.testing.assert_array_equal(tight_box(masks), [[4, 4, 5, 5], [1, 0, 3, 1]])


def test_tight_box_empty():
    with pytest.raises(ValueError, match="mask is empty"):
        tight_box(np.zeros((4, 4), np.uint8))
    np.testing.assert_array_equal(np.asarray(tight_box(jnp.zeros((4, 4), jnp.uint8))), [0] * 4)


def test_box_iou_known():
    assert box_iou(np.array([0, 0, 2, 2.0]), np.array([1, 1, 3, 3.0])) == pytest.approx(1 / 7)
    assert box_iou(np.array([0, 0, 2, 2.0]), np.array([2, 0, 4, 2.0])) == 0.0  # touching
    assert box_iou(np.array([0, 0, 4, 4.0]), np.array([1, 1, 2, 2.0])) == pytest.approx(1 / 16)
    assert box_iou(np.array([1, 1, 1, 1.0]), np.array([1, 1, 1, 1.0])) == 1.0  # same point
    assert box_iou(np.array([1, 1, 1, 3.0]), np.array([2, 2, 2, 2.0])) == 0.0


def test_ciou_known_values():
    a = np.array([0, 0, 2, 2.0])
    assert ciou_loss(a, a) == 0.0
    # Same shape shifted right by 1 px: IoU 2/6, rho^2 = 1, c^2 = 3^2 + 2^2 = 13, v = 0.
    b = np.array([1, 0, 3, 2.0])
    assert ciou_loss(b, a) == pytest.approx(1 - 1 / 3 + 1 / 13)
    # Concentric, different aspect: rho = 0, IoU = 2/4, v = 4/pi^2 (atan 1 - atan 0.5)^2.
    c = np.array([0, 0.5, 2, 1.5])
    v = 4 / math.pi**2 * (math.atan(1.0) - math.atan(2.0)) ** 2
    iou = 2 / 4
    assert ciou_loss(c, a) == pytest.approx(1 - iou + v * v / ((1 - iou) + v))


# Quarter-pixel grid: exact in float32 too, so the numpy and jnp paths see the same boxes.
coord = st.integers(0, 200).map(lambda i: i / 4)
extent = st.integers(0, 120).map(lambda i: i / 4)
boxes = st.tuples(coord, coord, extent, extent).map(
    lambda t: np.array([t[0], t[1], t[0] + t[2], t[1] + t[3]])
)


@given(boxes, boxes)
def test_box_iou_symmetric_and_bounded(a, b):
    assert box_iou(a, b) == pytest.approx(box_iou(b, a))
    assert 0.0 <= box_iou(a, b) <= 1.0
    assert 0.0 <= ciou_loss(a, b) <= 3.0


_ciou_grad = jax.jit(jax.grad(ciou_loss))


@given(boxes, boxes)
def test_ciou_grad_finite_and_jnp_agrees(a, b):
    g = _ciou_grad(jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32))
    assert np.isfinite(np.asarray(g)).all()
    ref = ciou_loss(a, b)
    out = float(ciou_loss(jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32)))
    assert out == pytest.approx(ref, abs=1e-4)


def test_degenerate_boxes_nan_free_with_gradients():
    cases = [
        ([1, 1, 1, 1], [1, 1, 1, 1]),
        ([0, 0, 0, 4], [0, 0, 4, 4]),
        ([0, 0, 2, 2], [2, 2, 2, 2]),
    ]
    for box, target in cases:
        box_j, target_j = jnp.asarray(box, jnp.float32), jnp.asarray(target, jnp.float32)
        assert np.isfinite(float(ciou_loss(box_j, target_j)))
        assert np.isfinite(np.asarray(_ciou_grad(box_j, target_j))).all()


def test_ciou_gradient_moves_towards_target():
    target = jnp.array([10.0, 10.0, 20.0, 20.0])
    box = jnp.array([14.0, 10.0, 24.0, 20.0])
    g = jax.grad(ciou_loss)(box, target)
    assert g[0] > 0 and g[2] > 0  # descending moves x left, towards the target


def test_bad_boxes():
    good = np.array([0, 0, 1, 1.0])
    with pytest.raises(ValueError, match="a contains NaN"):
        box_iou(np.array([0, np.nan, 1, 1]), good)
    with pytest.raises(ValueError, match="target_box is inverted"):
        ciou_loss(good, np.array([2, 0, 1, 1.0]))
    with pytest.raises(ValueError, match=r"box must have shape \[..., 4\]"):
        ciou_loss(np.zeros(3), good)
