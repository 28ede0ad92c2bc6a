"""Inference-time inputs: padding to the backbone stride, context encodings, export's `kind`."""

from __future__ import annotations

import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from dig_jax import prompts
from dig_jax.export import LoadedSegmenter
from dig_jax.gestures import Gesture, GestureKind, box_outline_points, rasterize, to_box
from dig_jax.models.efficientnet_lite import RGB_MEAN, RGB_STD
from dig_jax.prompts import (
    encode_context_box,
    gesture_input,
    gesture_map_box,
    pad_input,
    padding_values,
)
from dig_jax.train.config import base_config

MEAN255 = np.asarray(RGB_MEAN, np.float32) * 255.0


def rectangle_map(box, shape=(32, 32)) -> np.ndarray:
    """The rasterised outline of the rectangle `box` (x1, y1, x2, y2)."""
    return rasterize(
        Gesture(GestureKind.RECTANGLE, box_outline_points(np.asarray(box)), True), shape
    )


def test_pad_input_fills_mean_rgb_far_distance_and_empty_maps():
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (2, 30, 45, 3), dtype=np.uint8)
    gesture = np.zeros((2, 30, 45), np.uint8)
    gesture[:, 5:9, 5:9] = 1
    x = np.asarray(gesture_input(image, gesture, rng.uniform(0, 1, (2, 30, 45)), gesture))
    padded = pad_input(x, "gesture", stride=32)
    assert isinstance(padded, np.ndarray) and padded.shape == (2, 32, 64, 6)
    np.testing.assert_array_equal(padded[:, :30, :45], x)
    for pad in (padded[:, 30:], padded[:, :, 45:]):
        np.testing.assert_allclose(pad[..., :3], np.broadcast_to(MEAN255, pad[..., :3].shape))
        np.testing.assert_array_equal(pad[..., 3], 0.0)  # no gesture
        np.testing.assert_array_equal(pad[..., 4], 1.0)  # as far from the gesture as can be
        np.testing.assert_array_equal(pad[..., 5], 0.0)  # outside the previous mask


def test_pad_input_context_and_jax_and_no_op():
    values = padding_values("context")
    np.testing.assert_allclose(values, [*MEAN255, 0, 0, 0, 0])
    # normalised inside the model, padded RGB is exactly zero
    np.testing.assert_allclose((values[:3] - MEAN255) / (np.asarray(RGB_STD) * 255), 0.0)
    x = jnp.ones((1, 33, 32, 7))
    padded = pad_input(x, "context")
    assert isinstance(padded, type(x)) and padded.shape == (1, 64, 32, 7)
    np.testing.assert_array_equal(np.asarray(padded[0, 33:, :, 3:]), 0.0)
    np.testing.assert_array_equal(pad_input(np.ones((32, 64, 6)), "gesture"), 1.0)
    with pytest.raises(ValueError, match="x must be"):
        pad_input(np.ones((1, 30, 30, 6)), "context")
    with pytest.raises(ValueError, match="input_kind"):
        pad_input(np.ones((1, 30, 30, 6)), "clicks")


def test_gesture_map_box_inverts_rectangles_and_boxes_clicks():
    box = np.array([6, 8, 21, 19], np.float32)
    np.testing.assert_array_equal(gesture_map_box(rectangle_map(box)), box)
    click = rasterize(Gesture(GestureKind.CLICK, [[12.0, 15.0]], False), (32, 32))
    np.testing.assert_array_equal(gesture_map_box(click), [12, 15, 13, 16])
    scribble = Gesture(GestureKind.SCRIBBLE, [[8.0, 9.0], [15, 14], [22, 20]], False)
    got = gesture_map_box(rasterize(scribble, (32, 32)))
    np.testing.assert_allclose(got, to_box(scribble), atol=0.5)
    assert gesture_map_box(np.zeros((32, 32), np.uint8)) is None
    edge = np.zeros((32, 32), np.uint8)
    edge[0:3, 0:3] = 1  # marks thinner than the brush (clipped): a 1-px box at their centre
    np.testing.assert_array_equal(gesture_map_box(edge), [1, 1, 2, 2])


