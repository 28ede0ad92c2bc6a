"""Predictors over samples at their own resolution, and the context strategies of the adapted
baselines.

A predictor maps a list of samples (Sample dicts, each at its photo's own size) to binary
masks uint8[H, W], one per sample. `segmenter_predictor` zooms every prompt into the model's
working size (`dig_jax.prompts`, exactly as `predict` does), runs the crops in batches and
pastes the logits back. Gesture-agnostic models see only the gesture. Context baselines must
also be told add/remove; DIG compares them with the context given by a strategy:
  oracle   — the true context of the sample (an upper bound no real user interface offers),
  positive — always ADD, negative — always REMOVE, random — a fair coin per click (skeleton
  clicks) or per gesture (gestures read whole).
Context baselines read a gesture as they were trained (`model.context_encoding`), or, by
`gesture_encoding`, as skeleton clicks ("clicks") or as its bounding box ("box").
Classical peers (GrabCut, the filled gesture) are in `dig_jax.evaluation.peers`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dig_jax import prompts
from dig_jax.prompts.encode import (  # noqa: F401  (re-exported: evaluation's public names)
    CONTEXT_STRATEGIES,
    GESTURE_ENCODINGS,
    apply_context_strategy,
)

Predictor = Callable[[Sequence[dict[str, Any]]], list[np.ndarray]]


def zoom_crops(
    samples: Sequence[dict[str, Any]],
    size: int,
    boxes: Sequence[Any] | None = None,
    paper_mode: bool = False,
) -> tuple[dict, list]:
    """The samples' prompts in their zoom crops (or in the given `boxes`; `paper_mode`: the
    whole photo resized to S×S), stacked: (batch dict of uint8[B, S, S(, 3)] maps + context +
    gesture_kind, [(box, (H, W)), ...])."""
    crops, places = [], []
    for n, sample in enumerate(samples):
        prev = sample["prev_mask"] if bool(sample["has_prev"]) else None
        image, gesture, prev = prompts.check_prompt(sample["image"], sample["gesture"], prev)
        box = prompts.prompt_box(gesture, prev, size, paper_mode) if boxes is None else boxes[n]
        crop = prompts.crop_prompt(image, gesture, prev, box, size)
        crop["context"] = np.int32(sample["context"])
        crop["gesture_kind"] = np.int32(sample["gesture_kind"])
        crops.append(crop)
        places.append((box, image.shape[:2]))
    batch = {k: np.stack([np.asarray(c[k]) for c in crops]) for k in crops[0]}
    return batch, places


@dataclasses.dataclass(frozen=True)
class ModelView:
    """What `segmenter_predictor` needs of a segmenter, for a model that is not a loaded file
    (e.g. the training loop's current state): its config (`model`, `image_size`) and a jitted
    `logits` function x f32[B, S, S, C] -> f32[B, S, S]."""

    config: Any
    logits: Callable[[Any], Any]

    @property
    def input_kind(self) -> str:
        return self.config.model.input_kind

    @property
    def size(self) -> int:
        return int(self.config.image_size)


def segmenter_predictor(
    segmenter: Any,
    *,
    context_strategy: str = "oracle",
    gesture_encoding: str = "model",
    seed: int = 0,
    batch_size: int = 8,
    paper_mode: bool | None = None,
) -> Predictor:
    """Predictor for a `dig_jax.load_segmenter(...)` object or a `ModelView` (gesture or
    context input).

    `paper_mode`: as the DIG paper runs its models (§16.1, §16.3): the whole photo resized to
    the working size S×S (aspect ratio not kept), no zoom-in crop and no focus pass; the
    logits are resized back onto the photo (no previous-mask keeping either). None: as the
    model was trained (`config.data.paper_mode`, False when absent).

    `gesture_encoding` (context models only): "model" = as trained (`model.context_encoding`),
    "clicks" = skeleton clicks (`encode_context_clicks`, adding rectangles in the box channel),
    "box" = every gesture's bounding box in the box channel (`encode_context_box`).
    The network sees batches of at most `batch_size` crops, padded to a power of two (so it
    compiles for a few shapes only and wastes little on short chunks).
    """
    if gesture_encoding not in GESTURE_ENCODINGS:
        raise ValueError(
            f"gesture_encoding must be one of {GESTURE_ENCODINGS}, got {gesture_encoding!r}"
        )
    input_kind = segmenter.input_kind
    if input_kind != "context" and gesture_encoding != "model":
        raise ValueError(
            f"gesture_encoding={gesture_encoding!r} needs a context model, got {input_kind!r}"
        )
    if gesture_encoding == "model":
        trained = segmenter.config.model.get("context_encoding", "gesture")
        gesture_encoding = "clicks" if trained == "clicks" else "gesture"
    if paper_mode is None:
        paper_mode = bool(segmenter.config.get("data", {}).get("paper_mode", False))
    rng = np.random.default_rng(seed)
    if hasattr(segmenter, "logits"):  # already jitted (a loaded segmenter, a ModelView)
        logits_fn = segmenter.logits
    else:
        options = getattr(segmenter, "compiler_options", None) or None
        logits_fn = jax.jit(segmenter.predict_logits_fn(), compiler_options=options)

    candidates = bool(getattr(segmenter, "candidates", False))

    def network(batch: dict[str, np.ndarray], creation: list[bool]) -> np.ndarray:
        """Crop logits for a batch of crops; `creation`: which prompts are creation clicks on
        the photo (read by candidate-mask models only)."""
        x = prompts.model_input(
            batch, input_kind, gesture_encoding, strategy=context_strategy, rng=rng
        )
        n = len(x)
        padded = min(batch_size, 1 << (n - 1).bit_length())  # few shapes, little waste
        if n < padded:
            x = np.concatenate([x, np.repeat(x[-1:], padded - n, axis=0)])
        if candidates:
            flags = np.zeros(len(x), np.float32)
            flags[:n] = creation
            logits = np.asarray(logits_fn(jnp.asarray(x), jnp.asarray(flags)))[:n]
        else:
            logits = np.asarray(logits_fn(jnp.asarray(x)))[:n]
        if not np.isfinite(logits).all():
            raise FloatingPointError("the segmenter produced NaN/Inf logits (corrupt weights?)")
        return logits

    passes = prompts.Passes.from_config(segmenter.config, paper_mode, segmenter.size)

    def run(chunk, size, boxes=None) -> list[tuple]:
        """One batched network run: [(crop logits f32[s, s], box, (H, W), prev crop), ...]."""
        batch, places = zoom_crops(chunk, size, boxes, paper_mode=paper_mode)
        creation = [  # read by candidate-mask models only
            candidates
            and prompts.creation_click(s["gesture"], s["prev_mask"] if s["has_prev"] else None)
            for s in chunk
        ]
        logits = network(batch, creation)
        return [(logits[i], *places[i], batch["prev_mask"][i]) for i in range(len(chunk))]

    def first_runs(chunk) -> list[tuple]:
        """Every prompt's first run, grouped by its working size (`prompts.Passes`)."""
        boxes, sizes = [], []
        for sample in chunk:
            prev = sample["prev_mask"] if bool(sample["has_prev"]) else None
            _, gesture, prev = prompts.check_prompt(sample["image"], sample["gesture"], prev)
            box = prompts.prompt_box(gesture, prev, passes.size, paper_mode)
            boxes.append(box)
            sizes.append(passes.first_size(gesture, prev))
        results = [None] * len(chunk)
        for size in sorted(set(sizes)):
            idx = [i for i, s in enumerate(sizes) if s == size]
            done = run([chunk[i] for i in idx], size, [boxes[i] for i in idx])
            for i, result in zip(idx, done, strict=True):
                results[i] = result
        return results

    def refocused(chunk, results) -> list[tuple]:
        """The focus pass (`prompts.refocus_box`) for the chunk's whole-image creations: their
        results replaced by a second run at the working size on the first mask's box."""
        boxes = {}
        for i, (logits, box, shape, _) in enumerate(results):
            prev = chunk[i]["prev_mask"] if bool(chunk[i]["has_prev"]) else None
            focus = prompts.refocus_box(chunk[i]["gesture"], prev, box, logits, shape, passes.size)
            if focus is not None:
                boxes[i] = focus
        if not boxes:
            return results
        again = run([chunk[i] for i in boxes], passes.size, list(boxes.values()))
        results = list(results)
        for i, result in zip(boxes, again, strict=True):
            results[i] = result
        return results

    def pasted(sample, result) -> np.ndarray:
        crop_logits, box, shape, prev_crop = result
        keep = bool(sample["has_prev"]) and not paper_mode
        prev = sample["prev_mask"] if keep else None
        cut = passes.cut(sample["gesture"], sample["prev_mask"] if sample["has_prev"] else None)
        return prompts.paste_mask(crop_logits, box, shape, prev, prev_crop, cut)

    def rescued(chunk, results, masks) -> tuple[list, list]:
        """The rescue pass (`prompts.Passes.rescue`) for the chunk's ignored refinement
        prompts: their results and masks replaced by a second run, closer."""
        boxes = {}
        for i, sample in enumerate(chunk):
            if bool(sample["has_prev"]):
                box = results[i][1]
                rescue = passes.rescue(sample["gesture"], sample["prev_mask"], box, masks[i])
                if rescue is not None:
                    boxes[i] = rescue
        if not boxes:
            return results, masks
        again = run([chunk[i] for i in boxes], passes.size, list(boxes.values()))
        results, masks = list(results), list(masks)
        for i, result in zip(boxes, again, strict=True):
            results[i], masks[i] = result, pasted(chunk[i], result)
        return results, masks

    def predict(samples: Sequence[dict[str, Any]]) -> list[np.ndarray]:
        masks = []
        for start in range(0, len(samples), batch_size):
            chunk = samples[start : start + batch_size]
            results = first_runs(chunk)
            if passes.focus:
                results = refocused(chunk, results)
            chunk_masks = [pasted(s, r) for s, r in zip(chunk, results, strict=True)]
            if passes.rescues:
                results, chunk_masks = rescued(chunk, results, chunk_masks)
            for sample, mask, result in zip(chunk, chunk_masks, results, strict=True):
                prev = sample["prev_mask"] if bool(sample["has_prev"]) else None
                mask = passes.obeyed(sample["gesture"], prev, mask, result[0], result[1])
                masks.append(passes.merged(sample["gesture"], prev, mask))
        return masks

    return predict
