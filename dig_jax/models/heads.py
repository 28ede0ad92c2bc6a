"""Heads: the HRNet fusion mask head, the light FPN decoder on EfficientNet-Lite features, and
the DIG multi-head branches (context and gesture kind)."""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from dig_jax.cpu import Conv
from dig_jax.models.hrnet import ConvBN, fuse_multiscale, resize_to


class FusionHead(nn.Module):
    """Standard HRNet segmentation head.

    Concatenates the upsampled branches (stride 4), applies 1x1 ConvBN-ReLU to `width` channels
    ("top features") and a 1x1 conv to one logit. Returns (logits f32[B, h, w], top f32[B, h, w,
    width]) at stride 4; the caller resizes logits to the input size.
    """

    width: int = 96

    @nn.compact
    def __call__(self, features: Sequence[jax.Array], train: bool) -> tuple[jax.Array, jax.Array]:
        top = ConvBN(self.width, kernel=1)(fuse_multiscale(features), train)
        logits = Conv(1, (1, 1), name="mask_logits")(top)
        return logits[..., 0], top


class FPNHead(nn.Module):
    """Light top-down decoder (FPN) for a backbone's stride-4/8/16/32 maps.

    1×1 laterals to `width` channels, top-down bilinear upsampling and sums, then at stride 4
    the prompt maps (f32[B, h, w, M], already at that resolution) are concatenated and two 3×3
    ConvBN-ReLU give the top features; a 1×1 conv gives one logit. Returns (logits f32[B, h, w],
    top f32[B, h, w, width]) like `FusionHead`.
    """

    width: int = 64

    @nn.compact
    def __call__(
        self, features: Sequence[jax.Array], maps: jax.Array, train: bool
    ) -> tuple[jax.Array, jax.Array]:
        x = None
        for level, feature in reversed(list(enumerate(features))):
            lateral = Conv(self.width, (1, 1), name=f"lateral_{level}")(feature)
            if x is not None:
                lateral = lateral + resize_to(x, *feature.shape[1:3])
            x = lateral
        x = jnp.concatenate([x, maps.astype(x.dtype)], axis=-1)
        x = ConvBN(self.width)(x, train)
        top = ConvBN(self.width)(x, train)
        logits = Conv(1, (1, 1), name="mask_logits")(top)
        return logits[..., 0], top


class FineHead(nn.Module):
    """Stride-2 refinement of stride-4 logits, for sharper boundaries at little cost.

    The top features (stride 4) upsampled and reduced to `width`, the backbone's stride-2 map
    reduced to `width` and the prompt maps at stride 2 are concatenated; a 3×3 ConvBN-ReLU and a
    zero-initialised 1×1 conv give a correction added to the upsampled coarse logits, so
    training starts from the coarse prediction. Returns logits f32[B, h2, w2].
    """

    width: int = 16

    @nn.compact
    def __call__(
        self, coarse: jax.Array, top: jax.Array, fine: jax.Array, maps: jax.Array, train: bool
    ) -> jax.Array:
        height, width = fine.shape[1:3]
        up = resize_to(Conv(self.width, (1, 1), name="reduce_top")(top), height, width)
        x = jnp.concatenate(
            [up, Conv(self.width, (1, 1), name="reduce_fine")(fine), maps.astype(up.dtype)],
            axis=-1,
        )
        x = ConvBN(self.width)(x, train)
        delta = Conv(1, (1, 1), kernel_init=nn.initializers.zeros, name="delta")(x)[..., 0]
        return upsample_logits(coarse, height, width) + delta


