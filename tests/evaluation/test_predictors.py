"""Segmenter predictors: zoom-in crops at the working size, paste-back at the photo's size,
gesture encodings of context baselines, the evaluate CLI."""

from __future__ import annotations

import json
import types

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from tiny_models import TINY_MODEL

from dig_jax import prompts
from dig_jax.evaluation import segmenter_predictor
from dig_jax.evaluation.predictors import zoom_crops
from dig_jax.gestures import Gesture, GestureKind, box_outline_points, rasterize
from dig_jax.models.efficientnet_lite import RGB_MEAN
from dig_jax.prompts import encode_context_box, encode_context_clicks

SIZE = 64  # the stand-in's working size


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
        input_kind=input_kind, config=config, size=SIZE, predict_logits_fn=lambda: logits_fn
    )
    return seg, seen


def tiny_samples(height: int = 60, width: int = 90) -> list[dict[str, np.ndarray]]:
    """A rectangle (ADD) and a click (REMOVE) on a flat photo of (height, width)."""
    rect = rasterize(
        Gesture(GestureKind.RECTANGLE, box_outline_points(np.array([12.0, 16, 42, 38])), True),
        (height, width),
    )
    click = rasterize(Gesture(GestureKind.CLICK, [[60.0, 30.0]], False), (height, width))
    return [
        {
            "image": np.full((height, width, 3), 9, np.uint8),
            "gesture": gesture,
            "prev_mask": np.zeros((height, width), np.uint8),
            "has_prev": np.bool_(False),
            "context": np.int32(context),
            "gesture_kind": np.int32(kind),
        }
        for gesture, context, kind in (
            (rect, 1, GestureKind.RECTANGLE),
            (click, 0, GestureKind.CLICK),
        )
    ]


def test_predictor_runs_the_zoom_crops_and_pastes_back():
    seg, seen = recording_segmenter("gesture")
    samples = tiny_samples()
    masks = segmenter_predictor(seg, batch_size=2)(samples)
    (x,) = seen
    assert x.shape == (2, SIZE, SIZE, 6)
    for sample, mask, crop in zip(samples, masks, x, strict=True):
        box = prompts.zoom_box(sample["gesture"], None, SIZE)
        expected = prompts.crop_prompt(sample["image"], sample["gesture"], None, box, SIZE)
        np.testing.assert_array_equal(crop[..., 3], expected["gesture"])
        np.testing.assert_allclose(crop[..., 4], expected["distance"] / 255.0, rtol=1e-6)
        assert mask.shape == sample["gesture"].shape and mask.dtype == np.uint8
        overlap = (mask & sample["gesture"]).sum() / max(mask.sum(), sample["gesture"].sum())
        assert overlap > 0.8  # the pasted crop of the gesture is the gesture again
    # the click says nothing about extent: the whole photo, letterboxed with the mean colour
    click_box = prompts.zoom_box(samples[1]["gesture"], None, SIZE)
    assert click_box == prompts.whole_image_box((60, 90))
    np.testing.assert_allclose(x[1, 0, 0, :3], np.round(np.asarray(RGB_MEAN) * 255), atol=1)


def test_short_chunks_are_padded_to_a_power_of_two():
    seg, seen = recording_segmenter("gesture")
    samples = tiny_samples()
    masks = segmenter_predictor(seg, batch_size=8)([*samples, samples[0]])
    assert len(masks) == 3 and seen[0].shape[0] == 4  # 3 crops -> one batch of 4
    segmenter_predictor(seg, batch_size=8)(samples)
    assert seen[1].shape[0] == 2


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
    samples = tiny_samples()
    segmenter_predictor(seg, gesture_encoding=encoding, batch_size=2)(samples)
    (x,) = seen
    crops, _ = zoom_crops(samples, SIZE)
    if expected == "gesture":
        np.testing.assert_array_equal(x[0, ..., 3], crops["gesture"][0])  # ADD -> positive
        np.testing.assert_array_equal(x[1, ..., 4], crops["gesture"][1])  # REMOVE -> negative
        assert x[..., 5].sum() == 0
        return
    encode = encode_context_box if expected == "box" else encode_context_clicks
    encoded = encode(crops)
    for channel, key in ((3, "positive"), (4, "negative"), (5, "box")):
        np.testing.assert_array_equal(x[..., channel], encoded[key])
    if expected == "box":  # sample 0 adds: its box; sample 1 removes: the box outline negative
        assert x[..., 3].sum() == 0 and x[0, ..., 5].sum() > 0 and x[1, ..., 5].sum() == 0
        assert x[1, ..., 4].sum() > 0 and x[0, ..., 4].sum() == 0