def test_encode_context_box_draws_every_gesture_as_a_box_outline_by_its_context():
    box = [6, 8, 21, 19]
    rect = rectangle_map(box)
    click = rasterize(Gesture(GestureKind.CLICK, [[12.0, 15.0]], False), (32, 32))
    batch = {
        "gesture": np.stack([rect, click, np.zeros_like(rect)]),
        "context": np.array([1, 0, 1]),
        "gesture_kind": np.array([GestureKind.RECTANGLE, GestureKind.CLICK, GestureKind.CLICK]),
    }
    out = encode_context_box(batch)
    np.testing.assert_array_equal(out["box"][0], rect)  # a rectangle stays itself
    # the click removes (context 0): its box outline goes to the negative map, not the box
    np.testing.assert_array_equal(out["negative"][1], rectangle_map([12, 15, 13, 16]))
    assert out["box"][1].sum() == 0 and out["box"][2].sum() == 0
    assert out["positive"].sum() == 0 and out["negative"][[0, 2]].sum() == 0
    assert out["box"].dtype == np.uint8 and out["box"].shape == (3, 32, 32)
    np.testing.assert_array_equal(out["context"], batch["context"])  # rest of the batch kept


def loaded(input_kind: str, context_encoding: str = "gesture") -> LoadedSegmenter:
    """A LoadedSegmenter for input building only (no variables: the model is never run)."""
    config = base_config("tiny")
    config.model.input_kind = input_kind
    config.model.context_encoding = context_encoding
    return LoadedSegmenter(ml_collections.ConfigDict(config.to_dict()), {})


def crop_of(image: np.ndarray, gesture: np.ndarray) -> dict[str, np.ndarray]:
    """A crop dict covering the whole (square) photo: the maps as they are."""
    return {
        "image": image,
        "gesture": gesture,
        "distance": np.zeros(gesture.shape, np.uint8),
        "prev_mask": np.zeros(gesture.shape, np.uint8),
    }


def test_export_kind_routes_rectangles_to_the_box_channel():
    seg = loaded("context", "clicks")
    image = np.zeros((32, 32, 3), np.uint8)
    rect = rectangle_map([6, 8, 21, 19])
    crop = crop_of(image, rect)
    x = seg.crop_input(crop, kind=GestureKind.RECTANGLE)
    np.testing.assert_array_equal(x[..., 5], rect)
    assert x[..., 3].sum() == 0 and x[..., 4].sum() == 0
    unknown = seg.crop_input(crop)  # kind unknown: skeleton clicks in the positive map
    assert unknown[..., 5].sum() == 0 and unknown[..., 3].sum() > 0
    removed = seg.crop_input(crop, context=0, kind=GestureKind.SCRIBBLE)
    assert removed[..., 4].sum() > 0 and removed[..., 3].sum() == 0
    with pytest.raises(ValueError, match="kind"):
        seg.predict(image, rect, kind=7)
    # models trained on gesture maps read every gesture from positive/negative, as in training
    maps = loaded("context", "gesture").crop_input(crop, kind=GestureKind.RECTANGLE)
    np.testing.assert_array_equal(maps[..., 3], rect)
    assert maps[..., 5].sum() == 0


def test_export_predict_runs_the_zoom_crop_and_pastes_back():
    seg = loaded("gesture")
    seen = []

    def record(x):
        seen.append(np.asarray(x))
        return jnp.asarray(x[..., 3] - 0.5)  # mask = the crop's gesture

    seg._logits = record
    image = np.full((90, 140, 3), 7, np.uint8)
    gesture = rectangle_map([30, 20, 80, 60], (90, 140))
    mask = seg.predict(image, gesture, kind=GestureKind.RECTANGLE)
    assert mask.shape == (90, 140)
    (x,) = seen
    box = prompts.zoom_box(gesture, None, seg.size)
    assert x.shape == (1, seg.size, seg.size, 6)
    crop = prompts.crop_prompt(image, gesture, None, box, seg.size)
    np.testing.assert_array_equal(x[0], seg.crop_input(crop))
    assert (mask & gesture).sum() > 0.8 * gesture.sum()  # pasted back where it was drawn
    # 0/255 and bool previous masks read as binary, as a Python list too
    prev = np.zeros((90, 140), np.uint8)
    prev[30:50, 40:70] = 255
    a = seg.predict(image, gesture, prev_mask=prev)
    b = seg.predict(image, gesture.tolist(), prev_mask=(prev > 0).tolist())
    np.testing.assert_array_equal(a, b)
    assert np.array_equal(seen[-1][0, ..., 5] > 0, seen[-1][0, ..., 5] > 0.5)
    assert seen[-1][0, ..., 5].sum() > 0
    with pytest.raises(ValueError, match="image must be uint8"):
        seg.predict(image.astype(np.float32) / 255, gesture)
    with pytest.raises(ValueError, match="prev_mask holds NaN"):
        seg.predict(image, gesture, prev_mask=np.full((90, 140), np.nan))
