"""NSS / PDE / PL1 / KS / WD: a map that matches the recorded clicks scores better."""

from __future__ import annotations

import numpy as np
import pytest

from dig_jax.robustness.rclicks.scores import (
    ks2d_pvalue,
    map_scores,
    nss,
    pde,
    sample_map,
)


def peaked(h=40, w=50, cx=12, cy=10, s=3.0):
    yy, xx = np.mgrid[:h, :w]
    return np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / (2 * s**2))


def test_matching_map_beats_a_wrong_one():
    rng = np.random.default_rng(0)
    truth = peaked()
    clicks = sample_map(truth, 25, rng)
    xs, ys = clicks[:, 0], clicks[:, 1]
    good = map_scores(truth, xs, ys, (50, 40), rng, n_boot=20)
    bad = map_scores(peaked(cx=40, cy=30), xs, ys, (50, 40), rng, n_boot=20)
    assert good["nss"] > bad["nss"] and good["pde"] > bad["pde"]
    assert good["pl1"] < bad["pl1"] and good["wd"] < bad["wd"]
    assert good["ks"] > 0.5 > bad["ks"]
    same = map_scores(truth, xs, ys, (50, 40), np.random.default_rng(1), n_boot=20)
    again = map_scores(truth, xs, ys, (50, 40), np.random.default_rng(1), n_boot=20)
    assert same == again  # same Generator seed, same scores


def test_ks2d_pvalue_tells_shifted_samples_apart():
    rng = np.random.default_rng(0)
    a, b = rng.normal(0, 1, (60, 2)), rng.normal(0, 1, (60, 2))
    assert ks2d_pvalue(a, b) > 0.05
    assert ks2d_pvalue(a, b + 2.0) < 1e-3


def test_constant_map_nss_is_zero():
    assert nss(np.ones((5, 5)), [1.0], [2.0]) == 0.0
    assert pde(np.ones((5, 5)), [1.0], [2.0]) == pytest.approx(1 / 25)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: nss(np.ones((5, 5)), [1.0], [1.0, 2.0]), "xs"),
        (lambda: nss(-np.ones((5, 5)), [1.0], [1.0]), "prob_map"),
        (lambda: pde(np.zeros((5, 5)), [1.0], [1.0]), "prob_map"),
        (
            lambda: map_scores(np.ones((5, 5)), [1.0], [1.0], (0, 5), np.random.default_rng(0)),
            "scale",
        ),
    ],
)
def test_bad_inputs_raise(call, match):
    with pytest.raises(ValueError, match=match):
        call()
