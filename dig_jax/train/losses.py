"""Training losses. Mask losses ignore void pixels (target == 255), one value per sample."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax

from dig_jax.metrics import VOID

MASK_LOSSES = ("nfl", "bce")


def _valid_and_positive(target: jax.Array) -> tuple[jax.Array, jax.Array]:
    target = jnp.asarray(target)
    return (target != VOID).astype(jnp.float32), (target == 1).astype(jnp.float32)


def sigmoid_bce(logits: jax.Array, target: jax.Array) -> jax.Array:
    """Binary cross-entropy averaged over non-void pixels. logits f32[B,H,W], target {0,1,255}.

    Returns f32[B]; a sample with no valid pixel has loss 0.
    """
    valid, positive = _valid_and_positive(target)
    per_pixel = optax.sigmoid_binary_cross_entropy(logits, positive)
    axes = tuple(range(1, logits.ndim))
    return jnp.sum(per_pixel * valid, axes) / jnp.maximum(jnp.sum(valid, axes), 1.0)


def normalized_focal_loss(
    logits: jax.Array, target: jax.Array, alpha: float = 0.5, gamma: float = 2.0
) -> jax.Array:
    """Normalized focal loss (RITM/DIG) averaged over non-void pixels; returns f32[B].

    Focal weights (1 - p_t)^gamma are rescaled per sample (without gradient) so that they sum to
    the number of valid pixels; alpha weights positives, 1 - alpha negatives.
    """
    valid, positive = _valid_and_positive(target)
    axes = tuple(range(1, logits.ndim))
    log_pt = jnp.where(positive > 0, jax.nn.log_sigmoid(logits), jax.nn.log_sigmoid(-logits))
    beta = (1.0 - jnp.exp(log_pt)) ** gamma * valid
    scale = jnp.sum(valid, axes, keepdims=True) / (jnp.sum(beta, axes, keepdims=True) + 1e-8)
    beta = beta * jax.lax.stop_gradient(scale)
    alpha_t = jnp.where(positive > 0, alpha, 1.0 - alpha)
    per_pixel = -alpha_t * beta * log_pt
    return jnp.sum(per_pixel, axes) / jnp.maximum(jnp.sum(valid, axes), 1.0)


def context_bce(logits: jax.Array, context: jax.Array) -> jax.Array:
    """BCE of the context logit f32[B] against context int[B] (ADD = 1, REMOVE = 0); f32[B]."""
    return optax.sigmoid_binary_cross_entropy(logits, jnp.asarray(context, jnp.float32))


def kind_cross_entropy(logits: jax.Array, kinds: jax.Array) -> jax.Array:
    """Softmax cross-entropy of gesture-kind logits f32[B, 5] against codes int[B]; f32[B]."""
    return optax.softmax_cross_entropy_with_integer_labels(logits, jnp.asarray(kinds, jnp.int32))


def total_loss(
    outputs: dict[str, jax.Array], batch: dict[str, Any], loss_config: Any
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Weighted sum of the mask loss and (multi-head) context/kind losses; batch means.

    `loss_config` fields: mask ('nfl' | 'bce'), mask_weight, context_weight, kind_weight,
    focal_alpha, focal_gamma. Returns (scalar loss, dict of component means).
    """
    if loss_config.mask == "nfl":
        mask = normalized_focal_loss(
            outputs["mask"], batch["target"], loss_config.focal_alpha, loss_config.focal_gamma
        )
    elif loss_config.mask == "bce":
        mask = sigmoid_bce(outputs["mask"], batch["target"])
    else:
        raise ValueError(f"loss.mask must be one of {MASK_LOSSES}, got {loss_config.mask!r}")
    parts = {"mask_loss": jnp.mean(mask)}
    loss = loss_config.mask_weight * parts["mask_loss"]
    if "context" in outputs:
        parts["context_loss"] = jnp.mean(context_bce(outputs["context"], batch["context"]))
        parts["kind_loss"] = jnp.mean(kind_cross_entropy(outputs["kind"], batch["gesture_kind"]))
        loss = loss + loss_config.context_weight * parts["context_loss"]
        loss = loss + loss_config.kind_weight * parts["kind_loss"]
    return loss, parts
