"""The baseline clicker: centre of the largest error by padded distance transform."""

from __future__ import annotations

import numpy as np
import pytest

from dig_jax.gestures import GestureKind
from dig_jax.robustness.rclicks.clicker import baseline_click, choose_error


def square(size=500, side=100, top=200, left=200):
    gt = np.zeros((size, size), np.uint8)
    gt[top : top + side, left : left + side] = 1
    return gt


def test_square_is_clicked_at_its_centre_positive():
    gt = square()
    click = baseline_click(np.zeros_like(gt), gt)
    assert click.positive
    assert abs(click.x - 249.5) <= 0.5 and abs(click.y - 249.5) <= 0.5
    g = click.gesture()
    assert g.kind == GestureKind.CLICK and g.points.tolist() == [[click.x, click.y]]


def test_larger_false_positive_gives_a_negative_click():
    gt = square(side=20)
    pred = np.zeros_like(gt)
    pred[20:120, 20:120] = 1  # a 100 px false positive far away
    click = baseline_click(pred, gt)
    assert not click.positive and click.context == 0
    assert 20 <= click.x < 120 and 20 <= click.y < 120


def test_border_errors_are_padded():
    gt = np.zeros((50, 50), np.uint8)
    gt[:, :10] = 1  # touches three borders: the padded EDT peaks inside, not on the edge
    click = baseline_click(np.zeros_like(gt), gt)
    assert 4 <= click.x <= 5


def test_clicked_pixels_are_excluded_and_void_ignored():
    gt = square(size=60, side=3, top=10, left=10)
    clicked = np.zeros(gt.shape, bool)
    clicked[11, 11] = True
    click = baseline_click(np.zeros_like(gt), gt, clicked)
    assert (click.y, click.x) != (11, 11)
    gt_void = gt.copy()
    gt_void[gt == 1] = 255
    assert baseline_click(np.zeros_like(gt), gt_void) is None


def test_no_error_gives_none():
    gt = square(size=50, side=10, top=5, left=5)
    assert baseline_click(gt, gt) is None
    clicked = gt == 1
    assert choose_error(np.zeros_like(gt), gt, clicked) is None  # every error pixel clicked


def test_bad_inputs_raise_naming_the_argument():
    gt = square(size=20, side=5, top=2, left=2)
    with pytest.raises(ValueError, match="pred"):
        baseline_click(np.zeros((19, 20), np.uint8), gt)
    with pytest.raises(ValueError, match="clicked"):
        baseline_click(np.zeros_like(gt), gt, np.zeros((20, 19), bool))
    with pytest.raises(ValueError, match="pred"):
        baseline_click(np.full_like(gt, 2), gt)
