"""One self-describing file per trained segmenter: config (JSON) + variables (msgpack).

Layout: the magic line `DIGJAX-SEGMENTER 1\\n`, a little-endian uint64 byte length of the JSON
config, the JSON config, then `flax.serialization.msgpack_serialize` of the Flax variables
(params + batch_stats). `load_segmenter(path)` rebuilds the module from the config alone.
The JSON header also holds `sha256`, the SHA-256 of the config (as sorted-key JSON) and the
weights bytes, checked at load (files written before it existed have none and load unchecked).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import struct
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from flax import serialization

from dig_jax import prompts
from dig_jax.cpu import predict_compiler_options, release_freed_memory
from dig_jax.gestures.types import Context, GestureKind
from dig_jax.models.heads import select_mask
from dig_jax.models.interactive import build_segmenter, flip_averaged

MAGIC = b"DIGJAX-SEGMENTER 1\n"
CHECKSUM_KEY = "sha256"  # in the JSON header, beside the config: see `checksum`


def save_segmenter(path: str | Path, variables: dict, config: Any) -> Path:
    """Write `variables` (Flax dict) and `config` (ConfigDict or dict) to one file at `path`."""
    path = Path(path)
    if isinstance(config, ml_collections.ConfigDict):
        config = json.loads(config.to_json_best_effort())
    state = jax.device_get(serialization.to_state_dict(variables))
    if not _all_finite(state):
        raise ValueError(f"refusing to export {path}: the variables hold NaN or Inf")
    payload = serialization.msgpack_serialize(state)
    header = json.dumps({**dict(config), CHECKSUM_KEY: checksum(dict(config), payload)}).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(MAGIC + struct.pack("<Q", len(header)) + header + payload)
    tmp.replace(path)
    return path


def checksum(config: dict, payload: bytes) -> str:
    """SHA-256 (hex) of the config as sorted-key JSON, a zero byte, and the weights bytes."""
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode() + b"\0" + payload).hexdigest()


def _all_finite(tree: Any) -> bool:
    """True when no floating-point leaf of `tree` holds NaN or Inf."""
    leaves = (np.asarray(x) for x in jax.tree.leaves(tree))
    return all(np.isfinite(x).all() for x in leaves if np.issubdtype(x.dtype, np.inexact))


def _read(path: Path) -> tuple[ml_collections.ConfigDict, dict]:
    """(config, variables) of a segmenter file; ValueError naming `path` for a foreign,
    truncated or corrupt file."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ValueError(f"path {path} cannot be read ({error})") from None
    if not data.startswith(MAGIC):
        raise ValueError(f"path {path} is not a dig_jax segmenter file (bad magic bytes)")
    start = len(MAGIC) + 8
    if len(data) < start:
        raise ValueError(f"path {path} is a truncated segmenter file (header cut short)")
    (length,) = struct.unpack("<Q", data[len(MAGIC) : start])
    if start + length >= len(data):
        raise ValueError(f"path {path} is a truncated segmenter file (config or weights missing)")
    try:
        header = json.loads(data[start : start + length].decode())
        stored = header.pop(CHECKSUM_KEY, None)
        config = ml_collections.ConfigDict(header)
    except (ValueError, TypeError, AttributeError, RecursionError) as error:
        raise ValueError(f"path {path}: the config header is not a JSON object ({error})") from None
    payload = data[start + length :]
    if stored is not None and checksum(header, payload) != stored:
        raise ValueError(
            f"path {path}: the config and weights do not match their checksum (the file is corrupt)"
        )
    try:
        variables = serialization.msgpack_restore(payload)
    except Exception as error:  # msgpack raises its own types for cut or damaged data
        raise ValueError(
            f"path {path}: the weights cannot be decoded, the file is truncated or corrupt "
            f"({type(error).__name__})"
        ) from None
    if not isinstance(variables, dict) or not isinstance(variables.get("params"), dict):
        raise ValueError(f"path {path}: the weights are not a Flax variables dict with 'params'")
    return config, variables


def load_variables(path: str | Path) -> dict:
    """The Flax variables (params + batch_stats) of a segmenter file, e.g. to start training
    from it (`config.init_from`); ValueError naming `path` for a bad file."""
    path = Path(path)
    _, variables = _read(path)
    if not _all_finite(variables):
        raise ValueError(f"path {path}: the weights hold NaN or Inf")
    return variables


