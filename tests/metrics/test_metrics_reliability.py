"""Metric inputs as users write them (tests/reliability_cases.md, section "metrics")."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from dig_jax.metrics import iou, noc, rice_scores


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
