"""Exhaustive centred-box sweep: known answers with a predictor whose mask is the box."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import jax.numpy as jnp
import numpy as np
import pytest

from dig_jax.metrics import box_iou
from dig_jax.robustness.breps import soft_box_fill
from dig_jax.robustness.breps.heatmap import (
    box_heatmap,
    boxes_iou,
    centred_boxes,
    largest_jump,
    plot_heatmap,
)

H = W = 32
IMAGE = np.zeros((H, W, 3), np.uint8)
GT = np.zeros((H, W), np.uint8)
GT[8:24, 6:26] = 1  # tight box (6, 8, 26, 24): 20 wide, 16 high


def encode_fill(box, image):
    return jnp.concatenate([image, soft_box_fill(box, image.shape[:2], 0.05)[..., None]], axis=-1)


def box_is_mask(x):
    return 50.0 * (x[..., 3] - 0.5)


def test_centred_boxes():
    b = centred_boxes([0, 0, 10, 20], [10, 30], [4, 6, 8])
    assert b.shape == (2, 3, 4)
    np.testing.assert_allclose(b[1, 2], [1, -5, 9, 25])
    np.testing.assert_allclose((b[..., :2] + b[..., 2:]) / 2, np.broadcast_to([5, 10], (2, 3, 2)))


def test_largest_jump_known_answer():
    a = np.array([[0.9, 0.8, 0.1], [0.85, 0.7, 0.65]])
    assert largest_jump(a) == (pytest.approx(0.7), (0, 1), (0, 2))
    assert largest_jump(np.array([[0.5]]))[0] == 0.0


def test_heatmap_matches_box_iou():
    scales = (0.5, 1.0, 1.5)  # even sizes: integer edges
    hm = box_heatmap(box_is_mask, encode_fill, IMAGE, GT, scales=scales, chunk=3)
    np.testing.assert_array_equal(hm.tight, [6, 8, 26, 24])
    np.testing.assert_allclose(hm.heights, [8, 16, 24])
    assert hm.ious.shape == (3, 3)
    assert hm.ious[1, 1] == 1.0
    # Integer-edge boxes: the predicted mask is the box itself, so mask IoU = box IoU.
    ref = np.asarray(box_iou(hm.boxes, np.asarray(hm.tight)))
    np.testing.assert_allclose(hm.ious, ref, atol=1e-6)
    jump, frm, to = largest_jump(hm.ious)
    assert (hm.jump, hm.jump_from, hm.jump_to) == (jump, frm, to)
    fig = plot_heatmap(hm, title="test")
    assert len(fig.axes) == 2  # heatmap + colour bar


def test_boxes_iou_clips_to_bounds_and_rejects_bad_chunk():
    boxes = np.array([[6, 8, 26, 24], [-10, -10, 50, 50]], np.float32)
    ious = boxes_iou(box_is_mask, encode_fill, IMAGE, GT, boxes, chunk=4)
    np.testing.assert_allclose(ious, [1.0, 320 / 1024], atol=1e-6)
    with pytest.raises(ValueError, match="chunk"):
        boxes_iou(box_is_mask, encode_fill, IMAGE, GT, boxes, chunk=0)
