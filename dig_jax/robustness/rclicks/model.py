"""Learned clickability model (CM): image + target mask + error mask in, one map out.

RClicks trains a SegNeXt segmenter (MSCAN backbone, 2 extra input channels) with a KL loss;
here a small pure-Flax U-Net stands in for it (a choice: no pretrained backbone can be fetched
and it trains on CPU). The network sees the photo resized to `size`×`size` (aspect not kept;
the reference letterboxes to 416 px), RGB normalised with the ImageNet mean/std, plus the
target and error masks, and returns logits f32[B, S, S]; the map is their softmax over pixels.
`predict_map` resizes the map back to the photo, restricts it to the error and renormalises —
what the reference clicker does with the model's output. Saved as one file: a magic line, the
JSON config and the msgpack of the parameters (like `dig_jax.export`).
"""

from __future__ import annotations

import dataclasses
import json
import struct
from pathlib import Path
from typing import Any

import cv2
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax import serialization

from dig_jax.cpu import Conv, init_compiler_options
from dig_jax.robustness.rclicks.maps import as_mask, check_image, normalize

MAGIC = b"DIGJAX-CLICKABILITY 1\n"
MEAN_RGB = np.array([0.485, 0.456, 0.406], np.float32)
STD_RGB = np.array([0.229, 0.224, 0.225], np.float32)
DEFAULT_FEATURES = (16, 32, 64)


class ClickabilityNet(nn.Module):
    """U-Net: x f32[B, S, S, 5] (normalised RGB, target, error) -> logits f32[B, S, S]; S must
    be divisible by 2 ** (len(features) - 1)."""

    features: tuple[int, ...] = DEFAULT_FEATURES

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        def block(h: jax.Array, width: int) -> jax.Array:
            h = nn.gelu(Conv(width, (3, 3))(h))
            return nn.gelu(Conv(width, (3, 3))(h))

        skips = []
        for level, width in enumerate(self.features):
            x = block(x, width)
            if level < len(self.features) - 1:
                skips.append(x)
                x = nn.avg_pool(x, (2, 2), (2, 2))
        for width, skip in zip(reversed(self.features[:-1]), reversed(skips), strict=True):
            x = jax.image.resize(x, (*skip.shape[:-1], x.shape[-1]), "nearest")
            x = block(jnp.concatenate([x, skip], axis=-1), width)
        return Conv(1, (1, 1))(x)[..., 0]


def model_input(image: Any, gt: Any, error: Any, size: int) -> np.ndarray:
    """f32[S, S, 5] network input from one photo uint8[H, W, 3] and masks [H, W]."""
    image = check_image(image)
    gt = as_mask(gt, "gt", image.shape[:2])
    error = as_mask(error, "error", image.shape[:2])
    resize = lambda a: cv2.resize(a, (size, size), interpolation=cv2.INTER_AREA)
    rgb = (resize(image).astype(np.float32) / 255.0 - MEAN_RGB) / STD_RGB
    masks = [resize(m.astype(np.float32))[..., None] for m in (gt, error)]
    return np.concatenate([rgb, *masks], axis=-1)


def check_size(size: int, features: tuple[int, ...]) -> int:
    """`size` if it is a positive multiple of the U-Net's stride, else ValueError."""
    stride = 2 ** (len(features) - 1)
    if int(size) < stride or int(size) % stride:
        raise ValueError(f"size must be a positive multiple of {stride}, got {size}")
    return int(size)


@dataclasses.dataclass(frozen=True, eq=False)
class ClickabilityModel:
    """A trained CM: `size` (working side, px), `features` (U-Net widths) and `params`."""

    size: int
    features: tuple[int, ...]
    params: Any

    def __post_init__(self) -> None:
        check_size(self.size, self.features)
        net = ClickabilityNet(tuple(self.features))
        object.__setattr__(self, "_logits", jax.jit(lambda p, x: net.apply(p, x)))

    def logits(self, x: Any) -> jax.Array:
        """Logits f32[B, S, S] for network inputs f32[B, S, S, 5]."""
        return self._logits(self.params, jnp.asarray(x, jnp.float32))

    def predict_map(self, image: Any, gt: Any, error: Any) -> np.ndarray:
        """The clickability map float32[H, W] of `error` on `image`: softmax over the S×S
        pixels, resized to the photo, times the error, renormalised (zeros if no error)."""
        x = model_input(image, gt, error, self.size)
        logits = np.asarray(self.logits(x[None]))[0].astype(np.float64)
        prob = np.exp(logits - logits.max())
        h, w = np.shape(error)
        prob = cv2.resize(prob.astype(np.float32), (w, h), interpolation=cv2.INTER_LINEAR)
        return normalize(np.clip(prob, 0, None) * as_mask(error, "error"))


