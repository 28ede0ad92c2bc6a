"""Differentiable prompt encoders (`jnp`): a box f32[4] (pixel edges) or gesture points
f32[N, 2] + image -> model input f32[H, W, C], for every input kind and context encoding.

`encode_box_gesture` feeds the gesture-agnostic model exactly what a drawn rectangle gives it
(soft-rasterised outline, its analytic distance map, no previous mask); `encode_box_context`
feeds the context baseline its box channel (the same soft outline, as
`dig_jax.prompts.encode.encode_context_clicks` draws rectangles). The points encoders do the
same for clicks, scribbles and lassos. All are differentiable w.r.t. the box or the points:
the attacks (`dig_jax.robustness.breps`) take their gradients.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from dig_jax.gestures import box_outline_points, distance_map_jnp, soft_rasterize
from dig_jax.gestures.types import BRUSH_RADIUS
from dig_jax.prompts.encode import context_input, gesture_input

# (points f32[N, 2], length i32, closed bool, image f32[H, W, 3]) -> model input f32[H, W, C]
EncodePoints = Callable[[jax.Array, jax.Array, jax.Array, jax.Array], jax.Array]
CONTEXT_MAX_CLICKS = 24  # skeleton clicks per gesture, as `encode_context_clicks`

OUTLINE_TEMPERATURE = 0.5  # px, softness of the rasterised outline (soft_rasterize default)


def soft_box_fill(box: jax.Array, shape: tuple[int, int], temperature: float = 0.5) -> jax.Array:
    """Soft filled-box indicator f32[H, W] in [0, 1]: product of sigmoids of the signed distances
    (px) from each pixel centre (edge coords c + 0.5) to the four sides; its hard limit
    (temperature -> 0) is 1 exactly on the pixels whose centre lies inside the box."""
    h, w = shape
    cx = jnp.arange(w, dtype=jnp.float32) + 0.5
    cy = jnp.arange(h, dtype=jnp.float32) + 0.5
    fx = jax.nn.sigmoid((cx - box[0]) / temperature) * jax.nn.sigmoid((box[2] - cx) / temperature)
    fy = jax.nn.sigmoid((cy - box[1]) / temperature) * jax.nn.sigmoid((box[3] - cy) / temperature)
    return fy[:, None] * fx[None, :]


def box_outline_maps(
    box: jax.Array,
    shape: tuple[int, int],
    radius: float | jax.Array = float(BRUSH_RADIUS),
    temperature: float = OUTLINE_TEMPERATURE,
) -> tuple[jax.Array, jax.Array]:
    """Soft outline f32[H, W] in [0, 1] and distance map f32[H, W] in [0, 1] of a box gesture."""
    points = box_outline_points(box)
    length = jnp.int32(points.shape[0])
    outline = soft_rasterize(points, length, True, shape, radius=radius, temperature=temperature)
    distance = distance_map_jnp(points, length, True, shape, radius=radius)
    return outline, distance


def encode_box_gesture(
    box: jax.Array, image: jax.Array, radius: float | jax.Array = BRUSH_RADIUS
) -> jax.Array:
    """Gesture-agnostic model input f32[H, W, 6]: RGB | soft outline | distance | zero prev.
    `radius`: the brush in this image's pixels (5 px on the photo, scaled in a zoom crop)."""
    shape = image.shape[:2]
    outline, distance = box_outline_maps(box, shape, radius)
    return gesture_input(image, outline, distance, jnp.zeros(shape, jnp.float32))


def encode_box_context(
    box: jax.Array, image: jax.Array, radius: float | jax.Array = BRUSH_RADIUS
) -> jax.Array:
    """Context-baseline input f32[H, W, 7]: RGB | 0 | 0 (no clicks) | soft outline | zero prev."""
    shape = image.shape[:2]
    outline, _ = box_outline_maps(box, shape, radius)
    zeros = jnp.zeros(shape, jnp.float32)
    return context_input(image, zeros, zeros, outline, zeros)


def encode_box_context_add(
    box: jax.Array, image: jax.Array, radius: float | jax.Array = BRUSH_RADIUS
) -> jax.Array:
    """Context-baseline input f32[H, W, 7] for models trained with `context_encoding="gesture"`:
    the soft outline as an ADD gesture (positive channel), no box channel, zero prev."""
    shape = image.shape[:2]
    outline, _ = box_outline_maps(box, shape, radius)
    zeros = jnp.zeros(shape, jnp.float32)
    return context_input(image, outline, zeros, None, zeros)


