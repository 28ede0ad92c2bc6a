"""Batched segmenter predictors: stride padding, gesture encodings of context baselines, CLI."""

from __future__ import annotations

import json
import types

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from dig_jax.evaluation import segmenter_predictor
from dig_jax.gestures import Gesture, GestureKind, box_outline_points, rasterize
from dig_jax.models.interactive import RGB_MEAN, encode_context_box, encode_context_clicks


def recording_segmenter(input_kind: str, context_encoding: str = "gesture"):
    """Stand-in for a loaded segmenter whose logits function records the inputs it is given."""
    seen: list[np.ndarray] = []

    def logits_fn(x):
        jax.debug.callback(lambda v: seen.append(np.asarray(v)), x)
        return x[..., 3] - 0.5  # mask = the gesture / positive channel

    config = ml_collections.ConfigDict(
        {"model": {"input_kind": input_kind, "context_encoding": context_encoding}}
    )
    seg = types.SimpleNamespace(
        input_kind=input_kind, config=config, predict_logits_fn=lambda: logits_fn
    )
    return seg, seen


def tiny_batch(height: int = 30, width: int = 45) -> dict[str, np.ndarray]:
    rect = rasterize(
        Gesture(GestureKind.RECTANGLE, box_outline_points(np.array([6.0, 8, 21, 19])), True),
        (height, width),
    )
    click = rasterize(Gesture(GestureKind.CLICK, [[30.0, 15.0]], False), (height, width))
    return {
        "image": np.full((2, height, width, 3), 9, np.uint8),
        "gesture": np.stack([rect, click]),
        "distance": np.zeros((2, height, width), np.uint8),
        "prev_mask": np.zeros((2, height, width), np.uint8),
        "context": np.array([1, 0], np.int32),
        "gesture_kind": np.array([GestureKind.RECTANGLE, GestureKind.CLICK], np.int32),
    }


def test_padding_uses_mean_rgb_and_far_distance():
    seg, seen = recording_segmenter("gesture")
    batch = tiny_batch()
    mask = segmenter_predictor(seg)(batch)
    np.testing.assert_array_equal(mask, batch["gesture"])
    (x,) = seen
    assert x.shape == (2, 32, 64, 6)
    pad = x[:, 30:]
    np.testing.assert_allclose(
        pad[..., :3], np.broadcast_to(np.asarray(RGB_MEAN) * 255, (2, 2, 64, 3)), rtol=1e-6
    )
    np.testing.assert_array_equal(pad[..., 4], 1.0)
    np.testing.assert_array_equal(x[:, :, 45:, 4], 1.0)
    np.testing.assert_array_equal(x[:, :, 45:, 3], 0.0)


@pytest.mark.parametrize(
    ("trained", "encoding", "expected"),
    [
        ("clicks", "model", "clicks"),
        ("gesture", "model", "gesture"),
        ("gesture", "clicks", "clicks"),
        ("clicks", "box", "box"),
    ],
)
def test_context_gesture_encodings(trained, encoding, expected):
    seg, seen = recording_segmenter("context", trained)
    batch = tiny_batch()
    segmenter_predictor(seg, gesture_encoding=encoding)(batch)
    (x,) = seen
    x = x[:, :30, :45]
    if expected == "gesture":
        np.testing.assert_array_equal(x[0, ..., 3], batch["gesture"][0])  # ADD -> positive
        np.testing.assert_array_equal(x[1, ..., 4], batch["gesture"][1])  # REMOVE -> negative
        assert x[..., 5].sum() == 0
        return
    encode = encode_context_box if expected == "box" else encode_context_clicks
    encoded = encode(batch)
    for channel, key in ((3, "positive"), (4, "negative"), (5, "box")):
        np.testing.assert_array_equal(x[..., channel], encoded[key])
    if expected == "box":
        assert x[..., 3:5].sum() == 0 and (x[..., 5].sum(axis=(1, 2)) > 0).all()


def test_bad_gesture_encoding_is_rejected():
    seg, _ = recording_segmenter("context")
    with pytest.raises(ValueError, match="gesture_encoding must be one of"):
        segmenter_predictor(seg, gesture_encoding="lasso")
    gesture_seg, _ = recording_segmenter("gesture")
    with pytest.raises(ValueError, match="gesture_encoding='box' needs a context model"):
        segmenter_predictor(gesture_seg, gesture_encoding="box")


TINY_CONTEXT_MODEL = {
    "widths": [4, 8],
    "stem_width": 4,
    "stage1_planes": 4,
    "blocks": 1,
    "stage_modules": [1],
    "head_width": 4,
    "input_kind": "context",
    "context_encoding": "clicks",
    "multihead": False,
    "aux_reduce": 4,
    "aux_pool": 4,
    "aux_hidden": [8],
}


@pytest.fixture(scope="module")
def context_checkpoint(tmp_path_factory):
    from dig_jax.export import save_segmenter
    from dig_jax.models.interactive import build_segmenter

    config = ml_collections.ConfigDict({"model": TINY_CONTEXT_MODEL})
    model = build_segmenter(config.model)
    shapes = jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.zeros((1, 32, 32, 7))))
    rng = np.random.default_rng(0)

    def fill(path, leaf):
        if "var" in jax.tree_util.keystr(path):
            return np.ones(leaf.shape, leaf.dtype)
        return (0.3 * rng.standard_normal(leaf.shape)).astype(leaf.dtype)

    variables = jax.tree_util.tree_map_with_path(fill, shapes)
    return save_segmenter(tmp_path_factory.mktemp("ctx") / "ctx.digjax", variables, config)


def test_evaluate_cli_gesture_encoding_box(context_checkpoint, tmp_path, capsys):
    from dig_jax.evaluate import main

    argv = ["--checkpoint", str(context_checkpoint), "--datasets", "procedural:1", "--size", "64"]
    argv += ["--modes", "creation", "--batch-size", "4", "--out", str(tmp_path)]
    assert main([*argv, "--gesture-encoding", "box"]) == 0
    payload = json.loads((tmp_path / "metrics.json").read_text())
    assert payload["gesture_encoding"] == "box"
    assert payload["samples"]["procedural:1"] > 0
    with pytest.raises(SystemExit):
        main([*argv, "--gesture-encoding", "boxes"])
    assert "--gesture-encoding" in capsys.readouterr().err