def _check_variables(path: Path, segmenter: LoadedSegmenter) -> None:
    """ValueError naming `path` unless the weights are finite (a diverged run's NaN must not
    turn into 0.000 scores) and fit the model the config builds. The fit is checked by tracing
    the jitted logits function once at batch 1 (the trace `predict` reuses)."""
    if not _all_finite(segmenter.variables):
        raise ValueError(
            f"path {path}: the weights hold NaN or Inf (a diverged or corrupted training run)"
        )
    x = jax.ShapeDtypeStruct(
        (1, segmenter.size, segmenter.size, segmenter.model.in_channels), jnp.float32
    )
    expected = _variable_paths(segmenter.config.model.to_json_best_effort(), segmenter.size)
    extra = sorted(set(_key_paths(segmenter.variables)) - expected)
    if extra:
        more = f" and {len(extra) - 4} more" if len(extra) > 4 else ""
        raise ValueError(
            f"path {path}: the weights hold entries the model does not use: "
            f"{', '.join(extra[:4])}{more}"
        )
    try:
        segmenter._logits_jit.trace(segmenter.variables, x)
    except Exception as error:  # flax names the first parameter whose shape or name differs
        message = str(error).strip().splitlines()[0][:300] if str(error) else ""
        raise ValueError(
            f"path {path}: the weights do not fit the model its config describes "
            f"({type(error).__name__}: {message})"
        ) from None


@functools.lru_cache(maxsize=16)
def _variable_paths(model_json: str, size: int) -> frozenset[str]:
    """The key paths of the variables the model of `model_json` creates (shapes only, no
    compute; cached since tracing `init` of a full model takes about a second)."""
    model = build_segmenter(ml_collections.ConfigDict(json.loads(model_json)))
    x = jax.ShapeDtypeStruct((1, size, size, model.in_channels), jnp.float32)
    return frozenset(
        _key_paths(jax.eval_shape(functools.partial(model.init, train=False), jax.random.key(0), x))
    )


def _key_paths(tree: Any) -> list[str]:
    """'/'-joined key path of every leaf of a nested dict."""
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return ["/".join(str(getattr(k, "key", k)) for k in path) for path, _ in leaves]


def _finite(logits: np.ndarray) -> np.ndarray:
    if not np.isfinite(logits).all():
        raise FloatingPointError("the segmenter produced NaN/Inf logits (corrupt weights?)")
    return logits


