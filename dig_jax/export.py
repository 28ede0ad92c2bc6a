"""One self-describing file per trained segmenter: config (JSON) + variables (msgpack).

Layout: the magic line `DIGJAX-SEGMENTER 1\\n`, a little-endian uint64 byte length of the JSON
config, the JSON config, then `flax.serialization.msgpack_serialize` of the Flax variables
(params + batch_stats). `load_segmenter(path)` rebuilds the module from the config alone.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from flax import serialization

from dig_jax.gestures.types import Context, GestureKind
from dig_jax.models.interactive import build_segmenter, context_input, gesture_input, pad_input

MAGIC = b"DIGJAX-SEGMENTER 1\n"
STRIDE = 32  # inputs are padded (`pad_input`) to a multiple of the backbone's total stride


def save_segmenter(path: str | Path, variables: dict, config: Any) -> Path:
    """Write `variables` (Flax dict) and `config` (ConfigDict or dict) to one file at `path`."""
    path = Path(path)
    if isinstance(config, ml_collections.ConfigDict):
        config_json = config.to_json_best_effort()
    else:
        config_json = json.dumps(config)
    header = config_json.encode()
    payload = serialization.msgpack_serialize(
        jax.device_get(serialization.to_state_dict(variables))
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(MAGIC + struct.pack("<Q", len(header)) + header + payload)
    tmp.replace(path)
    return path


def _read(path: Path) -> tuple[ml_collections.ConfigDict, dict]:
    data = path.read_bytes()
    if not data.startswith(MAGIC):
        raise ValueError(f"path {path} is not a dig_jax segmenter file (bad magic bytes)")
    start = len(MAGIC) + 8
    (length,) = struct.unpack("<Q", data[len(MAGIC) : start])
    config = ml_collections.ConfigDict(json.loads(data[start : start + length].decode()))
    variables = serialization.msgpack_restore(data[start + length :])
    return config, variables


class LoadedSegmenter:
    """Inference wrapper: `predict(image, gesture_map, prev_mask=None) -> uint8[H, W]`."""

    def __init__(self, config: ml_collections.ConfigDict, variables: dict):
        self.config = config
        self.model = build_segmenter(config.model)
        self.variables = jax.tree.map(jnp.asarray, variables)
        self.input_kind: str = config.model.input_kind
        self._logits = jax.jit(self.predict_logits_fn())

    def predict_logits_fn(self):
        """Pure jnp function x f32[B, H, W, C] -> mask logits f32[B, H, W] (H, W any size that
        the backbone handles; multiples of 32 are exact)."""
        model, variables = self.model, self.variables

        def logits_fn(x: jax.Array) -> jax.Array:
            return model.apply(variables, x, train=False)["mask"]

        return logits_fn

    def make_input(
        self,
        image: Any,
        gesture_map: Any,
        prev_mask: Any = None,
        context: int = Context.ADD,
        kind: int | None = None,
    ) -> np.ndarray:
        """Model input f32[H, W, C] for one image uint8[H, W, 3] and gesture map {0,1}[H, W].

        `context` and `kind` (a GestureKind, None = unknown) are read by context models only:
        trained with skeleton clicks, they get a RECTANGLE in the box channel (as in training)
        and any other gesture as clicks; trained on gesture maps, they ignore `kind`.
        """
        image = np.asarray(image)
        gesture_map = (np.asarray(gesture_map) > 0).astype(np.uint8)
        if image.ndim != 3 or image.shape[2] != 3:
            raise ValueError(f"image must be uint8[H, W, 3], got shape {image.shape}")
        if gesture_map.shape != image.shape[:2]:
            raise ValueError(
                f"gesture_map must have shape {image.shape[:2]}, got {gesture_map.shape}"
            )
        if kind is not None and int(kind) not in set(GestureKind):
            raise ValueError(f"kind must be a GestureKind code 0..4 or None, got {kind!r}")
        prev = np.zeros_like(gesture_map) if prev_mask is None else np.asarray(prev_mask)
        if prev.shape != gesture_map.shape:
            raise ValueError(f"prev_mask must have shape {gesture_map.shape}, got {prev.shape}")
        prev = (prev == 1).astype(np.uint8)
        if self.input_kind == "gesture":
            from dig_jax.gestures import distance_map

            x = gesture_input(image, gesture_map, distance_map(gesture_map), prev)
        elif self.config.model.get("context_encoding", "gesture") == "clicks":
            from dig_jax.models.interactive import encode_context_clicks

            batch = {
                "gesture": gesture_map[None],
                "context": np.array([int(context)]),
                "gesture_kind": np.array([GestureKind.SCRIBBLE if kind is None else int(kind)]),
            }
            batch = encode_context_clicks(batch)
            x = context_input(
                image, batch["positive"][0], batch["negative"][0], batch["box"][0], prev
            )
        else:
            add = float(int(context) == Context.ADD)
            x = context_input(image, gesture_map * add, gesture_map * (1 - add), None, prev)
        return np.asarray(x)

    def predict(
        self,
        image: Any,
        gesture_map: Any,
        prev_mask: Any = None,
        context: int = Context.ADD,
        kind: int | None = None,
    ) -> np.ndarray:
        """Binary mask uint8[H, W] for one gesture (`context`, `kind`: see `make_input`)."""
        x = self.make_input(image, gesture_map, prev_mask, context, kind)[None]
        height, width = x.shape[1:3]
        logits = self._logits(jnp.asarray(pad_input(x, self.input_kind, STRIDE)))
        return (np.asarray(logits[0, :height, :width]) > 0).astype(np.uint8)


def load_segmenter(path: str | Path) -> LoadedSegmenter:
    """Load a file written by `save_segmenter` (e.g. `<workdir>/segmenter.digjax`)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"path {path} does not exist")
    return LoadedSegmenter(*_read(path))
