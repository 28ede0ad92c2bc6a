"""Metric inputs as users write them (tests/reliability_cases.md, section "metrics")."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dig_jax.metrics import box_iou, ciou_loss, iou, noc, rice, rice_scores
from dig_jax.metrics.accumulators import Averages


def test_noc_reads_integer_ious_as_floats():
    """Case M1: noc([0, 0, 1]) reached the 0.8 threshold at interaction 1."""
    for ious in ([0, 0, 1], np.array([0, 0, 1]), jnp.array([0, 0, 1]), [False, False, True]):
        out = noc(ious)
        np.testing.assert_array_equal(np.asarray(out["noc"]), [3, 3, 3])
        assert not np.asarray(out["failed"]).any()
    np.testing.assert_array_equal(noc([0, 0, 0])["noc"], [20, 20, 20])


def test_metrics_accept_python_lists():
    """Case M2: iou / noc / rice_scores on lists raised AttributeError."""
    assert iou([[0, 1], [1, 1]], [[0, 1], [0, 1]]) == pytest.approx(2 / 3)
    np.testing.assert_array_equal(noc([0.5, 0.85, 0.95])["noc"], [2, 2, 3])
    scores = rice_scores([[1, 0]], None, [[1, 0]], [[1, 255]])
    assert scores["iou_global"] == 1.0 and scores["rice_local"] == 1.0
    with pytest.raises(ValueError, match=r"pred must hold values in \{0, 1\}"):
        iou([[0, 2]], [[0, 1]])


SQUARE = np.zeros((8, 8), np.int32)
SQUARE[2:5, 2:5] = 1


@pytest.mark.parametrize("xp", [np, jnp], ids=["numpy", "jnp"])
def test_concrete_arrays_are_value_checked_numpy_and_jnp_alike(xp):
    """Case M3: jnp arrays were never value-checked, even outside jit (iou of sq, sq*2 = 0.0;
    rice(nan) = NaN; rice(1.5) = 2.0; box_iou with NaN = 0.0)."""
    sq = xp.asarray(SQUARE)
    with pytest.raises(ValueError, match=r"gt must hold values in \{0, 1, void\}, found \[2\]"):
        iou(sq, sq * 2)
    with pytest.raises(ValueError, match=r"pred must hold values in \{0, 1\}"):
        iou(sq * 3, sq)
    with pytest.raises(ValueError, match="alpha contains NaN"):
        rice(xp.asarray(np.nan), 0.5)
    with pytest.raises(ValueError, match=r"alpha must lie in \[0, 1\]"):
        rice(xp.asarray(1.5), 0.5)
    with pytest.raises(ValueError, match="beta contains NaN"):
        rice(0.5, xp.asarray([0.1, np.nan]))
    with pytest.raises(ValueError, match="a contains NaN or inf"):
        box_iou(xp.asarray([0.0, 0, np.nan, 4]), xp.asarray([0.0, 0, 4, 4]))
    with pytest.raises(ValueError, match="target_box is inverted"):
        ciou_loss(xp.asarray([0.0, 0, 4, 4]), xp.asarray([4.0, 0, 0, 4]))
    with pytest.raises(ValueError, match=r"ious must lie in \[0, 1\]"):
        noc(xp.asarray([0.2, 1.5]))


@pytest.mark.parametrize("ious", [[1.5], [-0.5], [np.inf], [0.5, np.nan]])
def test_noc_refuses_ious_outside_0_1(ious):
    """Case M4: noc accepted IoUs of 1.5, -0.5 and inf (NoC 1)."""
    with pytest.raises(ValueError, match="ious"):
        noc(ious)


@pytest.mark.parametrize("thresholds", [[np.nan], [0.8, 1.5], [0.0], [], [[0.5]], ["a"]])
def test_noc_refuses_bad_thresholds(thresholds):
    """Case M4: thresholds of NaN gave NoC 20."""
    with pytest.raises(ValueError, match=r"thresholds must be numbers in \(0, 1\]"):
        noc([0.5, 0.9], thresholds=thresholds)


def test_value_checks_skip_tracers_so_metrics_stay_jittable():
    sq = jnp.asarray(SQUARE)
    assert float(jax.jit(iou)(sq, sq)) == 1.0
    assert float(jax.jit(rice)(0.3, 0.5)) == pytest.approx(-0.4)
    np.testing.assert_array_equal(
        jax.jit(lambda x: noc(x)["noc"])(jnp.array([0.5, 0.9])), [2, 2, 2]
    )
    a, b = jnp.array([0.0, 0, 2, 2]), jnp.array([0.0, 0, 4, 4])
    assert float(jax.jit(box_iou)(a, b)) == 0.25
    grad = jax.grad(lambda x: ciou_loss(x, b))(jnp.array([1.0, 1, 3, 5]))
    assert np.isfinite(np.asarray(grad)).all() and np.abs(np.asarray(grad)).sum() > 0


def test_far_out_boxes_keep_their_iou():
    """Case M5: boxes around 1e200 gave box_iou 0.0 (instead of 0.5) and ciou_loss NaN."""
    a = np.array([1e200, 1e200, 3e200, 3e200])
    b = np.array([1e200, 1e200, 2e200, 3e200])
    assert box_iou(a, b) == pytest.approx(0.5)
    assert ciou_loss(a, b) == pytest.approx(ciou_loss(a / 1e199, b / 1e199))
    assert np.isfinite(ciou_loss(a, b))


def test_shape_mismatches_name_the_arguments():
    """Case M6: numpy broadcast errors from rice and Averages.add; rice_scores blamed `pred`
    for a float `prev`."""
    with pytest.raises(ValueError, match=r"shapes do not broadcast: alpha=\(3,\), beta=\(2,\)"):
        rice([0.1, 0.2, 0.3], [0.5, 0.6])
    with pytest.raises(ValueError, match=r"mask of shape \(3,\) does not match values"):
        Averages().add("x", [1.0, 2.0], mask=[True, False, True])
    with pytest.raises(ValueError, match=r"shapes do not broadcast: a=\(2, 4\), b=\(3, 4\)"):
        box_iou(np.zeros((2, 4)), np.zeros((3, 4)))
    with pytest.raises(ValueError, match="prev must be a bool or integer mask"):
        rice_scores(SQUARE, SQUARE * 0.5, SQUARE, SQUARE)
    with pytest.raises(ValueError, match=r"shape mismatch: pred=\(8, 8\), prev=\(4, 4\)"):
        rice_scores(SQUARE, SQUARE[:4, :4], SQUARE, SQUARE)
