"""Clicking groups hold 10 % of the mass each; clicks are drawn ∝ the map (chi-square)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import stats

from dig_jax.robustness.rclicks.sampling import (
    draw_batch,
    group_labels,
    group_masses,
    sample_clicks,
    sample_group_clicks,
    sample_groups_batch,
)

maps = hnp.arrays(
    np.float64,
    st.tuples(st.integers(1, 24), st.integers(1, 24)),
    elements=st.one_of(st.just(0.0), st.floats(1e-3, 1e3)),
)


def on_canvas(prob: np.ndarray) -> jax.Array:
    """The map inside a fixed 24×24 canvas of zeros: one jnp compile for every example."""
    canvas = np.zeros((24, 24), np.float32)
    canvas[: prob.shape[0], : prob.shape[1]] = prob
    return jnp.asarray(canvas)


@given(maps)
def test_group_masses_are_ten_percent_within_one_pixel(prob):
    total = prob.sum()
    for masses, tol in (
        (group_masses(prob), 1e-9),
        (np.asarray(group_masses(on_canvas(prob))), 1e-4),
    ):
        if total == 0:
            assert not np.any(masses)
            continue
        assert masses.sum() == pytest.approx(1.0, abs=1e-5)
        assert np.all(np.abs(masses - 0.1) <= prob.max() / total + tol)


@given(maps)
def test_groups_are_ordered_by_probability(prob):
    labels = group_labels(prob)
    assert ((labels == 0) == (prob == 0)).all()
    for g in range(1, 10):
        lower, higher = prob[(labels > 0) & (labels <= g)], prob[labels > g]
        if lower.size and higher.size:
            assert lower.max() <= higher.min()
    on_jnp = np.asarray(group_labels(on_canvas(prob)))[: prob.shape[0], : prob.shape[1]]
    np.testing.assert_array_equal(on_jnp == 0, labels == 0)


def test_uniform_map_splits_into_equal_groups():
    labels = group_labels(np.ones((10, 10)))
    assert np.bincount(labels.ravel()).tolist() == [0] + [10] * 10


def chi_square_p(counts: np.ndarray, prob: np.ndarray) -> float:
    keep = prob > 0
    expected = prob[keep] / prob[keep].sum() * counts.sum()
    return stats.chisquare(counts[keep], expected).pvalue


def test_sampling_frequencies_match_the_map():
    rng = np.random.default_rng(0)
    prob = rng.random((6, 7)) ** 2
    prob[2, 3] = prob[0, :] = 0.0
    pts, valid = sample_clicks(jax.random.key(0), prob, n=20_000)
    pts = np.asarray(pts).astype(int)
    assert bool(valid)
    counts = np.zeros_like(prob)
    np.add.at(counts, (pts[:, 1], pts[:, 0]), 1)
    assert counts[prob == 0].sum() == 0
    assert chi_square_p(counts, prob) > 1e-3


def test_group_sampling_stays_in_the_group_and_matches_the_map():
    prob = np.random.default_rng(1).random((8, 9))
    labels = group_labels(prob)
    for group in (1, 10):
        pts, valid = sample_group_clicks(jax.random.key(group), prob, group, n=10_000)
        pts = np.asarray(pts).astype(int)
        assert bool(valid)
        assert (labels[pts[:, 1], pts[:, 0]] == group).all()
        counts = np.zeros_like(prob)
        np.add.at(counts, (pts[:, 1], pts[:, 0]), 1)
        assert chi_square_p(counts, np.where(labels == group, prob, 0)) > 1e-3


def test_same_key_same_bytes_and_vmap():
    prob = np.random.default_rng(2).random((12, 10)).astype(np.float32)
    a = np.asarray(sample_group_clicks(jax.random.key(5), prob, 7, n=16)[0])
    b = np.asarray(sample_group_clicks(jax.random.key(5), prob, 7, n=16)[0])
    c = np.asarray(sample_group_clicks(jax.random.key(6), prob, 7, n=16)[0])
    assert a.tobytes() == b.tobytes() and a.tobytes() != c.tobytes()
    keys = jax.random.split(jax.random.key(0), 3)
    stacked = jnp.stack([prob, prob[::-1], np.zeros_like(prob)])
    pts, valid = jax.vmap(lambda k, m: sample_clicks(k, m, n=4))(keys, stacked)
    assert pts.shape == (3, 4, 2) and np.asarray(valid).tolist() == [True, True, False]
    one = np.asarray(sample_clicks(keys[1], stacked[1], n=4)[0])
    np.testing.assert_array_equal(np.asarray(pts[1]), one)


def test_batched_draws_agree_with_the_group_restriction():
    prob = np.random.default_rng(3).random((5, 6)).astype(np.float32)
    keys = jax.random.split(jax.random.key(1), 3)
    flat = np.stack([prob.ravel()] * 3)
    idx, valid = sample_groups_batch(keys, flat, jnp.array([0, 3, 10]))
    labels = group_labels(prob).ravel()
    assert np.asarray(valid).all() and labels[int(idx[1])] == 3 and labels[int(idx[2])] == 10
    restricted = np.where(labels == 3, prob.ravel(), 0)[None]
    assert int(draw_batch(keys[1:2], restricted)[0][0]) == int(idx[1])


def test_empty_map_is_a_clear_invalid_result():
    pts, valid = sample_clicks(jax.random.key(0), np.zeros((4, 5)), n=3)
    assert not bool(valid) and (np.asarray(pts) == -1).all()
    pts, valid = sample_group_clicks(jax.random.key(0), np.zeros((4, 5)), 10)
    assert not bool(valid) and np.isfinite(np.asarray(pts)).all()
    assert not np.any(group_masses(np.zeros((3, 3))))
    idx, valid = draw_batch(jax.random.split(jax.random.key(0), 2), np.zeros((2, 8), np.float32))
    assert np.asarray(idx).tolist() == [-1, -1] and not np.asarray(valid).any()


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda k: sample_clicks(k, -np.ones((3, 3))), "prob_map"),
        (lambda k: sample_clicks(k, np.full((3, 3), np.nan)), "prob_map"),
        (lambda k: sample_clicks(k, np.ones(9)), "prob_map"),
        (lambda k: sample_clicks(k, np.ones((3, 3)), n=0), "n"),
        (lambda k: sample_group_clicks(k, np.ones((3, 3)), 11), "group"),
        (lambda k: sample_group_clicks(k, np.ones((3, 3)), 0), "group"),
        (lambda k: group_labels(np.array([[1.0, -2.0]])), "prob_map"),
        (lambda k: group_masses(np.ones((2, 2)), n_groups=0), "n_groups"),
    ],
)
def test_bad_inputs_raise_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call(jax.random.key(0))