def test_bad_gesture_encoding_is_rejected():
    seg, _ = recording_segmenter("context")
    with pytest.raises(ValueError, match="gesture_encoding must be one of"):
        segmenter_predictor(seg, gesture_encoding="lasso")
    gesture_seg, _ = recording_segmenter("gesture")
    with pytest.raises(ValueError, match="gesture_encoding='box' needs a context model"):
        segmenter_predictor(gesture_seg, gesture_encoding="box")


TINY_CONTEXT_MODEL = {**TINY_MODEL, "input_kind": "context", "context_encoding": "clicks"}


@pytest.fixture(scope="module")
def context_checkpoint(tmp_path_factory):
    from dig_jax.export import save_segmenter
    from dig_jax.models.interactive import build_segmenter

    config = ml_collections.ConfigDict({"model": TINY_CONTEXT_MODEL, "image_size": 32})
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

    argv = [
        "--checkpoint",
        str(context_checkpoint),
        "--datasets",
        "procedural:1",
        "--max-side",
        "64",
    ]
    argv += ["--modes", "creation", "--batch-size", "4", "--out", str(tmp_path)]
    assert main([*argv, "--gesture-encoding", "box"]) == 0
    payload = json.loads((tmp_path / "metrics.json").read_text())
    assert payload["settings"]["gesture_encoding"] == "box"
    assert payload["results"]["ctx"]["dig"]["metrics"]["procedural:1/iou_global/all/create"] >= 0
    with pytest.raises(SystemExit):
        main([*argv, "--gesture-encoding", "boxes"])
    assert "--gesture-encoding" in capsys.readouterr().err


def test_focus_pass_reruns_a_creation_click_on_its_first_masks_box():
    seg, seen = recording_segmenter("gesture")
    seg.config.predict = {"focus_pass": True}
    samples = tiny_samples(120, 180)  # the rectangle's zoom box is not the whole photo
    masks = segmenter_predictor(seg, batch_size=2)(samples)
    assert [x.shape[0] for x in seen] == [2, 1]  # the click again, the rectangle not
    shape = (120, 180)
    first = prompts.paste_logits(seen[0][1, ..., 3] - 0.5, prompts.whole_image_box(shape),
                                 shape) > 0  # fmt: skip
    focus = prompts.focus_box(samples[1]["gesture"], first, SIZE)
    assert focus is not None and focus.side < 180
    again = prompts.crop_prompt(samples[1]["image"], samples[1]["gesture"], None, focus, SIZE)
    np.testing.assert_array_equal(seen[1][0, ..., 3], again["gesture"])
    overlap = (masks[1] & samples[1]["gesture"]).sum() / samples[1]["gesture"].sum()
    assert overlap > 0.8


def test_loaded_segmenter_takes_the_same_focus_pass(tiny_checkpoint, monkeypatch):
    import dig_jax

    seg = dig_jax.load_segmenter(tiny_checkpoint)
    seg.focus_pass = True
    boxes = []
    original = seg._network
    monkeypatch.setattr(seg, "_network", lambda crop, *a: boxes.append(crop) or original(crop, *a))
    sample = tiny_samples()[1]
    seg.predict(sample["image"], sample["gesture"])
    assert len(boxes) in (1, 2)  # a second run exactly when the first mask gives a box
    first = seg.predict_logits(sample["image"], sample["gesture"])
    assert first.shape == (60, 90)


def test_creation_clicks_run_first_at_the_click_size():
    seg, seen = recording_segmenter("gesture")
    seg.config.predict = {"focus_pass": True, "click_size": 2 * SIZE}
    samples = tiny_samples(120, 180)
    masks = segmenter_predictor(seg, batch_size=2)(samples)
    # the rectangle at S, the click at 2S, then the click's focus pass at S
    assert [x.shape[:3] for x in seen] == [(1, SIZE, SIZE), (1, 2 * SIZE, 2 * SIZE),
                                           (1, SIZE, SIZE)]  # fmt: skip
    shape, whole = (120, 180), prompts.whole_image_box((120, 180))
    click = prompts.crop_prompt(samples[1]["image"], samples[1]["gesture"], None, whole, 2 * SIZE)
    np.testing.assert_array_equal(seen[1][0, ..., 3], click["gesture"])
    first = prompts.paste_logits(seen[1][0, ..., 3] - 0.5, whole, shape) > 0
    focus = prompts.focus_box(samples[1]["gesture"], first, SIZE)
    again = prompts.crop_prompt(samples[1]["image"], samples[1]["gesture"], None, focus, SIZE)
    np.testing.assert_array_equal(seen[2][0, ..., 3], again["gesture"])
    assert [m.shape for m in masks] == [shape, shape]
    overlap = (masks[1] & samples[1]["gesture"]).sum() / samples[1]["gesture"].sum()
    assert overlap > 0.8


