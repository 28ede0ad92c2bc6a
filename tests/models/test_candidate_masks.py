"""Candidate masks for a creation click (`model.num_masks` > 1): which prompts are ambiguous,
the choice by predicted IoU, the SAM-style loss, a frozen trunk and the export round trip."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from tiny_models import TINY_MODEL_CONFIG

import dig_jax
from dig_jax.export import LoadedSegmenter, save_segmenter
from dig_jax.gestures import BRUSH_RADIUS, stroke_map
from dig_jax.models.heads import ambiguous_prompt, select_mask
from dig_jax.models.interactive import build_segmenter, flip_averaged
from dig_jax.train.config import base_config, validate_config
from dig_jax.train.losses import candidate_iou, normalized_focal_loss, total_loss
from dig_jax.train.state import TrainState, make_optimizer

SIZE = 32


def prompt_input(gesture: np.ndarray, prev: np.ndarray | None = None) -> jnp.ndarray:
    """f32[1, H, W, 6]: a grey photo, the gesture, a zero distance map and the previous mask."""
    height, width = gesture.shape
    prev = np.zeros((height, width)) if prev is None else prev
    x = np.zeros((1, height, width, 6), np.float32)
    x[0, ..., :3] = 128.0
    x[0, ..., 3] = gesture
    x[0, ..., 5] = prev
    return jnp.asarray(x)


def test_only_a_dot_without_a_previous_mask_is_ambiguous():
    shape = (64, 64)
    dot = stroke_map(np.array([[30.0, 30.0]]), shape, closed=False)
    stroke = stroke_map(np.array([[10.0, 10.0], [50.0, 40.0]]), shape, closed=False)
    lasso = stroke_map(
        np.array([[10.0, 10.0], [50.0, 10.0], [50.0, 50.0], [10.0, 50.0]]), shape, closed=True
    )
    prev = np.zeros(shape)
    prev[20:40, 20:40] = 1
    cases = {
        "dot": (dot, None, True),
        "dot on a previous mask": (dot, prev, False),
        "stroke": (stroke, None, False),
        "lasso": (lasso, None, False),
        "nothing": (np.zeros(shape), None, False),
    }
    for name, (gesture, previous, expected) in cases.items():
        got = bool(ambiguous_prompt(prompt_input(gesture, previous))[0])
        assert got == expected, name
    assert dot.sum() > 0.6 * (2 * BRUSH_RADIUS + 1) ** 2  # the brush's disc fills its box
    zoomed = np.zeros(shape)
    yy, xx = np.mgrid[:64, :64]
    zoomed[(yy - 30) ** 2 + (xx - 30) ** 2 <= 15**2] = 1  # a dot seen in a 3x zoomed crop
    assert bool(ambiguous_prompt(prompt_input(zoomed))[0])


def test_select_mask_takes_the_best_candidate_only_when_ambiguous():
    masks = jnp.stack([jnp.full((2, 4, 4), float(k)) for k in range(3)], axis=-1)
    iou = jnp.array([[0.1, 0.2, 0.9], [0.1, 0.9, 0.2]])
    outputs = {"masks": masks, "iou": iou, "ambiguous": jnp.array([1.0, 0.0])}
    chosen = np.asarray(select_mask(outputs))
    assert (chosen[0] == 2).all()  # the highest predicted IoU
    assert (chosen[1] == 0).all()  # not ambiguous: the main mask whatever the scores
    close = {**outputs, "iou": jnp.array([[0.5, 0.55, 0.1], [0.5, 0.7, 0.1]])}
    close["ambiguous"] = jnp.array([1.0, 1.0])
    assert np.asarray(select_mask(close))[:, 0, 0].tolist() == [1.0, 1.0]
    # with a margin of 0.1 an alternative must beat the main mask by more than that
    assert np.asarray(select_mask(close, margin=0.1))[:, 0, 0].tolist() == [0.0, 1.0]


def test_candidate_iou_known_values_and_void():
    target = np.zeros((1, 4, 4), np.uint8)
    target[0, :2, :2] = 1
    target[0, 3, 3] = 255  # void: ignored
    masks = np.full((1, 4, 4, 3), -1.0, np.float32)
    masks[0, :2, :2, 0] = 1  # exact
    masks[0, :2, :, 1] = 1  # 4 of 8
    masks[0, 3, 3, 2] = 1  # only a void pixel: empty prediction, IoU 0
    got = np.asarray(candidate_iou(jnp.asarray(masks), jnp.asarray(target)))
    np.testing.assert_allclose(got, [[1.0, 0.5, 0.0]])


def loss_config() -> ml_collections.ConfigDict:
    return base_config("tiny").loss


def test_loss_keeps_the_best_candidate_for_ambiguous_prompts_only():
    rng = np.random.default_rng(0)
    target = (rng.uniform(size=(2, 8, 8)) > 0.5).astype(np.uint8)
    good = np.where(target == 1, 4.0, -4.0).astype(np.float32)
    masks = np.stack([-good, good, np.zeros_like(good)], axis=-1)  # candidate 0 is the worst
    outputs = {
        "masks": jnp.asarray(masks),
        "mask": jnp.asarray(masks[..., 0]),
        "iou": jnp.zeros((2, 3)),
        "ambiguous": jnp.array([1.0, 0.0]),
    }
    batch = {"target": jnp.asarray(target)}
    loss, parts = total_loss(outputs, batch, loss_config())
    each = [normalized_focal_loss(jnp.asarray(masks[..., k]), target) for k in range(3)]
    expected_mask = 0.5 * (float(each[1][0]) + float(each[0][1]))
    assert float(parts["mask_loss"]) == pytest.approx(expected_mask, rel=1e-5)
    # the IoU error counts on the ambiguous sample alone: true IoUs (0, 1, 0) against 0
    assert float(parts["iou_loss"]) == pytest.approx(1.0 / 3.0, rel=1e-5)
    assert float(loss) == pytest.approx(expected_mask + 1.0 / 3.0, rel=1e-5)


def tiny_config(num_masks: int = 3, train_trunk: bool = False) -> ml_collections.ConfigDict:
    config = base_config("tiny")
    config.model.update(TINY_MODEL_CONFIG)
    config.model.num_masks = num_masks
    config.model.train_trunk = train_trunk
    config.optim.trainable = () if train_trunk else ("alt_masks", "iou_head")
    config.image_size = SIZE
    return config


@pytest.fixture(scope="module")
def tiny_state():
    config = tiny_config()
    model = build_segmenter(config.model)
    variables = model.init(jax.random.key(0), jnp.zeros((1, SIZE, SIZE, 6)), train=False)
    return config, model, variables


def click_batch(count: int = 2) -> jnp.ndarray:
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 255, (count, SIZE, SIZE, 6)).astype(np.float32)
    x[..., 3:] = 0.0
    for i in range(count):
        x[i, ..., 3] = stroke_map(np.array([[10.0 + 5 * i, 12.0]]), (SIZE, SIZE), closed=False)
    return jnp.asarray(x)


def test_alternatives_start_as_the_main_mask_grown(tiny_state):
    _, model, variables = tiny_state
    out = model.apply(variables, click_batch(), train=False)
    masks = np.asarray(out["masks"])
    assert masks.shape == (2, SIZE, SIZE, 3) and out["iou"].shape == (2, 3)
    np.testing.assert_allclose(masks[..., 1], masks[..., 0] + 1.0, atol=1e-5)
    np.testing.assert_allclose(masks[..., 2], masks[..., 0] + 3.0, atol=1e-5)
    assert np.asarray(out["ambiguous"]).tolist() == [1.0, 1.0]
    best = np.argmax(np.asarray(out["iou"]), axis=-1)
    for i in range(2):
        np.testing.assert_allclose(np.asarray(out["mask"][i]), masks[i, ..., best[i]])


def test_a_frozen_trunk_trains_only_the_candidate_heads(tiny_state):
    config, model, variables = tiny_state
    config = config.copy_and_resolve_references()
    config.optim.trainable = ("alt_masks", "iou_head")
    validate_config(config)
    tx = make_optimizer(config.optim, total_steps=4)
    state = TrainState.create(variables["params"], variables["batch_stats"], tx)
    target = jnp.asarray((np.random.default_rng(2).uniform(size=(2, SIZE, SIZE)) > 0.5), jnp.uint8)

    def loss_fn(params):
        outputs, updates = model.apply(
            {"params": params, "batch_stats": state.batch_stats}, click_batch(), train=True,
            mutable=["batch_stats"],
        )  # fmt: skip
        return total_loss(outputs, {"target": target}, config.loss)[0], updates

    (_, updates), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
    new = state.apply_gradients(grads, updates["batch_stats"])
    for key in state.params:
        same = jax.tree.all(jax.tree.map(np.array_equal, state.params[key], new.params[key]))
        assert same == (key not in config.optim.trainable), key
    # the trunk ran in inference mode: its BatchNorm statistics did not move
    stats_same = jax.tree.map(np.array_equal, state.batch_stats, new.batch_stats)
    trunk = {k: v for k, v in stats_same.items() if k not in config.optim.trainable}
    assert jax.tree.all(trunk)


def test_flip_chooses_again_on_the_averaged_scores(tiny_state):
    _, model, variables = tiny_state
    x = click_batch()
    out = flip_averaged(lambda v: model.apply(variables, v, train=False), x)
    np.testing.assert_allclose(np.asarray(out["mask"]), np.asarray(select_mask(out)))
    plain = model.apply(variables, x, train=False)
    mirror = model.apply(variables, x[:, :, ::-1], train=False)
    np.testing.assert_allclose(
        np.asarray(out["masks"]),
        0.5 * (np.asarray(plain["masks"]) + np.asarray(mirror["masks"])[:, :, ::-1]),
        rtol=1e-5, atol=1e-5,
    )  # fmt: skip


def test_exported_candidate_model_predicts_a_click(tiny_state, tmp_path):
    config, model, variables = tiny_state
    config = config.copy_and_resolve_references()
    config.predict = ml_collections.ConfigDict({"flip": True})
    path = save_segmenter(tmp_path / "m.digjax", variables, config)
    loaded = dig_jax.load_segmenter(path)
    assert isinstance(loaded, LoadedSegmenter)
    x = click_batch(1)
    np.testing.assert_allclose(
        np.asarray(loaded.logits(x)),
        np.asarray(flip_averaged(lambda v: model.apply(variables, v, train=False), x)["mask"]),
        rtol=1e-5, atol=1e-5,
    )  # fmt: skip
    image = np.random.default_rng(0).integers(0, 256, (40, 50, 3), dtype=np.uint8)
    click = stroke_map(np.array([[20.0, 18.0]]), (40, 50), closed=False)
    mask = loaded.predict(image, click)
    assert mask.shape == (40, 50) and set(np.unique(mask)) <= {0, 1}
    for bad in (-0.1, 2.0, True, "0.1"):
        config.predict = ml_collections.ConfigDict({"candidate_margin": bad})
        with pytest.raises(ValueError, match=r"predict\.candidate_margin"):
            LoadedSegmenter(config, variables)


def test_config_rejects_candidates_for_the_context_model():
    config = tiny_config()
    validate_config(config)
    config.model.input_kind = "context"
    with pytest.raises(ValueError, match=r"model\.num_masks"):
        validate_config(config)
    config = tiny_config(num_masks=4)
    with pytest.raises(ValueError, match=r"model\.num_masks"):
        validate_config(config)
    config = tiny_config()
    config.optim.trainable = ()
    with pytest.raises(ValueError, match=r"model\.train_trunk"):
        validate_config(config)


def test_optimizer_rejects_a_trainable_key_the_model_lacks():
    config = base_config("tiny").optim
    config.trainable = ("alt_mask",)  # misspelt
    tx = make_optimizer(config, total_steps=4)
    with pytest.raises(ValueError, match=r"optim\.trainable.*alt_mask"):
        tx.init({"alt_masks": jnp.zeros(2), "backbone": jnp.zeros(3)})


def test_the_pipeline_says_which_prompts_choose(tiny_state, tmp_path):
    """A crop without the previous mask looks like a creation click to the network; the
    pipeline's flag (a creation click on the photo) decides instead."""
    config, model, variables = tiny_state
    path = save_segmenter(tmp_path / "m.digjax", variables, config)
    loaded = dig_jax.load_segmenter(path)
    assert loaded.candidates
    x = click_batch(2)
    out = model.apply(variables, x, train=False)
    main, chosen = np.asarray(out["masks"][..., 0]), np.asarray(out["mask"])
    told = np.asarray(loaded.logits(x, jnp.array([0.0, 1.0])))
    np.testing.assert_allclose(told[0], main[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(told[1], chosen[1], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(loaded.logits(x)), chosen, rtol=1e-5, atol=1e-5)


def test_predictor_tells_the_network_and_agrees_with_predict(tiny_state, tmp_path):
    from dig_jax.evaluation import segmenter_predictor

    config, _, variables = tiny_state
    seg = dig_jax.load_segmenter(save_segmenter(tmp_path / "m.digjax", variables, config))
    told = []
    original = seg.logits
    seg.logits = lambda x, creation=None: told.append(np.asarray(creation)) or original(x, creation)
    shape = (40, 50)
    click = stroke_map(np.array([[20.0, 18.0]]), shape, closed=False)
    prev = np.zeros(shape, np.uint8)
    prev[5:15, 30:45] = 1
    image = np.random.default_rng(0).integers(0, 256, (*shape, 3), dtype=np.uint8)
    samples = [
        {"image": image, "gesture": click, "prev_mask": p, "has_prev": np.bool_(h),
         "context": np.int32(1), "gesture_kind": np.int32(0)}
        for p, h in ((np.zeros(shape, np.uint8), False), (prev, True))
    ]  # fmt: skip
    masks = segmenter_predictor(seg, batch_size=2)(samples)
    assert told[0][:2].tolist() == [1.0, 0.0]  # the creation click, then the refinement
    for sample, mask in zip(samples, masks, strict=True):
        previous = sample["prev_mask"] if sample["has_prev"] else None
        np.testing.assert_array_equal(seg.predict(image, click, previous), mask)