def adaptive_bins(length: int, out: int) -> list[tuple[int, int]]:
    """PyTorch-style adaptive pooling windows [start, end) for `length` -> `out` cells:
    start = floor(i * length / out), end = ceil((i + 1) * length / out). Every window is
    non-empty when out <= length; neighbouring windows may overlap by one element."""
    return [(i * length // out, -(-(i + 1) * length // out)) for i in range(out)]


def adaptive_max_pool(x: jax.Array, size: int) -> jax.Array:
    """Max-pool NHWC `x` to (min(size, H), min(size, W)) cells with PyTorch's adaptive bins
    (`adaptive_bins`), so every cell covers at least one input pixel. Shapes are static: the
    windows are unrolled Python slices (max over rows, then over columns)."""
    height, width = x.shape[1:3]
    out_h, out_w = min(size, height), min(size, width)
    if height % out_h == 0 and width % out_w == 0:  # equal windows: one reshape
        cells = x.reshape(x.shape[0], out_h, height // out_h, out_w, width // out_w, x.shape[3])
        return cells.max(axis=(2, 4))
    rows = jnp.stack([x[:, a:b].max(axis=1) for a, b in adaptive_bins(height, out_h)], axis=1)
    return jnp.stack([rows[:, :, a:b].max(axis=2) for a, b in adaptive_bins(width, out_w)], axis=2)


class MLP(nn.Module):
    """Dense-ReLU layers of `hidden` sizes then a linear layer with `out` units."""

    hidden: tuple[int, ...]
    out: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for units in self.hidden:
            x = nn.relu(nn.Dense(units)(x))
        return nn.Dense(self.out)(x)


class AuxHeads(nn.Module):
    """DIG multi-head branches on the top features: context (1 logit) and gesture kind (5).

    1x1 ConvBN-ReLU reduces to `reduce` channels, max-pool to `pool` x `pool`, flatten, then two
    MLPs (`hidden` then out). The paper uses reduce=48, pool=32, hidden=(1024, 512).
    """

    reduce: int = 48
    pool: int = 32
    hidden: tuple[int, ...] = (1024, 512)
    num_kinds: int = 5

    @nn.compact
    def __call__(self, top: jax.Array, train: bool) -> dict[str, jax.Array]:
        x = ConvBN(self.reduce, kernel=1)(top, train)
        x = adaptive_max_pool(x, self.pool)
        x = x.reshape(x.shape[0], -1)
        context = MLP(self.hidden, 1, name="context_mlp")(x)[:, 0]
        kind = MLP(self.hidden, self.num_kinds, name="kind_mlp")(x)
        return {"context": context, "kind": kind}


def upsample_logits(logits: jax.Array, height: int, width: int) -> jax.Array:
    """Bilinear resize of logits f32[B, h, w] to f32[B, height, width]."""
    return resize_to(logits[..., None], height, width)[..., 0]


class AltMasks(nn.Module):
    """Alternative masks for an ambiguous prompt (a creation click: part or whole?).

    Each of `count` masks is the main mask's logits (without gradient: the main mask keeps its
    own training) plus a correction from the top features (3×3 ConvBN-ReLU to `width`, then a
    1×1 conv whose kernel starts at zero and whose biases start at `offsets`), so that at
    initialisation they are the main mask grown a little and a lot (a click's mask is most
    often too small: docs/model_quality.md). top f32[B, h, w, C] (stride 4),
    main f32[B, H, W] -> f32[B, H, W, count].
    """

    count: int = 2
    width: int = 32
    offsets: tuple[float, ...] = (1.0, 3.0)

    @nn.compact
    def __call__(self, top: jax.Array, main: jax.Array, train: bool) -> jax.Array:
        if len(self.offsets) < self.count:
            raise ValueError(f"AltMasks needs {self.count} offsets, got {self.offsets}")
        offsets = jnp.asarray(self.offsets[: self.count], jnp.float32)
        x = ConvBN(self.width)(top, train)
        delta = Conv(
            self.count, (1, 1), kernel_init=nn.initializers.zeros,
            bias_init=lambda *_: offsets, name="delta",
        )(x)  # fmt: skip
        delta = resize_to(delta, *main.shape[1:3])
        return jax.lax.stop_gradient(main)[..., None] + delta.astype(main.dtype)


class MaskIoUHead(nn.Module):
    """Predicted IoU of each candidate mask with the object meant (SAM's IoU head, small).

    The top features and the candidates' logits at their resolution (squashed, no gradient)
    go through two stride-2 3×3 ConvBN-ReLU of `width`; the mean and max over the map, an MLP
    of `hidden`, one value per candidate. top f32[B, h, w, C], masks f32[B, H, W, K] (H, W
    multiples of h, w) -> f32[B, K].
    """

    width: int = 64
    hidden: int = 128

    @nn.compact
    def __call__(self, top: jax.Array, masks: jax.Array, train: bool) -> jax.Array:
        batch, height, width = top.shape[:3]
        count = masks.shape[-1]
        fh, fw = masks.shape[1] // height, masks.shape[2] // width
        small = masks.reshape(batch, height, fh, width, fw, count).mean(axis=(2, 4))
        squashed = jnp.tanh(jax.lax.stop_gradient(small) / 4.0).astype(top.dtype)
        x = jnp.concatenate([top, squashed], axis=-1)
        x = ConvBN(self.width, strides=2)(x, train)
        x = ConvBN(self.width, strides=2)(x, train)
        pooled = jnp.concatenate([x.mean(axis=(1, 2)), x.max(axis=(1, 2))], axis=-1)
        return MLP((self.hidden,), count)(pooled)


def ambiguous_prompt(x: jax.Array, min_fill: float = 0.6) -> jax.Array:
    """bool[B]: which prompts of the gesture-model input x f32[B, H, W, 6] (RGB | gesture |
    distance | prev) are a creation click: no previous mask and a gesture that is one solid
    blob at any size (crops scale the dot), filling at least `min_fill` of its bounding box
    (the brush's disc fills 0.67 of its 11 × 11 box, a stroke far less) and the whole middle
    third of it (an outline, however thick, leaves its middle empty). The same rule in
    training (which samples train the alternatives) and at inference (which choose)."""
    gesture = x[..., 3] > 0.5
    empty_prev = ~jnp.any(x[..., 5] > 0.5, axis=(1, 2))

    def bounds(marked: jax.Array) -> tuple[jax.Array, jax.Array]:
        index = jnp.arange(marked.shape[1])  # bool[B, N] -> span, bool[B, N] middle third
        first = jnp.min(jnp.where(marked, index, marked.shape[1]), axis=1)
        last = jnp.max(jnp.where(marked, index, -1), axis=1)
        span = jnp.maximum(last - first + 1, 0)
        middle = (index >= (first + span // 3)[:, None]) & (index <= (last - span // 3)[:, None])
        return span, middle

    height, rows = bounds(gesture.any(axis=2))
    width, cols = bounds(gesture.any(axis=1))
    area = gesture.sum(axis=(1, 2))
    middle = rows[:, :, None] & cols[:, None, :]
    solid = ~jnp.any(middle & ~gesture, axis=(1, 2))
    return empty_prev & (area > 0) & (area >= min_fill * height * width) & solid


def select_mask(outputs: dict[str, jax.Array], margin: float = 0.0) -> jax.Array:
    """f32[B, H, W]: for an ambiguous prompt, the candidate in outputs["masks"] f32[B, H, W, K]
    with the highest outputs["iou"] f32[B, K], an alternative only where its predicted IoU
    beats the main mask's by more than `margin`; otherwise the main mask (candidate 0)."""
    masks, iou = outputs["masks"], outputs["iou"]
    iou = iou.at[:, 0].add(margin)
    best = jnp.where(outputs["ambiguous"] > 0.5, jnp.argmax(iou, axis=-1), 0)
    return jnp.take_along_axis(masks, best[:, None, None, None], axis=-1)[..., 0]