class LoadedSegmenter:
    """Inference wrapper: `predict(image, gesture_map, prev_mask=None) -> uint8[H, W]` on a
    photo of any size.

    Every prompt goes through `dig_jax.prompts`: the zoom box of the gesture (and previous
    mask) is resampled to the working size S = `config.image_size`, the network runs once on
    that S×S crop (compiled once per batch size), and its logits are pasted back onto the photo.
    """

    def __init__(self, config: ml_collections.ConfigDict, variables: dict):
        if "model" not in config or "image_size" not in config:
            raise ValueError("segmenter config needs 'model' and 'image_size' (working size)")
        size = config.image_size
        if isinstance(size, bool) or not isinstance(size, int) or size < 32 or size % 32:
            raise ValueError(f"image_size must be a positive multiple of 32 (px), got {size!r}")
        self.config = config
        self.model = build_segmenter(config.model)
        self.variables = jax.tree.map(jnp.asarray, variables)
        self.input_kind: str = config.model.input_kind
        self.size: int = int(config.image_size)
        # trained in the paper mode: the whole photo resized, no zoom-in and no focus pass
        self.paper_mode: bool = bool(config.get("data", {}).get("paper_mode", False))
        # a creation click's first-pass size and the focus pass (`prompts.Passes`)
        self.passes = prompts.Passes.from_config(config, self.paper_mode)
        self.focus_pass: bool = self.passes.focus
        # candidate masks for a creation click (`model.num_masks` > 1): the pipeline says
        # which prompts are creation clicks, on the photo (`prompts.creation_click`)
        self.candidates: bool = int(config.model.get("num_masks", 1)) > 1
        # an alternative candidate is chosen only where its predicted IoU is this much higher
        margin = (config.get("predict", None) or {}).get("candidate_margin", 0.0)
        if isinstance(margin, bool) or not isinstance(margin, int | float) or not 0 <= margin <= 1:
            raise ValueError(f"predict.candidate_margin must be a number in [0, 1], got {margin!r}")
        self.candidate_margin = float(margin)
        self._logits_fn = self._make_logits_fn()
        # XLA options for its jits (and for callers that jit `predict_logits_fn` themselves)
        self.compiler_options: dict[str, str] = predict_compiler_options()
        options = self.compiler_options or None
        # The weights are arguments of the compiled network, not constants inside it: XLA
        # compiles a program of a few kB instead of one holding every weight (31 MB of HLO
        # text for HRNet-18s), its compile peaks 24 MiB lower (HRNet-18s at batch 1 x 512²)
        # at the same speed (alternating calls, 2026-12-03).
        self._logits_jit = jax.jit(self.apply_logits, compiler_options=options)
        self._outputs_jit = jax.jit(self.apply_outputs, compiler_options=options)
        # The host copies the weights came from are garbage now: on jemalloc (the entry
        # points' allocator, which keeps freed pages) hand their pages back before compiling.
        release_freed_memory()

    def apply_logits(
        self, variables: dict, x: jax.Array, creation: jax.Array | None = None
    ) -> jax.Array:
        """Pure: mask logits f32[B, S, S] of the network with `variables` on the model input
        f32[B, S, S, C] (for callers that jit it with the weights as an argument)."""
        return self.apply_outputs(variables, x, creation)["mask"]

    def apply_outputs(
        self, variables: dict, x: jax.Array, creation: jax.Array | None = None
    ) -> dict[str, jax.Array]:
        """Pure: every head's output of the network with `variables` on x f32[B, S, S, C]
        (averaged over the left-right flip with `predict.flip`). `creation` f32[B] (1 = a
        creation click on the photo) decides which prompts of a candidate-mask model choose
        among their candidates; None leaves it to the network's own test on the crop
        (`models.heads.ambiguous_prompt`), which a crop without the previous mask fools."""
        apply = functools.partial(self.model.apply, variables, train=False)
        out = flip_averaged(apply, x) if self.passes.flip else apply(x)
        if creation is not None and "masks" in out:
            out = {**out, "ambiguous": jnp.asarray(creation, jnp.float32)}
            out["mask"] = select_mask(out, self.candidate_margin)
        return out

    def _logits(self, x: Any, creation: Any = None) -> jax.Array:
        return self._logits_jit(self.variables, x, creation)

    def _outputs(self, x: Any, creation: Any = None) -> dict[str, jax.Array]:
        return self._outputs_jit(self.variables, x, creation)

    def logits(self, x: Any, creation: Any = None) -> jax.Array:
        """Jitted network: model input f32[B, S, S, C] -> mask logits f32[B, S, S]
        (`creation`: see `apply_outputs`)."""
        return self._logits(x, creation)

    def predict_logits_fn(self):
        """Pure jnp function x f32[B, H, W, C] -> mask logits f32[B, H, W] (H, W multiples of
        32; the working size S is what the model was trained at). The same function object on
        every call, so the attacks' compile caches (keyed on it) hit across calls."""
        return self._logits_fn

    def _make_logits_fn(self):
        apply_logits, variables = self.apply_logits, self.variables

        def logits_fn(x: jax.Array) -> jax.Array:
            return apply_logits(variables, x)

        return logits_fn

    def crop_input(
        self,
        crop: dict[str, np.ndarray],
        context: int = Context.ADD,
        kind: int | None = None,
    ) -> np.ndarray:
        """Model input f32[S, S, C] from one zoom crop (`dig_jax.prompts.crop_input`, with this
        checkpoint's input kind and context encoding). `context` and `kind` (a GestureKind,
        None = unknown) are read by context models only."""
        encoding = self.config.model.get("context_encoding", "gesture")
        return prompts.crop_input(crop, self.input_kind, encoding, context, kind)

    def prepare(
        self, image: Any, gesture_map: Any, prev_mask: Any = None
    ) -> tuple[dict[str, np.ndarray], prompts.ZoomBox, tuple[int, int]]:
        """Checked inputs -> (S×S crop dict, its zoom box, the photo's (H, W))."""
        image, gesture_map, prev = prompts.check_prompt(image, gesture_map, prev_mask)
        box = prompts.prompt_box(gesture_map, prev, self.size, self.paper_mode)
        return prompts.crop_prompt(image, gesture_map, prev, box, self.size), box, image.shape[:2]

    def _run(self, image, gesture_map, prev_mask, context, kind, heads: bool = False):
        """The one path of every prediction: check, zoom, a network run on the crop (and the
        focus pass's second one: `prompts.Passes`). Returns (network outputs with crop logits
        "mask" f32[s, s] at the last run's size s, crop, box, prev, shape)."""
        if kind is not None and int(kind) not in set(GestureKind):
            raise ValueError(f"kind must be a GestureKind code 0..4 or None, got {kind!r}")
        image, gesture_map, prev = prompts.check_prompt(image, gesture_map, prev_mask)
        box = prompts.prompt_box(gesture_map, prev, self.size, self.paper_mode)
        size = self.passes.first_size(gesture_map, prev)
        crop = prompts.crop_prompt(image, gesture_map, prev, box, size)
        creation = prompts.creation_click(gesture_map, prev) if self.candidates else None
        out = self._network(crop, context, kind, heads, creation)
        focus = (
            prompts.refocus_box(gesture_map, prev, box, out["mask"], image.shape[:2], self.size)
            if self.focus_pass
            else None
        )
        if focus is not None:
            box, crop = focus, prompts.crop_prompt(image, gesture_map, prev, focus, self.size)
            out = self._network(crop, context, kind, heads, creation)
        rescue = self._rescue_box(gesture_map, prev, box, out["mask"], crop, image.shape[:2])
        if rescue is not None:
            box, crop = rescue, prompts.crop_prompt(image, gesture_map, prev, rescue, self.size)
            out = self._network(crop, context, kind, heads, creation)
        return out, crop, box, prev, image.shape[:2]

    def _rescue_box(self, gesture_map, prev, box, logits, crop, shape) -> prompts.ZoomBox | None:
        """The rescue pass's box (`prompts.Passes.rescue`), or None (off, or not due)."""
        if not self.passes.rescue_due(gesture_map, prev):
            return None
        mask = prompts.paste_mask(logits, box, shape, prev, crop["prev_mask"])
        return self.passes.rescue(gesture_map, prev, box, mask)

    def _network(
        self, crop: dict, context: int, kind: int | None, heads: bool, creation: bool | None
    ) -> dict:
        """The network's outputs on one crop (numpy, batch axis dropped; finite logits).
        `creation`: whether the prompt is a creation click (candidate-mask models), or None."""
        x = jnp.asarray(self.crop_input(crop, context, kind)[None])
        args = (x,) if creation is None else (x, jnp.asarray([float(creation)], jnp.float32))
        out = dict(self._outputs(*args)) if heads else {"mask": self._logits(*args)}
        out = {k: np.asarray(v)[0] for k, v in out.items()}
        out["mask"] = _finite(out["mask"])
        return out

    def predict_logits(self, *prompt: Any, **options: Any) -> np.ndarray:
        """Mask logits f32[H, W] on the photo for `predict`'s arguments (outside the zoom box:
        `prompts.OUTSIDE_LOGIT`). `predict` cuts them at 0, or at `predict.open_threshold` for
        an open creation prompt (`prompts.Passes.cut`)."""
        call = inspect.signature(self.predict).bind(*prompt, **options)
        call.apply_defaults()
        out, _, box, _, shape = self._run(*call.arguments.values())
        return prompts.paste_logits(out["mask"], box, shape)

    def predict_heads(self, image: Any, gesture_map: Any, prev_mask: Any = None) -> dict[str, Any]:
        """One run of the whole network on a prompt: {"mask": what `predict` returns, "logits":
        what `predict_logits` returns, "context": logit of ADD (float) and "kind": f32[5]
        logits in GestureKind order — both None when the checkpoint has no such heads
        (`config.model.multihead` false)}."""
        out, crop, box, prev, shape = self._run(image, gesture_map, prev_mask, Context.ADD, None,
                                                heads=True)  # fmt: skip
        cut = self.passes.cut(gesture_map, prev)
        mask = prompts.paste_mask(out["mask"], box, shape, prev, crop["prev_mask"], cut)
        mask = self.passes.obeyed(gesture_map, prev, mask, out["mask"], box)
        result = {
            "mask": self.passes.merged(gesture_map, prev, mask),
            "logits": prompts.paste_logits(out["mask"], box, shape),
            "context": None,
            "kind": None,
        }
        if "context" in out:
            result["context"] = float(out["context"])
            result["kind"] = np.asarray(out["kind"], np.float32)
        return result

    def predict(
        self,
        image: Any,
        gesture_map: Any,
        prev_mask: Any = None,
        context: int = Context.ADD,
        kind: int | None = None,
    ) -> np.ndarray:
        """Binary mask uint8[H, W] for one gesture on a photo of any size.

        image: uint8[H, W, 3] RGB. gesture_map: [H, W], nonzero = marked (bool, {0,1} or
        {0,255}). prev_mask: None (creation) or [H, W] read the same way; the model decides
        what changes, and the rest keeps the previous mask's own pixels (`prompts.paste_mask`).
        `context`, `kind`: for context baselines only (see `crop_input`).
        """
        out, crop, box, prev, shape = self._run(image, gesture_map, prev_mask, context, kind)
        cut = self.passes.cut(gesture_map, prev)
        mask = prompts.paste_mask(out["mask"], box, shape, prev, crop["prev_mask"], cut)
        mask = self.passes.obeyed(gesture_map, prev, mask, out["mask"], box)
        return self.passes.merged(gesture_map, prev, mask)


def load_segmenter(path: str | Path) -> LoadedSegmenter:
    """Load a file written by `save_segmenter` (e.g. `<workdir>/segmenter.digjax`)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"path {path} does not exist")
    config, variables = _read(path)
    try:
        segmenter = LoadedSegmenter(config, variables)
    except (KeyError, AttributeError, TypeError, ValueError) as error:
        raise ValueError(
            f"path {path}: the config does not describe a segmenter ({error})"
        ) from None
    _check_variables(path, segmenter)
    return segmenter
