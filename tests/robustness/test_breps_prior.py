"""Realism prior: log-density equals scipy's Gamma; fit_gamma is the MLE and recovers params."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from dig_jax.metrics import ciou_loss
from dig_jax.robustness.breps import (
    BREPS_GAMMA,
    GAMMA_SCALE,
    GAMMA_SHAPE,
    fit_gamma,
    gamma_logpdf,
    realism_logpdf,
)


def test_constants_are_the_breps_fit():
    assert GAMMA_SHAPE == 1.7891955953866256
    assert GAMMA_SCALE == 0.12104836378138935


@given(st.floats(1e-4, 3.0))
def test_gamma_logpdf_matches_scipy(x):
    ref = stats.gamma.logpdf(x, GAMMA_SHAPE, loc=0, scale=GAMMA_SCALE)
    np.testing.assert_allclose(float(gamma_logpdf(x)), ref, rtol=2e-5, atol=2e-5)


def test_realism_logpdf_is_gamma_of_ciou():
    rng = np.random.default_rng(0)
    tight = np.array([10.0, 12.0, 40.0, 30.0], np.float32)
    boxes = tight + rng.normal(0, 3, (64, 4)).astype(np.float32)
    c = np.asarray(ciou_loss(jnp.asarray(boxes), jnp.asarray(tight)))
    ref = stats.gamma.logpdf(c, BREPS_GAMMA.shape, scale=BREPS_GAMMA.scale)
    got = np.asarray(realism_logpdf(boxes, tight))
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_realism_logpdf_at_tight_box_skip_and_gradient():
    tight = jnp.array([3.0, 4.0, 20.0, 11.0])
    assert float(realism_logpdf(tight, tight)) == -np.inf
    assert float(realism_logpdf(tight, tight, skip_exact=True)) == 0.0
    g = jax.grad(lambda b: realism_logpdf(b, tight, skip_exact=True))(tight)
    assert np.isfinite(np.asarray(g)).all()
    assert np.isfinite(np.asarray(jax.grad(gamma_logpdf)(0.0)))


@pytest.mark.parametrize(("shape", "scale"), [(GAMMA_SHAPE, GAMMA_SCALE), (0.7, 2.0), (5.0, 0.01)])
def test_fit_gamma_recovers_parameters(shape, scale):
    x = stats.gamma.rvs(shape, scale=scale, size=20_000, random_state=np.random.default_rng(1))
    fit = fit_gamma(x)
    assert fit.shape == pytest.approx(shape, rel=0.05)
    assert fit.scale == pytest.approx(scale, rel=0.05)
    ref_shape, ref_loc, ref_scale = stats.gamma.fit(x, floc=0)
    assert ref_loc == 0
    assert fit.shape == pytest.approx(ref_shape, rel=1e-4)
    assert fit.scale == pytest.approx(ref_scale, rel=1e-4)


@pytest.mark.parametrize(
    ("values", "match"), [([0.1], "at least 2"), ([0.1, 0.0], "> 0"), ([0.2, 0.2], "equal")]
)
def test_fit_gamma_rejects_bad_input(values, match):
    with pytest.raises(ValueError, match=match):
        fit_gamma(values)
