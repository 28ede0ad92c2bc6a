"""HRNet backbone (NHWC, Flax linen) with configurable widths and depths.

The default is HRNet-W18-small as used by interactive-segmentation "HRNet-18s" models: a
stride-4 stem (two 3x3 stride-2 convs, 64 channels), stage 1 with 2 bottlenecks, then stages
2/3/4 with 1/3/2 multi-resolution modules of 2 basic blocks per branch, branch widths
18/36/72/144 at strides 4/8/16/32. Block and module outputs pass through `materialize` (an
identity; it keeps XLA's CPU fusion from recomputing the residual chain in every consumer).
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from dig_jax.cpu import BatchNorm, Conv, materialize, relu

BN_MOMENTUM = 0.9
BN_EPSILON = 1e-5


def resize_to(x: jax.Array, height: int, width: int) -> jax.Array:
    """Bilinear resize of NHWC `x` to (height, width) (half-pixel centres)."""
    if x.shape[1:3] == (height, width):
        return x
    return jax.image.resize(x, (x.shape[0], height, width, x.shape[3]), method="bilinear")


class ConvBN(nn.Module):
    """Conv (no bias) + BatchNorm + optional ReLU (fused: `dig_jax.cpu.batchnorm`)."""

    features: int
    kernel: int = 3
    strides: int = 1
    relu: bool = True

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        x = Conv(
            self.features,
            (self.kernel, self.kernel),
            strides=(self.strides, self.strides),
            padding="SAME",
            use_bias=False,
        )(x)
        return BatchNorm(not train, BN_MOMENTUM, BN_EPSILON, relu=self.relu)(x)


class BasicBlock(nn.Module):
    """Two 3x3 ConvBN with an identity (or 1x1 projection) shortcut."""

    features: int

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        shortcut = x
        if x.shape[-1] != self.features:
            shortcut = ConvBN(self.features, kernel=1, relu=False)(x, train)
        y = ConvBN(self.features)(x, train)
        y = ConvBN(self.features, relu=False)(y, train)
        return materialize(relu(y + shortcut))


class Bottleneck(nn.Module):
    """1x1 -> 3x3 -> 1x1 (x4 expansion) bottleneck with projection shortcut when needed."""

    planes: int
    expansion: int = 4

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        out_features = self.planes * self.expansion
        shortcut = x
        if x.shape[-1] != out_features:
            shortcut = ConvBN(out_features, kernel=1, relu=False)(x, train)
        y = ConvBN(self.planes, kernel=1)(x, train)
        y = ConvBN(self.planes)(y, train)
        y = ConvBN(out_features, kernel=1, relu=False)(y, train)
        return materialize(relu(y + shortcut))


class HRModule(nn.Module):
    """One multi-resolution module: parallel branches of basic blocks, then full fusion."""

    widths: tuple[int, ...]
    blocks: int

    @nn.compact
    def __call__(self, xs: Sequence[jax.Array], train: bool) -> list[jax.Array]:
        branches = []
        for x, width in zip(xs, self.widths, strict=True):
            for _ in range(self.blocks):
                x = BasicBlock(width)(x, train)
            branches.append(x)
        fused = []
        for i, width_i in enumerate(self.widths):
            height, width = branches[i].shape[1:3]
            total = branches[i]
            for j, y in enumerate(branches):
                if j > i:  # lower resolution: 1x1 conv then upsample
                    y = ConvBN(width_i, kernel=1, relu=False)(y, train)
                    y = resize_to(y, height, width)
                elif j < i:  # higher resolution: (i - j) stride-2 3x3 convs
                    for k in range(i - j):
                        last = k == i - j - 1
                        y = ConvBN(width_i if last else self.widths[j], strides=2, relu=not last)(
                            y, train
                        )
                else:
                    continue
                total = total + y
            fused.append(materialize(relu(total)))
        return fused


class HRNet(nn.Module):
    """HRNet backbone. Input f32[B, H, W, C]; output list of 4 maps at strides 4, 8, 16, 32.

    `widths`: channels of the branches; `stage_modules`: modules in stages 2, 3, 4;
    `blocks`: blocks per branch in every module (and bottlenecks in stage 1).
    """

    widths: tuple[int, ...] = (18, 36, 72, 144)
    stem_width: int = 64
    stage1_planes: int = 64
    blocks: int = 2
    stage_modules: tuple[int, ...] = (1, 3, 2)

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> list[jax.Array]:
        if len(self.stage_modules) != len(self.widths) - 1:
            raise ValueError(
                f"stage_modules needs {len(self.widths) - 1} entries for {len(self.widths)} "
                f"widths, got {self.stage_modules}"
            )
        x = ConvBN(self.stem_width, strides=2)(x, train)
        x = ConvBN(self.stem_width, strides=2)(x, train)
        for _ in range(self.blocks):
            x = Bottleneck(self.stage1_planes)(x, train)
        xs = [x]
        for stage, modules in enumerate(self.stage_modules, start=2):
            widths = tuple(self.widths[:stage])
            xs = self._transition(xs, widths, train)
            for _ in range(modules):
                xs = HRModule(widths, self.blocks)(xs, train)
        return xs

    def _transition(self, xs: list[jax.Array], widths: tuple[int, ...], train: bool) -> list:
        """Adapt existing branches to `widths` and spawn one new half-resolution branch."""
        out = []
        for x, width in zip(xs, widths, strict=False):
            out.append(x if x.shape[-1] == width else ConvBN(width)(x, train))
        out.append(ConvBN(widths[len(xs)], strides=2)(xs[-1], train))
        return out


def fuse_multiscale(features: Sequence[jax.Array]) -> jax.Array:
    """Upsample every map to the first one's resolution and concatenate channels."""
    height, width = features[0].shape[1:3]
    return jnp.concatenate([resize_to(f, height, width) for f in features], axis=-1)
