"""Batched predictors over Sample batches, and the context strategies of the adapted baselines.

A predictor maps a batch dict (Sample keys with a leading axis) to binary masks uint8[B, H, W].
Gesture-agnostic models see only the gesture. Context baselines must also be told add/remove;
DIG compares them with the context given by a strategy:
  oracle   — the true context of the sample (an upper bound no real user interface offers),
  positive — always ADD, negative — always REMOVE, random — a fair coin per sample.
Context baselines read a gesture as they were trained (`model.context_encoding`), or, by
`gesture_encoding`, as skeleton clicks ("clicks") or as its bounding box ("box").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dig_jax.gestures.types import Context
from dig_jax.models.interactive import (
    batch_to_input,
    encode_context_box,
    encode_context_clicks,
    pad_input,
)

Predictor = Callable[[dict[str, np.ndarray]], np.ndarray]
CONTEXT_STRATEGIES = ("oracle", "positive", "negative", "random")
GESTURE_ENCODINGS = ("model", "clicks", "box")
STRIDE = 32  # the backbone's total stride: inputs are padded (`pad_input`) to a multiple of it


def apply_context_strategy(
    batch: dict[str, np.ndarray], strategy: str, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """A copy of `batch` whose `context` follows `strategy` (see module docstring)."""
    if strategy not in CONTEXT_STRATEGIES:
        raise ValueError(f"strategy must be one of {CONTEXT_STRATEGIES}, got {strategy!r}")
    context = np.asarray(batch["context"], np.int32)
    if strategy == "positive":
        context = np.full_like(context, Context.ADD)
    elif strategy == "negative":
        context = np.full_like(context, Context.REMOVE)
    elif strategy == "random":
        context = rng.integers(0, 2, context.shape).astype(np.int32)
    return {**batch, "context": context}


def segmenter_predictor(
    segmenter: Any,
    *,
    context_strategy: str = "oracle",
    gesture_encoding: str = "model",
    seed: int = 0,
) -> Predictor:
    """Predictor for a `dig_jax.load_segmenter(...)` object (gesture or context input).

    `gesture_encoding` (context models only): "model" = as trained (`model.context_encoding`),
    "clicks" = skeleton clicks (`encode_context_clicks`, rectangles in the box channel),
    "box" = every gesture's bounding box in the box channel (`encode_context_box`).
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
    logits_fn = jax.jit(segmenter.predict_logits_fn())
    rng = np.random.default_rng(seed)

    def predict(batch: dict[str, np.ndarray]) -> np.ndarray:
        if input_kind == "context":
            batch = apply_context_strategy(batch, context_strategy, rng)
            if gesture_encoding == "clicks":
                batch = encode_context_clicks(batch)
            elif gesture_encoding == "box":
                batch = encode_context_box(batch)
        x = np.asarray(batch_to_input(batch, input_kind))
        h, w = x.shape[1:3]
        logits = logits_fn(jnp.asarray(pad_input(x, input_kind, STRIDE)))[:, :h, :w]
        return (np.asarray(logits) > 0).astype(np.uint8)

    return predict
