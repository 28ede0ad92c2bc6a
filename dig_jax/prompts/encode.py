"""Prompt encoders on the host and in `jnp`: a prompt's maps -> model input, for every input
kind and context encoding. The one place that knows what each input channel means.

- Gesture-agnostic models (`input_kind="gesture"`): RGB | gesture | distance/255 | prev mask
  (`gesture_input`, 6 channels).
- Context baselines (`input_kind="context"`): RGB | positive | negative | box | prev mask
  (`context_input`, 7 channels); a gesture goes to the positive (ADD) or negative (REMOVE) map,
  or, for models trained with `context_encoding="clicks"`, as skeleton clicks
  (`encode_context_clicks`, rectangles to the box channel); `encode_context_box` gives every
  gesture as its box. `apply_context_strategy` is how DIG tells them add/remove.
Differentiable encoders of boxes and gesture points (the attacks) are in `dig_jax.prompts.soft`.
Used by training, `predict`, evaluation, the attacks and the demo.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dig_jax.gestures import (
    BRUSH_RADIUS,
    Gesture,
    GestureKind,
    box_outline_points,
    rasterize,
    to_box,
    to_clicks,
)
from dig_jax.gestures.types import Context
from dig_jax.models.efficientnet_lite import RGB_MEAN
from dig_jax.models.interactive import INPUT_CHANNELS

CONTEXT_ENCODINGS = ("gesture", "clicks")


def _channel(x: Any) -> jax.Array:
    return jnp.asarray(x, jnp.float32)[..., None]


def gesture_input(image: Any, gesture: Any, distance: Any, prev_mask: Any) -> jax.Array:
    """Model input f32[..., H, W, 6] = RGB (0..255) | gesture {0,1} | distance [0,1] | prev {0,1}.

    `image` uint8 or float in 0..255, shape [..., H, W, 3]; the maps are [..., H, W] (float maps,
    e.g. soft rasterisations, are accepted).
    """
    image = jnp.asarray(image, jnp.float32)
    return jnp.concatenate(
        [image, _channel(gesture), _channel(distance), _channel(prev_mask)], axis=-1
    )


def context_input(
    image: Any, positive: Any, negative: Any, box: Any | None, prev_mask: Any
) -> jax.Array:
    """Context-baseline input f32[..., H, W, 7] = RGB | positive | negative | box | prev mask.

    `box` may be None (no box prompt: an all-zero channel).
    """
    image = jnp.asarray(image, jnp.float32)
    box = jnp.zeros(image.shape[:-1], jnp.float32) if box is None else box
    return jnp.concatenate(
        [image, _channel(positive), _channel(negative), _channel(box), _channel(prev_mask)],
        axis=-1,
    )


def padding_values(input_kind: str) -> np.ndarray:
    """f32[C]: the value of each input channel on padding pixels (no image, no gesture).

    RGB = the ImageNet mean (0 after normalisation), distance = 1.0 (farthest from the gesture),
    every other map = 0 (unmarked, outside the previous mask).
    """
    if input_kind not in INPUT_CHANNELS:
        raise ValueError(f"input_kind must be 'gesture' or 'context', got {input_kind!r}")
    values = np.zeros(INPUT_CHANNELS[input_kind], np.float32)
    values[:3] = np.asarray(RGB_MEAN, np.float32) * 255.0
    if input_kind == "gesture":
        values[4] = 1.0
    return values


def pad_input(x: Any, input_kind: str, stride: int = 32) -> Any:
    """Pad model input x f32[..., H, W, C] at the bottom/right to multiples of `stride`.

    Padding pixels hold `padding_values(input_kind)`; numpy in, numpy out (jax arrays give jax
    arrays). The caller crops the logits back to [..., :H, :W].
    """
    if stride < 1:
        raise ValueError(f"stride must be >= 1, got {stride}")
    values = padding_values(input_kind)
    if x.ndim < 3 or x.shape[-1] != len(values):
        raise ValueError(
            f"x must be f32[..., H, W, {len(values)}] for {input_kind!r} input, got {x.shape}"
        )
    height, width = x.shape[-3:-1]
    padded = (
        *x.shape[:-3],
        -(-height // stride) * stride,
        -(-width // stride) * stride,
        x.shape[-1],
    )
    if isinstance(x, jax.Array):
        out = jnp.broadcast_to(jnp.asarray(values), padded)
        return out.at[..., :height, :width, :].set(x.astype(jnp.float32))
    out = np.broadcast_to(values, padded).copy()
    out[..., :height, :width, :] = x
    return out


def batch_to_input(batch: dict[str, Any], input_kind: str) -> jax.Array:
    """Model input from a batched Sample dict (jit-able).

    Gesture models: RGB | gesture | distance/255 | prev_mask. Context models: the gesture map
    goes to the positive (context ADD) or negative (REMOVE) channel, or, when the batch holds
    host-encoded `positive`/`negative`/`box` maps (`encode_context_clicks`), those are used.
    """
    image, prev = batch["image"], batch["prev_mask"]
    if input_kind == "gesture":
        distance = jnp.asarray(batch["distance"], jnp.float32) / 255.0
        return gesture_input(image, batch["gesture"], distance, prev)
    if input_kind != "context":
        raise ValueError(f"input_kind must be 'gesture' or 'context', got {input_kind!r}")
    if "positive" in batch:
        return context_input(image, batch["positive"], batch["negative"], batch["box"], prev)
    gesture = jnp.asarray(batch["gesture"], jnp.float32)
    add = (jnp.asarray(batch["context"]) == 1).astype(jnp.float32)[:, None, None]
    return context_input(image, gesture * add, gesture * (1.0 - add), None, prev)


def encode_context_clicks(
    batch: dict[str, np.ndarray],
    max_points: int = 24,
    click_rng: np.random.Generator | None = None,
) -> dict:
    """Host-side: gestures as skeleton clicks (`to_clicks`) drawn as radius-5 disks into the
    positive (ADD) or negative (REMOVE) map. A rectangle that adds goes to the box channel as
    its outline; a box cannot say "remove", so a removing rectangle is read as the others are,
    as negative clicks (the context strategies' rows differ for rectangles as in DIG Table 2).
    With `click_rng` every click gets its own fair-coin context instead (DIG's "random"
    strategy for click models: a person clicking at random, click by click), and a rectangle
    one coin for the whole of it.

    Returns a copy of `batch` with uint8[B, H, W] maps `positive`, `negative`, `box`.
    """
    gestures = np.asarray(batch["gesture"])
    size = gestures.shape[1:3]
    positive = np.zeros_like(gestures, dtype=np.uint8)
    negative = np.zeros_like(positive)
    box = np.zeros_like(positive)
    for i, gesture_map in enumerate(gestures):
        rectangle = int(batch["gesture_kind"][i]) == GestureKind.RECTANGLE
        if rectangle:
            adds = int(batch["context"][i]) if click_rng is None else int(click_rng.integers(2))
            if adds == Context.ADD:
                box[i] = gesture_map > 0
                continue
        clicks = to_clicks(gesture_map, max_points=max_points)
        for point in clicks:
            disk = rasterize(Gesture(GestureKind.CLICK, point[None], False), size, BRUSH_RADIUS)
            if rectangle:  # a removing rectangle: every click negative
                add = Context.REMOVE
            elif click_rng is not None:
                add = int(click_rng.integers(2))
            else:
                add = int(batch["context"][i])
            (positive if add == 1 else negative)[i] |= disk
    return {**batch, "positive": positive, "negative": negative, "box": box}


def gesture_map_box(gesture_map: np.ndarray, radius: float = 5) -> np.ndarray | None:
    """Box f32[4] (pixel edges) of the gesture drawn as map {0,1}[H, W], or None if it is empty.

    The marked pixels' extent [min, max] is shrunk by the brush: the box's outline points are
    (min + radius - 0.5, max - radius + 0.5), boxed by `to_box`. This inverts the drawing of a
    rectangle with integer edges exactly (a click gives the box of its pixel, as `to_box` does);
    for other gestures it is the box of their points within half a pixel.
    """
    rows, cols = np.nonzero(gesture_map)
    if len(rows) == 0:
        return None
    inset = radius - 0.5
    lo = np.array([cols.min(), rows.min()], np.float32)
    hi = np.array([cols.max(), rows.max()], np.float32)
    centre = (lo + hi) / 2
    crossed = hi - lo < 2 * inset  # marks narrower than the brush (clipped at the border)
    corners = np.stack(
        [np.where(crossed, centre, lo + inset), np.where(crossed, centre, hi - inset)]
    )
    return to_box(Gesture(GestureKind.RECTANGLE, corners, True))


def encode_context_box(batch: dict[str, np.ndarray]) -> dict:
    """Host-side: every gesture as its bounding box (`gesture_map_box`), drawn as a radius-5
    rectangle outline, as the training rectangles are: into the box channel when the gesture
    adds (`context` ADD), into the negative map when it removes (a box prompt cannot remove).
    An empty gesture gives empty maps.

    Returns a copy of `batch` with uint8[B, H, W] maps `positive`, `negative`, `box`.
    """
    gestures = np.asarray(batch["gesture"])
    size = gestures.shape[1:3]
    box = np.zeros(gestures.shape, np.uint8)
    negative = np.zeros_like(box)
    for i, gesture_map in enumerate(gestures):
        bounds = gesture_map_box(gesture_map, BRUSH_RADIUS)
        if bounds is not None:
            outline = Gesture(GestureKind.RECTANGLE, box_outline_points(bounds), True)
            adds = int(batch["context"][i]) == Context.ADD
            (box if adds else negative)[i] = rasterize(outline, size, BRUSH_RADIUS)
    return {**batch, "positive": np.zeros_like(box), "negative": negative, "box": box}


CONTEXT_STRATEGIES = ("oracle", "positive", "negative", "random")
GESTURE_ENCODINGS = ("model", "clicks", "box")


def check_context(context: Any) -> np.ndarray:
    """`context` as int32; ValueError unless every value is Context.ADD (1) or REMOVE (0)
    (7 must not read as REMOVE)."""
    values = np.asarray(context)
    if values.dtype.kind not in "biu" or not np.isin(values, (0, 1)).all():
        raise ValueError(
            f"context must be Context.ADD (1) or Context.REMOVE (0), got "
            f"{np.unique(values)[:5].tolist() if values.dtype.kind in 'biuf' else values!r}"
        )
    return values.astype(np.int32)


def apply_context_strategy(
    batch: dict[str, np.ndarray], strategy: str, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """A copy of `batch` whose `context` follows `strategy`: oracle (the sample's own, an upper
    bound no real interface offers), positive (ADD), negative (REMOVE) or random (a fair coin
    per gesture)."""
    if strategy not in CONTEXT_STRATEGIES:
        raise ValueError(f"strategy must be one of {CONTEXT_STRATEGIES}, got {strategy!r}")
    context = check_context(batch["context"])
    if strategy == "positive":
        context = np.full_like(context, Context.ADD)
    elif strategy == "negative":
        context = np.full_like(context, Context.REMOVE)
    elif strategy == "random":
        context = rng.integers(0, 2, context.shape).astype(np.int32)
    return {**batch, "context": context}


def model_input(
    batch: dict[str, np.ndarray],
    input_kind: str,
    encoding: str = "gesture",
    *,
    strategy: str = "oracle",
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Host: model input f32[B, S, S, C] of a batch of zoom crops (uint8 maps, `context`,
    `gesture_kind`). `encoding` (context models): "gesture" (maps read whole), "clicks"
    (skeleton clicks; with the "random" strategy a coin per click) or "box"; `strategy` says
    add/remove to context models (`apply_context_strategy`)."""
    if input_kind == "context":
        rng = np.random.default_rng(0) if rng is None else rng
        batch = apply_context_strategy(batch, strategy, rng)
        if encoding == "clicks":
            batch = encode_context_clicks(batch, click_rng=rng if strategy == "random" else None)
        elif encoding == "box":
            batch = encode_context_box(batch)
    return np.asarray(batch_to_input(batch, input_kind))


def crop_input(
    crop: dict[str, np.ndarray],
    input_kind: str,
    encoding: str = "gesture",
    context: int = Context.ADD,
    kind: int | None = None,
) -> np.ndarray:
    """Host: model input f32[S, S, C] of one zoom crop (`dig_jax.prompts.crop_prompt`).
    `context` and `kind` (a GestureKind, None = unknown: read as a stroke) matter to context
    models only."""
    batch = {key: np.asarray(value)[None] for key, value in crop.items()}
    batch["context"] = check_context([context])
    batch["gesture_kind"] = np.array([GestureKind.SCRIBBLE if kind is None else int(kind)])
    return model_input(batch, input_kind, encoding)[0]