def test_loaded_segmenter_runs_creation_clicks_as_the_predictor_does(tiny_checkpoint):
    import dig_jax
    from dig_jax.export import LoadedSegmenter

    loaded = dig_jax.load_segmenter(tiny_checkpoint)
    config = ml_collections.ConfigDict(loaded.config.to_dict())
    config.predict = {"focus_pass": True, "click_size": 2 * loaded.size}
    seg = LoadedSegmenter(config, loaded.variables)
    sizes = []
    original = seg._network
    seg._network = lambda crop, *a: sizes.append(crop["image"].shape[0]) or original(crop, *a)
    samples = tiny_samples(120, 180)  # the rectangle's zoom box is not the whole photo
    masks = segmenter_predictor(seg, batch_size=2)(samples)
    for sample, mask in zip(samples, masks, strict=True):
        sizes.clear()
        np.testing.assert_array_equal(seg.predict(sample["image"], sample["gesture"]), mask)
        whole = sample["gesture_kind"] == GestureKind.CLICK
        assert sizes[0] == (2 * seg.size if whole else seg.size)
        assert sizes[1:] in ([], [seg.size])  # the focus pass at the working size


def refinement_samples(kind, strokes, prev_box, shape=(120, 180)) -> list[dict[str, np.ndarray]]:
    """One refinement sample of `kind` per (points, context) in `strokes`, on a previous mask
    filling `prev_box` (rows, cols slices) of a flat photo."""
    prev = np.zeros(shape, np.uint8)
    prev[prev_box] = 1
    return [{
        "image": np.full((*shape, 3), 9, np.uint8),
        "gesture": rasterize(Gesture(kind, points, False), shape),
        "prev_mask": prev, "has_prev": np.bool_(True), "context": np.int32(context),
        "gesture_kind": np.int32(kind),
    } for points, context in strokes]  # fmt: skip


def refinement_clicks() -> list[dict[str, np.ndarray]]:
    """A REMOVE click on a previous mask and an ADD click beside it, on a flat photo."""
    clicks = (([[70.0, 60.0]], 0), ([[150.0, 60.0]], 1))
    return refinement_samples(GestureKind.CLICK, clicks, np.s_[20:100, 30:110])


def test_rescue_pass_reruns_an_ignored_refinement_click_around_it():
    seg, seen = recording_segmenter("gesture")
    seg.config.predict = {"rescue_zoom": 2.5}
    samples = refinement_clicks()
    segmenter_predictor(seg, batch_size=2)(samples)
    # the stand-in's mask is the gesture: the REMOVE click (on the mask) keeps its pixel set,
    # ignored, and runs again; the ADD click sets its pixel, obeyed, and does not
    assert [x.shape[0] for x in seen] == [2, 1]
    sample = samples[0]
    box = prompts.zoom_box(sample["gesture"], sample["prev_mask"], SIZE)
    rescue = prompts.rescue_box(sample["gesture"], sample["prev_mask"], box, sample["prev_mask"],
                                2.5, SIZE)  # fmt: skip
    again = prompts.crop_prompt(sample["image"], sample["gesture"], sample["prev_mask"], rescue,
                                SIZE)  # fmt: skip
    np.testing.assert_array_equal(seen[1][0, ..., 3], again["gesture"])
    np.testing.assert_array_equal(seen[1][0, ..., 5], again["prev_mask"])


