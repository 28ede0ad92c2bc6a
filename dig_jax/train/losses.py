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


def obey_loss(
    logits: jax.Array, batch: dict[str, Any], radius: float, kinds: tuple[int, ...]
) -> tuple[jax.Array, jax.Array]:
    """BCE on the pixels near a gesture that carry the label it asks for; (f32[B], bool[B]).

    A pixel counts when it lies within `radius` px of the gesture (batch["distance"], the EDT
    in px as uint8), its target equals the sample's context (ADD = 1, REMOVE = 0, void never)
    and the sample's gesture kind is in `kinds`. This singles out what the whole-crop mask
    loss averages away: a refinement click whose own pixel keeps its old label. The second
    array says which samples had such pixels (the others' loss is 0).
    """
    target = jnp.asarray(batch["target"])
    context = jnp.asarray(batch["context"]).astype(target.dtype)[:, None, None]
    near = jnp.asarray(batch["distance"]).astype(jnp.float32) <= radius
    applies = jnp.isin(jnp.asarray(batch["gesture_kind"]), jnp.asarray(kinds, jnp.int32))
    pixels = (near & (target == context) & (target != VOID) & applies[:, None, None]).astype(
        jnp.float32
    )
    per_pixel = optax.sigmoid_binary_cross_entropy(logits, (target == 1).astype(jnp.float32))
    axes = tuple(range(1, logits.ndim))
    count = jnp.sum(pixels, axes)
    return jnp.sum(per_pixel * pixels, axes) / jnp.maximum(count, 1.0), count > 0


def candidate_iou(masks: jax.Array, target: jax.Array) -> jax.Array:
    """IoU of each thresholded candidate (logit > 0) in masks f32[B, H, W, K] with target
    {0,1,255}[B, H, W] over non-void pixels, without gradient; f32[B, K] (1 when both are
    empty)."""
    valid, positive = _valid_and_positive(target)
    pred = (jax.lax.stop_gradient(masks) > 0).astype(jnp.float32) * valid[..., None]
    inter = jnp.sum(pred * positive[..., None], axis=(1, 2))
    union = jnp.sum(pred, axis=(1, 2)) + jnp.sum(positive, axis=(1, 2))[:, None] - inter
    return jnp.where(union > 0, inter / jnp.maximum(union, 1.0), 1.0)


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
    focal_alpha, focal_gamma, and optionally obey_weight, obey_radius, obey_kinds (`obey_loss`;
    weight 0 or absent: off). Returns (scalar loss, dict of component means).

    A model with candidate masks (outputs "masks", "iou", "ambiguous") is trained as SAM
    trains its ambiguity outputs: on an ambiguous prompt only the best candidate's mask loss
    counts, plus `iou_weight` × the squared error of the predicted IoUs (`candidate_iou`);
    on any other prompt the main mask's loss (candidate 0).
    """
    if loss_config.mask not in MASK_LOSSES:
        raise ValueError(f"loss.mask must be one of {MASK_LOSSES}, got {loss_config.mask!r}")

    def mask_loss(logits: jax.Array) -> jax.Array:
        if loss_config.mask == "nfl":
            return normalized_focal_loss(
                logits, batch["target"], loss_config.focal_alpha, loss_config.focal_gamma
            )
        return sigmoid_bce(logits, batch["target"])

    parts = {}
    if "masks" in outputs:
        masks = outputs["masks"]
        each = jnp.stack([mask_loss(masks[..., k]) for k in range(masks.shape[-1])], axis=-1)
        ambiguous = outputs["ambiguous"]
        mask = jnp.where(ambiguous > 0.5, jnp.min(each, axis=-1), each[:, 0])
        error = jnp.mean((outputs["iou"] - candidate_iou(masks, batch["target"])) ** 2, axis=-1)
        parts["iou_loss"] = jnp.sum(error * ambiguous) / jnp.maximum(jnp.sum(ambiguous), 1.0)
        parts["ambiguous"] = jnp.mean(ambiguous)
    else:
        mask = mask_loss(outputs["mask"])
    parts["mask_loss"] = jnp.mean(mask)
    loss = loss_config.mask_weight * parts["mask_loss"]
    if "iou_loss" in parts:
        loss = loss + loss_config.get("iou_weight", 1.0) * parts["iou_loss"]
    obey_weight = loss_config.get("obey_weight", 0.0)
    if obey_weight > 0:
        obey, has = obey_loss(
            outputs["mask"], batch, loss_config.obey_radius, tuple(loss_config.obey_kinds)
        )
        # the mean over the samples that have such pixels: a batch of lassos adds nothing
        parts["obey_loss"] = jnp.sum(obey) / jnp.maximum(jnp.sum(has), 1)
        loss = loss + obey_weight * parts["obey_loss"]
    if "context" in outputs:
        parts["context_loss"] = jnp.mean(context_bce(outputs["context"], batch["context"]))
        parts["kind_loss"] = jnp.mean(kind_cross_entropy(outputs["kind"], batch["gesture_kind"]))
        loss = loss + loss_config.context_weight * parts["context_loss"]
        loss = loss + loss_config.kind_weight * parts["kind_loss"]
    return loss, parts
