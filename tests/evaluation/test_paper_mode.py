"""The paper mode (DIG §16.1, §16.3): the whole photo resized to the working size, no zoom-in
crop, logits resized back; for evaluation (`segmenter_predictor(paper_mode=True)`,
`evaluate --paper-mode`) and training (`PipelineConfig.paper_mode`)."""

from __future__ import annotations

import ml_collections
import numpy as np
import pytest

from dig_jax import prompts
from dig_jax.evaluation.predictors import ModelView, segmenter_predictor
from dig_jax.metrics import iou

S = 32
H, W = 60, 200


def _photo() -> np.ndarray:
    """Left half red, right half blue."""
    image = np.zeros((H, W, 3), np.uint8)
    image[:, : W // 2] = (255, 0, 0)
    image[:, W // 2 :] = (0, 0, 255)
    return image


def test_paper_box_stretches_the_whole_photo_onto_the_square():
    box = prompts.paper_box((H, W))
    assert box.scales(S) == (S / W, S / H)
    crop = prompts.warp(_photo(), box, S)
    assert crop.shape == (S, S, 3)
    assert (crop[:, : S // 2 - 1, 0] == 255).all() and (crop[:, S // 2 + 1 :, 2] == 255).all()
    left = np.zeros((S, S), np.float32) - 20
    left[:, : S // 2] = 20  # logits of "the left half", pasted back by resizing
    pasted = prompts.paste_logits(left, box, (H, W)) > 0
    expected = np.zeros((H, W), bool)
    expected[:, : W // 2] = True
    assert iou(pasted, expected) > 0.97
    square = prompts.ZoomBox(0.0, 0.0, 50.0)  # a square box keeps its one scale
    assert square.scales(S) == (S / 50, S / 50) and square.scale(S) == S / 50


def test_zoom_sample_in_paper_mode_sees_the_whole_photo():
    gesture = np.zeros((H, W), np.uint8)
    gesture[5:30, 160:190] = 1  # a mark on the right: the zoom-in crops around it
    sample = {
        "image": _photo(), "gesture": gesture, "prev_mask": np.zeros((H, W), np.uint8),
        "has_prev": np.bool_(False), "target": gesture.copy(), "region": gesture,
        "local": gesture, "void": np.zeros((H, W), np.uint8),
    }  # fmt: skip
    zoomed = prompts.zoom_sample(sample, S)
    paper = prompts.zoom_sample(sample, S, paper_mode=True)
    np.testing.assert_allclose(paper["zoom_box"], [0, 0, W])
    assert paper["image"].shape == (S, S, 3)
    assert (paper["image"][:, :10, 0] == 255).all()  # the red left half is in view
    assert not (zoomed["image"][..., 0] == 255).any()  # the zoom crop sees blue only
    trained = prompts.zoom_sample(sample, S, np.random.default_rng(0), paper_mode=True)
    np.testing.assert_allclose(trained["zoom_box"], [0, 0, W])  # no box jitter


def _echo_model():
    """A ModelView whose 'network' predicts its gesture channel, recording its inputs."""
    seen = []
    config = ml_collections.ConfigDict(
        dict(model=dict(input_kind="gesture"), image_size=S, predict=dict(focus_pass=True))
    )

    def logits(x):
        seen.append(np.asarray(x))
        return np.where(np.asarray(x)[..., 3] > 0, 20.0, -20.0)

    return ModelView(config, logits), seen


@pytest.mark.parametrize("paper_mode", [False, True])
def test_predictor_in_paper_mode_runs_on_the_resized_photo(paper_mode):
    model, seen = _echo_model()
    gesture = np.zeros((H, W), np.uint8)
    gesture[20:40, 150:190] = 1
    sample = {"image": _photo(), "gesture": gesture, "prev_mask": np.zeros((H, W), np.uint8),
              "has_prev": np.bool_(False), "context": 1, "gesture_kind": 4}  # fmt: skip
    (mask,) = segmenter_predictor(model, paper_mode=paper_mode)([sample])
    assert mask.shape == (H, W) and iou(mask, gesture) > 0.8
    x = seen[0][0]
    red_in_view = (x[..., 0] > 250).any()
    assert red_in_view == paper_mode  # the zoom crop around the mark sees only the blue half
    if paper_mode:
        assert len(seen) == 1  # no focus pass
        np.testing.assert_allclose(x[:, : S // 2 - 1, 0], 255)


def test_paper_mode_defaults_to_how_the_model_was_trained():
    model, seen = _echo_model()
    model.config.data = dict(paper_mode=True)
    sample = {"image": _photo(), "gesture": np.ones((H, W), np.uint8),
              "prev_mask": np.zeros((H, W), np.uint8), "has_prev": np.bool_(False),
              "context": 1, "gesture_kind": 4}  # fmt: skip
    segmenter_predictor(model)([sample])
    assert (seen[0][0][..., 0] > 250).any() and (seen[0][0][..., 2] > 250).any()


def test_training_pipeline_in_paper_mode_feeds_whole_photos():
    from dig_jax.data.pipeline import make_dataset

    def boxes(paper_mode: bool) -> np.ndarray:
        cfg = dict(sources=["procedural:6:3"], image_size=48, batch_size=1, num_epochs=1,
                   shard=(0, 1), max_failures=0, paper_mode=paper_mode)  # fmt: skip
        return np.concatenate([b["zoom_box"] for b in make_dataset(cfg, "train")])

    paper, zoomed = boxes(True), boxes(False)
    assert len(paper) > 0 and len(zoomed) > 0
    np.testing.assert_allclose(paper, [[0, 0, 48]] * len(paper))
    assert not np.allclose(zoomed, [[0, 0, 48]] * len(zoomed))


def test_a_segmenter_trained_in_paper_mode_predicts_in_paper_mode(tmp_path):
    from tiny_models import tiny_variables

    from dig_jax.export import load_segmenter, save_segmenter

    config, variables = tiny_variables()
    gesture = np.zeros((H, W), np.uint8)
    gesture[20:40, 150:190] = 1
    boxes = {}
    for paper_mode in (False, True):
        path = save_segmenter(tmp_path / f"{paper_mode}.digjax", variables,
                              {**config, "data": {"paper_mode": paper_mode}})  # fmt: skip
        segmenter = load_segmenter(path)
        assert segmenter.paper_mode == paper_mode
        _, boxes[paper_mode], _ = segmenter.prepare(_photo(), gesture)
        assert segmenter.predict_logits(_photo(), gesture).shape == (H, W)
    assert boxes[True] == prompts.paper_box((H, W)) and boxes[False] != boxes[True]
