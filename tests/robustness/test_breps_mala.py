"""MALA realism sampler, energy two-sample test, quality correlations."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from scipy import stats

from dig_jax.metrics import ciou_loss
from dig_jax.robustness.breps.mala import (
    box_features,
    box_log_density,
    energy_test,
    mala_boxes,
    quality_correlations,
)
from dig_jax.robustness.breps.prior import BREPS_GAMMA

TIGHT = np.array([40.0, 50.0, 140.0, 120.0], np.float32)
BOUNDS = (256.0, 256.0)


@pytest.fixture(scope="module")
def run():
    return mala_boxes(jax.random.key(0), TIGHT, BOUNDS, n=400, chains=2, burn_in=300)


def test_samples_valid_deterministic_and_mixing(run):
    s = np.asarray(run.samples)
    assert s.shape == (2, 400, 4)
    assert (s[..., 2] > s[..., 0]).all() and (s[..., 3] > s[..., 1]).all()
    assert (s >= 0).all() and (s[..., 2:] <= 256).all()
    assert ((np.asarray(run.accept_rate) > 0.3) & (np.asarray(run.accept_rate) < 0.9)).all()
    again = mala_boxes(jax.random.key(0), TIGHT, BOUNDS, n=400, chains=2, burn_in=300)
    np.testing.assert_array_equal(np.asarray(again.samples), s)
    other = mala_boxes(jax.random.key(1), TIGHT, BOUNDS, n=400, chains=2, burn_in=300)
    assert not np.array_equal(np.asarray(other.samples), s)


def test_sample_ciou_is_gamma_like(run):
    c = np.asarray(ciou_loss(np.asarray(run.samples).reshape(-1, 4), TIGHT))
    gamma_median = stats.gamma.median(BREPS_GAMMA.shape, scale=BREPS_GAMMA.scale)
    # Volume-corrected density: Gamma-distributed CIoU in the small-offset limit; finite offsets
    # and the mixing of 800 correlated states leave the median within a factor of 2.
    assert 0.5 * gamma_median < np.median(c) < 2.0 * gamma_median
    assert (c > 0).all()


def test_log_density_is_minus_inf_off_support_and_gradient_finite():
    tight = np.asarray(TIGHT)
    for box in (tight, tight[[2, 1, 0, 3]], tight + np.array([0, 0, 200, 0], np.float32)):
        assert float(box_log_density(box, tight, np.asarray(BOUNDS), BREPS_GAMMA)) == -np.inf
        g = jax.grad(lambda b: box_log_density(b, tight, np.asarray(BOUNDS), BREPS_GAMMA))(box)
        assert np.isfinite(np.asarray(g)).all()


def test_energy_test_detects_shift_and_accepts_same_law():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(80, 4)), rng.normal(size=(80, 4))
    stat, p = energy_test(x, y, np.random.default_rng(1), permutations=199)
    assert p > 0.05 and stat >= 0 - 1e-9
    _, p_shift = energy_test(x, y + 0.8, np.random.default_rng(1), permutations=199)
    assert p_shift <= 0.01
    with pytest.raises(ValueError, match="same d"):
        energy_test(x, y[:, :3], rng)


def test_box_features_scale_free():
    f = box_features(TIGHT + np.array([10, 0, 0, 0], np.float32), TIGHT)
    np.testing.assert_allclose(f, [10 / np.sqrt(100 * 70), 0, 0, 0])


def test_quality_correlations_match_scipy():
    rng = np.random.default_rng(2)
    q = rng.uniform(size=30)
    s = q**3 + 0.05 * rng.normal(size=30)
    out = quality_correlations(q, s)
    assert out["spearman"] == pytest.approx(stats.spearmanr(q, s).statistic)
    assert out["pearson"] == pytest.approx(stats.pearsonr(q, s).statistic)
    assert quality_correlations([1, 2, 3, 4], [1, 4, 9, 16])["spearman"] == pytest.approx(1.0)
    assert np.isnan(quality_correlations([1, 2, 3], [5, 5, 5])["pearson"])
    with pytest.raises(ValueError, match="same length"):
        quality_correlations([1, 2, 3], [1, 2])