@pytest.mark.parametrize(
    ("predict", "make_samples"),
    [
        ({"rescue_zoom": 2.5}, "refinement_clicks"),
        ({"rescue_strokes": True}, "refinement_scribbles"),
        ({"rescue_zoom": 2.5, "merge": "all"}, "refinement_clicks"),
        ({"rescue_strokes": True, "merge": "all"}, "refinement_scribbles"),
        ({"rescue_zoom": 2.5, "obey_clicks": 0.3}, "refinement_clicks"),
    ],
)
def test_loaded_segmenter_rescues_as_the_predictor_does(tiny_checkpoint, predict, make_samples):
    import dig_jax
    from dig_jax.export import LoadedSegmenter

    loaded = dig_jax.load_segmenter(tiny_checkpoint)
    config = ml_collections.ConfigDict(loaded.config.to_dict())
    config.predict = predict
    seg = LoadedSegmenter(config, loaded.variables)
    runs = []
    original = seg._network
    seg._network = lambda crop, *a: runs.append(crop["image"].shape[0]) or original(crop, *a)
    samples = globals()[make_samples]()
    masks = segmenter_predictor(seg, batch_size=2)(samples)
    for sample, mask in zip(samples, masks, strict=True):
        runs.clear()
        got = seg.predict(sample["image"], sample["gesture"], sample["prev_mask"])
        np.testing.assert_array_equal(got, mask)
        assert len(runs) in (1, 2)
        click = prompts.refinement_click(sample["gesture"], sample["prev_mask"])
        if click is not None and "obey_clicks" not in predict:
            # a second run only for a click whose pixel kept its label
            ignored = (got[click] > 0) == (sample["prev_mask"][click] > 0)
            assert (len(runs) == 2) <= ignored


def refinement_scribbles() -> list[dict[str, np.ndarray]]:
    """A scribble inside a large previous mask and one outside it, on a flat photo."""
    strokes = (([[50.0, 90.0], [80.0, 95.0]], 0), ([[140.0, 30.0], [170.0, 40.0]], 1))
    return refinement_samples(GestureKind.SCRIBBLE, strokes, np.s_[10:110, 10:130])


def test_stroke_rescue_reruns_an_ignored_refinement_stroke_on_its_own_box():
    seg, seen = recording_segmenter("gesture")
    seg.config.predict = {"rescue_strokes": True}
    samples = refinement_scribbles()
    segmenter_predictor(seg, batch_size=2)(samples)
    # the stand-in's mask is the gesture: the scribble inside the mask leaves its own pixels
    # as they were, ignored, and runs again; the one outside sets them, and does not
    assert [x.shape[0] for x in seen] == [2, 1]
    sample = samples[0]
    box = prompts.zoom_box(sample["gesture"], sample["prev_mask"], SIZE)
    rescue = prompts.stroke_rescue_box(sample["gesture"], sample["prev_mask"], box,
                                       sample["prev_mask"], SIZE)  # fmt: skip
    assert rescue is not None and rescue.side < box.side
    again = prompts.crop_prompt(sample["image"], sample["gesture"], sample["prev_mask"], rescue,
                                SIZE)  # fmt: skip
    np.testing.assert_array_equal(seen[1][0, ..., 3], again["gesture"])
    np.testing.assert_array_equal(seen[1][0, ..., 5], again["prev_mask"])
    seen.clear()
    seg.config.predict = {"rescue_zoom": 2.5}  # clicks only: strokes run once
    segmenter_predictor(seg, batch_size=2)(samples)
    assert [x.shape[0] for x in seen] == [2]


def test_open_creation_prompts_are_cut_at_the_open_threshold_by_both_paths(tiny_checkpoint):
    import dig_jax
    from dig_jax.export import LoadedSegmenter

    loaded = dig_jax.load_segmenter(tiny_checkpoint)
    config = ml_collections.ConfigDict(loaded.config.to_dict())
    config.predict = {"focus_pass": True, "open_threshold": -0.5}
    seg = LoadedSegmenter(config, loaded.variables)
    samples = tiny_samples(120, 180)  # a rectangle, then a click
    outline = box_outline_points(np.array([20.0, 20, 160, 100]))
    samples[0]["gesture"] = rasterize(Gesture(GestureKind.RECTANGLE, outline, True), (120, 180))
    assert not prompts.open_creation(samples[0]["gesture"], None)  # it encloses an area
    assert prompts.open_creation(samples[1]["gesture"], None)
    masks = segmenter_predictor(seg, batch_size=2)(samples)
    for sample, mask, cut in zip(samples, masks, (0.0, -0.5), strict=True):
        np.testing.assert_array_equal(seg.predict(sample["image"], sample["gesture"]), mask)
        logits = seg.predict_logits(sample["image"], sample["gesture"])
        np.testing.assert_array_equal(mask, (logits > cut).astype(np.uint8))
    plain = segmenter_predictor(loaded, batch_size=2)(samples)
    np.testing.assert_array_equal(plain[0], masks[0])  # the outline's mask does not change