def init_clickability(
    key: jax.Array, size: int = 64, features: tuple[int, ...] = DEFAULT_FEATURES
) -> ClickabilityModel:
    """An untrained model with parameters initialised from `key`.

    One compiled init at LLVM -O1 (`init_compiler_options`), not Flax's op-by-op init: its
    truncated-normal draws compiled once per kernel shape (~23 s against ~4 s for the
    notebook's one-level U-Net on 2 cores); the same bits in the configurations tested."""
    features = tuple(int(f) for f in features)
    size = check_size(size, features)
    init = jax.jit(ClickabilityNet(features).init, compiler_options=init_compiler_options())
    params = init(key, jnp.zeros((1, size, size, 5), jnp.float32))
    return ClickabilityModel(size, features, params)


def save_clickability(path: str | Path, model: ClickabilityModel) -> Path:
    """Write `model` to one file at `path` (see module docstring)."""
    path = Path(path)
    header = json.dumps({"size": model.size, "features": list(model.features)}).encode()
    payload = serialization.msgpack_serialize(jax.device_get(model.params))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(MAGIC + struct.pack("<Q", len(header)) + header + payload)
    tmp.replace(path)
    return path


def load_clickability(path: str | Path) -> ClickabilityModel:
    """Read a file written by `save_clickability`."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"path {path} does not exist")
    data = path.read_bytes()
    if not data.startswith(MAGIC):
        raise ValueError(f"path {path} is not a clickability model file (bad magic bytes)")
    start = len(MAGIC) + 8
    try:
        (length,) = struct.unpack("<Q", data[len(MAGIC) : start])
        if start + length > len(data):
            raise ValueError("the header runs past the end of the file")
        config = json.loads(data[start : start + length].decode())
        params = serialization.msgpack_restore(data[start + length :])
        if not isinstance(params, dict):
            raise ValueError("the weights are not a parameter dict")
        size, features = int(config["size"]), tuple(config["features"])
    except (struct.error, ValueError, TypeError, KeyError, RecursionError) as error:
        raise ValueError(
            f"path {path} is a truncated or corrupt clickability model file ({error})"
        ) from None
    _check_params(path, params, size, features)
    return ClickabilityModel(size, features, jax.tree.map(jnp.asarray, params))


def _check_params(path: Path, params: dict, size: int, features: tuple[int, ...]) -> None:
    """ValueError naming `path` unless `params` are finite and exactly (names and shapes)
    the parameters of the network the header describes."""
    try:
        features = tuple(int(f) for f in features)
        size = check_size(size, features)
        x = jax.ShapeDtypeStruct((1, size, size, 5), jnp.float32)
        expected = jax.eval_shape(ClickabilityNet(features).init, jax.random.key(0), x)
    except (TypeError, ValueError) as error:
        raise ValueError(f"path {path}: the header does not describe a network ({error})") from None
    shapes = {jax.tree_util.keystr(k): np.shape(v) for k, v in _leaves(params)}
    wanted = {jax.tree_util.keystr(k): tuple(v.shape) for k, v in _leaves(expected)}
    if shapes != wanted:
        differ = sorted(set(shapes.items()) ^ set(wanted.items()))[:4]
        raise ValueError(f"path {path}: the weights do not fit the network: {differ}")
    leaves = [np.asarray(v) for _, v in _leaves(params)]
    if not all(v.dtype.kind == "f" and np.isfinite(v).all() for v in leaves):
        raise ValueError(f"path {path}: the weights hold NaN, Inf or non-float values")


def _leaves(tree: Any) -> list:
    return jax.tree_util.tree_flatten_with_path(tree)[0]
