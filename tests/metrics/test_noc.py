"""NoC/NoG/NoF: first index reaching each threshold, ties, failures, batches, summaries."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from dig_jax.metrics import noc, noc_summary


def test_known_trajectory():
    ious = np.array([0.50, 0.80, 0.84, 0.95])
    out = noc(ious)
    np.testing.assert_array_equal(out["noc"], [2, 4, 4])
    np.testing.assert_array_equal(out["failed"], [False, False, False])


def test_tie_at_threshold_counts_as_reached():
    out = noc(np.array([0.85, 0.85]), thresholds=(0.85,))
    assert out["noc"].tolist() == [1]


def test_never_reached_is_max_and_failure():
    out = noc(np.full(20, 0.84), thresholds=(0.80, 0.85, 0.90))
    np.testing.assert_array_equal(out["noc"], [1, 20, 20])
    np.testing.assert_array_equal(out["failed"], [False, True, True])


def test_short_trajectory_failure_is_max_interactions():
    out = noc(np.array([0.1, 0.2, 0.3]), thresholds=(0.9,), max_interactions=20)
    assert out["noc"].tolist() == [20] and out["failed"].tolist() == [True]


def test_batched_and_jnp_agree():
    rng = np.random.default_rng(0)
    ious = np.sort(rng.uniform(0.3, 1.0, (5, 20)), axis=-1).astype(np.float32)
    ref = noc(ious)
    assert ref["noc"].shape == (5, 3)
    out = noc(jnp.asarray(ious))
    np.testing.assert_array_equal(np.asarray(out["noc"]), ref["noc"])
    np.testing.assert_array_equal(np.asarray(out["failed"]), ref["failed"])


def test_summary_means_and_failure_counts():
    ious = np.array([[0.9] * 3, [0.1] * 3])
    summary = noc_summary(noc(ious))
    assert summary["NoC@80"] == pytest.approx((1 + 20) / 2)
    assert summary["NoF@90"] == 1


def test_bad_input():
    with pytest.raises(ValueError, match="more than max_interactions"):
        noc(np.zeros(21))
    with pytest.raises(ValueError, match="ious contains NaN"):
        noc(np.array([0.5, np.nan]))
    with pytest.raises(ValueError, match="T >= 1"):
        noc(np.zeros((3, 0)))
