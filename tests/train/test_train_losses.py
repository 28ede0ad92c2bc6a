"""Known answers and laws of the training losses."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from dig_jax.train.losses import (
    context_bce,
    kind_cross_entropy,
    normalized_focal_loss,
    obey_loss,
    sigmoid_bce,
    total_loss,
)

LOG2 = float(np.log(2.0))


def test_bce_at_zero_logits_is_log2_and_ignores_void():
    target = np.array([[[0, 1], [255, 1]]], np.uint8)
    np.testing.assert_allclose(sigmoid_bce(jnp.zeros((1, 2, 2)), target), [LOG2], rtol=1e-6)
    logits = jnp.array([[[0.0, 0.0], [50.0, 0.0]]])  # huge logit on the void pixel
    np.testing.assert_allclose(sigmoid_bce(logits, target), [LOG2], rtol=1e-6)


def test_all_void_sample_has_zero_loss():
    target = np.full((1, 3, 3), 255, np.uint8)
    assert float(sigmoid_bce(jnp.ones((1, 3, 3)), target)[0]) == 0.0
    assert float(normalized_focal_loss(jnp.ones((1, 3, 3)), target)[0]) == 0.0


def test_nfl_with_gamma_zero_is_alpha_weighted_bce():
    rng = np.random.default_rng(1)
    logits = jnp.asarray(rng.normal(size=(2, 5, 5)), jnp.float32)
    target = rng.integers(0, 2, (2, 5, 5)).astype(np.uint8)
    nfl = normalized_focal_loss(logits, target, alpha=0.5, gamma=0.0)
    np.testing.assert_allclose(nfl, 0.5 * sigmoid_bce(logits, target), rtol=1e-5)


def test_nfl_known_answer_two_pixels():
    # p = sigmoid(0) = 0.5 everywhere: focal weights equal, so the normalisation makes them 1.
    target = np.array([[[1, 0]]], np.uint8)
    nfl = normalized_focal_loss(jnp.zeros((1, 1, 2)), target, alpha=0.75, gamma=2.0)
    np.testing.assert_allclose(nfl, [(0.75 * LOG2 + 0.25 * LOG2) / 2], rtol=1e-6)


@given(st.integers(0, 2**31 - 1))
def test_void_pixels_never_change_the_losses(seed):
    rng = np.random.default_rng(seed)
    target = rng.choice(np.array([0, 1, 255], np.uint8), size=(2, 6, 6))
    logits = rng.normal(size=(2, 6, 6)).astype(np.float32)
    other = np.where(target == 255, rng.normal(scale=10, size=logits.shape), logits)
    for loss in (sigmoid_bce, normalized_focal_loss):
        np.testing.assert_allclose(
            loss(logits, target), loss(other.astype(np.float32), target), rtol=1e-5, atol=1e-7
        )


def test_nfl_gradient_is_finite_and_points_towards_the_target():
    target = np.array([[[1, 0, 255]]], np.uint8)
    grad = jax.grad(lambda z: normalized_focal_loss(z, target).sum())(jnp.zeros((1, 1, 3)))
    grad = np.asarray(grad)[0, 0]
    assert np.isfinite(grad).all()
    assert grad[0] < 0 < grad[1] and grad[2] == 0.0


def test_context_and_kind_losses_known_answers():
    np.testing.assert_allclose(context_bce(jnp.zeros(2), np.array([0, 1])), [LOG2, LOG2], rtol=1e-6)
    np.testing.assert_allclose(
        kind_cross_entropy(jnp.zeros((1, 5)), np.array([3])), [np.log(5.0)], rtol=1e-6
    )


def test_total_loss_weights_the_heads():
    cfg = ml_collections.ConfigDict(
        dict(
            mask="bce",
            mask_weight=2.0,
            context_weight=0.5,
            kind_weight=0.25,
            focal_alpha=0.5,
            focal_gamma=2.0,
        )
    )
    outputs = {"mask": jnp.zeros((1, 2, 2)), "context": jnp.zeros(1), "kind": jnp.zeros((1, 5))}
    batch = {
        "target": np.ones((1, 2, 2), np.uint8),
        "context": np.array([1]),
        "gesture_kind": np.array([0]),
    }
    loss, parts = total_loss(outputs, batch, cfg)
    np.testing.assert_allclose(loss, 2 * LOG2 + 0.5 * LOG2 + 0.25 * np.log(5.0), rtol=1e-6)
    assert set(parts) == {"mask_loss", "context_loss", "kind_loss"}
    loss_single, parts_single = total_loss({"mask": outputs["mask"]}, batch, cfg)
    np.testing.assert_allclose(loss_single, 2 * LOG2, rtol=1e-6)
    assert set(parts_single) == {"mask_loss"}


def _obey_batch() -> dict:
    """Two 1x5 samples: an ADD click at column 0 and a REMOVE click at column 4."""
    distance = np.array([[[0, 1, 2, 3, 4]], [[4, 3, 2, 1, 0]]], np.uint8)
    target = np.array([[[1, 1, 255, 0, 1]], [[1, 0, 255, 0, 0]]], np.uint8)
    return {
        "distance": distance,
        "target": target,
        "context": np.array([1, 0]),
        "gesture_kind": np.array([0, 0]),
    }


def test_obey_loss_counts_near_pixels_with_the_asked_label_only():
    batch = _obey_batch()
    # ADD sample, radius 2: pixels 0, 1 (target 1); pixel 2 is void. REMOVE: pixels 3, 4 and
    # 2 is void; so each sample averages BCE over two pixels.
    logits = jnp.array([[[0.0, 2.0, 9.0, 9.0, -9.0]], [[-9.0, 9.0, 9.0, 0.0, -2.0]]])
    loss, has = obey_loss(logits, batch, radius=2.0, kinds=(0, 1))
    sp = lambda x: float(np.log1p(np.exp(x)))  # softplus
    np.testing.assert_allclose(loss, [(sp(0) + sp(-2)) / 2, (sp(0) + sp(-2)) / 2], rtol=1e-6)
    assert has.tolist() == [True, True]


def test_obey_loss_is_zero_for_other_kinds_and_far_pixels():
    batch = _obey_batch()
    batch["gesture_kind"] = np.array([3, 0])  # a tight lasso is not obeyed pixel by pixel
    logits = jnp.zeros((2, 1, 5))
    loss, has = obey_loss(logits, batch, radius=0.0, kinds=(0, 1))
    np.testing.assert_allclose(loss, [0.0, LOG2], rtol=1e-6)
    assert has.tolist() == [False, True]


def test_total_loss_adds_the_obey_term_over_samples_that_have_it():
    cfg = ml_collections.ConfigDict(
        dict(mask="bce", mask_weight=1.0, context_weight=0.0, kind_weight=0.0,
             focal_alpha=0.5, focal_gamma=2.0, obey_weight=3.0, obey_radius=1.0,
             obey_kinds=(0,))
    )  # fmt: skip
    batch = _obey_batch()
    batch["gesture_kind"] = np.array([0, 2])  # only the first sample counts
    loss, parts = total_loss({"mask": jnp.zeros((2, 1, 5))}, batch, cfg)
    np.testing.assert_allclose(parts["obey_loss"], LOG2, rtol=1e-6)
    np.testing.assert_allclose(loss, parts["mask_loss"] + 3.0 * LOG2, rtol=1e-6)
    cfg.obey_weight = 0.0
    assert "obey_loss" not in total_loss({"mask": jnp.zeros((2, 1, 5))}, batch, cfg)[1]