def box_encoder(
    input_kind: str, context_encoding: str = "clicks"
) -> Callable[[jax.Array, jax.Array], jax.Array]:
    """The box encoder for a segmenter's `input_kind` ("gesture" or "context"); context models
    trained with `context_encoding="clicks"` read boxes from the box channel, those trained with
    "gesture" read every gesture (rectangles included) from the positive/negative channels."""
    context = {"clicks": encode_box_context, "gesture": encode_box_context_add}
    return _pick(input_kind, context_encoding, encode_box_gesture, context)


def _pick(input_kind: str, context_encoding: str, gesture: Callable, context: dict) -> Callable:
    """`gesture` for gesture models, `context[context_encoding]` for context baselines."""
    if input_kind == "gesture":
        return gesture
    if input_kind != "context":
        raise ValueError(f"input_kind must be 'gesture' or 'context', got {input_kind!r}")
    if context_encoding not in context:
        raise ValueError(
            f"context_encoding must be 'clicks' or 'gesture', got {context_encoding!r}"
        )
    return context[context_encoding]


def encode_points_gesture(
    points: jax.Array, length: jax.Array, closed: jax.Array, image: jax.Array
) -> jax.Array:
    """Gesture-model input f32[H, W, 6]: RGB | soft gesture | analytic distance | zero prev."""
    shape = image.shape[:2]
    soft = soft_rasterize(points, length, closed, shape, radius=float(BRUSH_RADIUS))
    dist = distance_map_jnp(points, length, closed, shape, radius=float(BRUSH_RADIUS))
    return gesture_input(image, soft, dist, jnp.zeros(shape, jnp.float32))


def encode_points_context(
    points: jax.Array, length: jax.Array, closed: jax.Array, image: jax.Array
) -> jax.Array:
    """Context-baseline input f32[H, W, 7]: the soft gesture in the positive (ADD) channel."""
    shape = image.shape[:2]
    soft = soft_rasterize(points, length, closed, shape, radius=float(BRUSH_RADIUS))
    zeros = jnp.zeros(shape, jnp.float32)
    return context_input(image, soft, zeros, None, zeros)


def click_indices(length: jax.Array, n_points: int, max_clicks: int) -> jax.Array:
    """i32[K], K = min(max_clicks, n_points): indices of K points evenly spaced (by index) along
    the first `length` (traced) of `n_points` points, as `to_clicks` spaces its clicks."""
    k = min(max_clicks, n_points)
    last = jnp.maximum(jnp.asarray(length, jnp.float32) - 1.0, 0.0)
    spread = jnp.arange(k, dtype=jnp.float32) / max(k - 1, 1)
    return jnp.round(spread * last).astype(jnp.int32)


def encode_points_context_clicks(
    points: jax.Array, length: jax.Array, closed: jax.Array, image: jax.Array
) -> jax.Array:
    """Context-baseline input f32[H, W, 7] for models trained with `context_encoding="clicks"`:
    soft radius-5 discs at up to 24 points evenly spaced along the gesture (the skeleton clicks
    of `encode_context_clicks`) in the positive (ADD) channel; `closed` plays no part."""
    shape = image.shape[:2]
    clicks = points[click_indices(length, points.shape[0], CONTEXT_MAX_CLICKS)]

    def disc(point: jax.Array) -> jax.Array:
        return soft_rasterize(point[None], jnp.int32(1), False, shape, radius=float(BRUSH_RADIUS))

    soft = jax.vmap(disc)(clicks).max(axis=0)
    zeros = jnp.zeros(shape, jnp.float32)
    return context_input(image, soft, zeros, None, zeros)


def points_encoder(input_kind: str, context_encoding: str = "gesture") -> EncodePoints:
    """The gesture encoder for a segmenter's `input_kind` ("gesture" or "context"); context
    models trained with `context_encoding="clicks"` see discs at the points, those trained with
    "gesture" the whole soft stroke (as `box_encoder` switches for boxes)."""
    context = {"gesture": encode_points_context, "clicks": encode_points_context_clicks}
    return _pick(input_kind, context_encoding, encode_points_gesture, context)
