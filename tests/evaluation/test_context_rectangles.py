"""Rectangles for the context baselines respect the context: a box prompt adds; a removing
rectangle is read as negative clicks (skeleton encoding) or a negative box outline (box
encoding), so the positive, negative and random rows differ, as in DIG Table 2."""

from __future__ import annotations

import numpy as np
import pytest

from dig_jax.gestures import Gesture, GestureKind, rasterize
from dig_jax.prompts import model_input

S = 64


def _batch() -> dict[str, np.ndarray]:
    rect = Gesture(GestureKind.RECTANGLE, [[12.0, 14], [50, 14], [50, 48], [12, 48]], True)
    gesture = rasterize(rect, (S, S)).astype(np.uint8)
    zeros = np.zeros((1, S, S), np.uint8)
    return {
        "image": np.zeros((1, S, S, 3), np.uint8), "gesture": gesture[None],
        "distance": zeros, "prev_mask": zeros, "context": np.array([1], np.int32),
        "gesture_kind": np.array([int(GestureKind.RECTANGLE)], np.int32),
    }  # fmt: skip


@pytest.mark.parametrize("encoding", ["clicks", "box"])
def test_rectangle_rows_differ_by_context_strategy(encoding):
    batch = _batch()
    pos, neg = (model_input(batch, "context", encoding, strategy=s)[0]
                for s in ("positive", "negative"))  # fmt: skip
    assert pos[..., 5].sum() > 0 and pos[..., 3:5].sum() == 0  # adds: the box channel only
    assert neg[..., 5].sum() == 0 and neg[..., 3].sum() == 0 and neg[..., 4].sum() > 0
    randoms = [model_input(batch, "context", encoding, strategy="random",
                           rng=np.random.default_rng(seed))[0] for seed in range(12)]  # fmt: skip
    as_box = {bool(x[..., 5].any()) for x in randoms}
    assert as_box == {True, False}  # a coin per rectangle: sometimes a box, sometimes negative
    for x in randoms:
        assert x[..., 3].sum() == 0  # never positive clicks: a rectangle is a box or a removal
