"""Robust prompts in the training loop (`dig_jax.train.robust`): the prior's box law, clicks by
clicking group, the in-loop attacks on a tiny model, determinism, and the loop with them."""

from __future__ import annotations

from pathlib import Path

import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from scipy import stats
from tiny_models import tiny_variables

from dig_jax.gestures import rasterize, simulate_creation
from dig_jax.gestures.types import GestureKind
from dig_jax.metrics import ciou_loss, tight_box
from dig_jax.models.interactive import build_segmenter
from dig_jax.prompts.encode import gesture_map_box
from dig_jax.robustness.breps.prior import BREPS_GAMMA
from dig_jax.robustness.rclicks.sampling import group_labels
from dig_jax.train.robust import (
    MAX_PRIOR_LOSS,
    Attacker,
    RobustConfig,
    group_click,
    prior_box,
    redraw_group_clicks,
    robust_batch,
)

ROOT = Path(__file__).resolve().parents[2]
S = 32


def _batch(kinds: tuple[int, ...]) -> dict[str, np.ndarray]:
    """Creation samples of `kinds` on an ellipse, gestures simulated in the 32² crop."""
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[:S, :S]
    region = (((xx - 16) / 9.0) ** 2 + ((yy - 15) / 7.0) ** 2 < 1).astype(np.uint8)
    n = len(kinds)
    image = np.full((n, S, S, 3), 40, np.uint8)
    image[:, region > 0] = (200, 90, 50)
    gestures = np.stack(
        [
            np.asarray(rasterize(simulate_creation(GestureKind(k), region, rng), (S, S)))
            for k in kinds
        ]
    ).astype(np.uint8)
    zeros = np.zeros((n, S, S), np.uint8)
    return {
        "image": image, "gesture": gestures, "distance": np.full((n, S, S), 255, np.uint8),
        "prev_mask": zeros.copy(), "target": np.repeat(region[None], n, 0),
        "region": np.repeat(region[None], n, 0), "local": np.repeat(region[None], n, 0),
        "void": zeros.copy(), "gesture_kind": np.array(kinds, np.int32),
        "context": np.ones(n, np.int32), "has_prev": np.zeros(n, bool),
    }  # fmt: skip


@pytest.fixture(scope="module")
def tiny_attacker():
    config, variables = tiny_variables()
    model = build_segmenter(ml_collections.ConfigDict(config).model)
    robust = RobustConfig(box_attack_prob=1.0, stroke_attack_prob=1.0, attack_steps=2)
    return Attacker(model, robust), jax_tree(variables), robust


def jax_tree(variables):
    import jax

    return jax.tree.map(jnp.asarray, variables)


def test_config_checks_and_default_off():
    assert not RobustConfig().enabled
    assert RobustConfig(click_group_prob=0.1).enabled
    with pytest.raises(ValueError, match="box_attack_prob: must be in"):
        RobustConfig(box_attack_prob=1.5)
    with pytest.raises(ValueError, match="attack_steps"):
        RobustConfig(attack_steps=0)
    absent = ml_collections.ConfigDict({"seed": 0})
    assert RobustConfig.from_config(absent) == RobustConfig()


def test_prior_boxes_follow_the_breps_gamma_law_and_stay_in_the_image():
    tight = np.array([20.0, 30.0, 90.0, 70.0], np.float32)
    boxes = np.stack([prior_box(tight, (100, 120), np.random.default_rng(s)) for s in range(600)])
    assert (boxes[:, :2] >= 0).all() and (boxes[:, 2] <= 120).all() and (boxes[:, 3] <= 100).all()
    assert (boxes[:, 2:] - boxes[:, :2] >= 1).all()
    losses = np.asarray(ciou_loss(boxes, np.broadcast_to(tight, boxes.shape)))
    # the Gamma law truncated at MAX_PRIOR_LOSS: a KS test against its CDF
    law = stats.gamma(BREPS_GAMMA.shape, scale=BREPS_GAMMA.scale)
    cdf = lambda x: law.cdf(np.minimum(x, MAX_PRIOR_LOSS)) / law.cdf(MAX_PRIOR_LOSS)
    assert stats.kstest(losses, cdf).pvalue > 0.01
    same = prior_box(tight, (100, 120), np.random.default_rng(3))
    np.testing.assert_array_equal(same, boxes[3])


def test_group_clicks_land_in_every_group_equally_often():
    ramp = np.tile(np.arange(1, 41, dtype=np.float32), (10, 1))  # mass grows to the right
    labels = group_labels(ramp)
    rng = np.random.default_rng(0)
    hits = np.zeros(11, int)
    for _ in range(2000):
        x, y = group_click(ramp, rng)
        hits[labels[int(y), int(x)]] += 1
    assert hits[0] == 0
    np.testing.assert_allclose(hits[1:] / 2000, 0.1, atol=0.025)  # G1..G10 uniform
    assert group_click(np.zeros((4, 4), np.float32), rng) is None


def test_redrawn_clicks_fall_on_the_error_they_correct():
    batch = _batch((0, 0, 4))
    batch["has_prev"][1] = True
    batch["prev_mask"][1] = batch["target"][1]
    batch["prev_mask"][1, 10:20, 12:16] = 0  # the correction adds this strip back
    uniform = lambda image, target, error: error.astype(np.float32)
    before = {k: v.copy() for k, v in batch.items()}
    done = redraw_group_clicks(batch, np.random.default_rng(1), 1.0, uniform)
    assert done == 2
    for i in (0, 1):
        rows, cols = np.nonzero(batch["gesture"][i])
        centre = round(rows.mean()), round(cols.mean())
        error = batch["target"][i] == 1 if i == 0 else batch["prev_mask"][i] != batch["target"][i]
        assert error[centre]
    np.testing.assert_array_equal(batch["gesture"][2], before["gesture"][2])  # a rectangle


def test_robust_batch_is_deterministic_leaves_its_input_and_is_off_at_zero(tiny_attacker):
    attacker, variables, _ = tiny_attacker
    batch = _batch((4, 4, 3, 1, 0, 2))
    copy = {k: v.copy() for k, v in batch.items()}
    config = RobustConfig(box_prior_prob=1.0, box_attack_prob=1.0, click_group_prob=1.0,
                          stroke_attack_prob=1.0, attack_steps=2)  # fmt: skip
    a, counts = robust_batch(batch, np.random.default_rng(5), config, attacker, variables)
    b, _ = robust_batch(batch, np.random.default_rng(5), config, attacker, variables)
    for key in batch:
        np.testing.assert_array_equal(batch[key], copy[key])  # the input is not changed
        np.testing.assert_array_equal(a[key], b[key])  # same rng, same bytes
    assert counts == {"box_prior": 0, "box_attack": 2, "click_group": 1, "stroke_attack": 2}
    off, zero = robust_batch(batch, np.random.default_rng(5), RobustConfig())
    assert sum(zero.values()) == 0
    for key in batch:
        np.testing.assert_array_equal(off[key], batch[key])
    with pytest.raises(ValueError, match="need an attacker"):
        robust_batch(batch, np.random.default_rng(0), RobustConfig(box_attack_prob=1.0))


def test_attacked_boxes_are_valid_rectangles_inside_the_crop(tiny_attacker):
    attacker, variables, _ = tiny_attacker
    batch = _batch((4, 0, 4, 4))
    rows = attacker.boxes(variables, batch)
    assert rows == (0, 2)  # the first ATTACK_ROWS creation rectangles
    tight = tight_box(batch["target"][0])
    for i in rows:
        box = gesture_map_box(batch["gesture"][i])
        assert box is not None and (box[:2] >= 0).all() and (box[2:] <= S).all()
        assert float(ciou_loss(box, tight.astype(np.float32))) < 1.0  # near the object
        assert batch["distance"][i][batch["gesture"][i] > 0].max() == 0


def test_attacked_strokes_stay_in_the_crop_and_keep_their_kind(tiny_attacker):
    attacker, variables, _ = tiny_attacker
    batch = _batch((1, 3, 2))
    before = batch["gesture"].copy()
    assert attacker.strokes(variables, batch, np.random.default_rng(0)) == 2
    assert batch["gesture_kind"].tolist() == [1, 3, 2]
    for i in (0, 1):
        assert batch["gesture"][i].any() and batch["gesture"][i].max() == 1
    np.testing.assert_array_equal(batch["gesture"][2], before[2])  # past ATTACK_ROWS


def test_the_loop_logs_robust_draws_and_their_time_share(tmp_path):
    from tiny_models import TINY_MODEL

    from dig_jax.train.__main__ import load_config
    from dig_jax.train.config import validate_config
    from dig_jax.train.train import train

    for variant in ("offline", "offline_plain", "demo", "tiny"):
        validate_config(load_config(f"{ROOT}/experiments/lite_robust.py:{variant}"))
    config = load_config(f"{ROOT}/experiments/hrnet_base.py:tiny")
    config.model.update({k: tuple(v) if isinstance(v, list) else v for k, v in TINY_MODEL.items()})
    config.robust = ml_collections.ConfigDict(
        dict(box_prior_prob=1.0, box_attack_prob=1.0, click_group_prob=1.0, attack_steps=1)
    )
    config.total_steps, config.log_every, config.export = 2, 2, False
    train(config, tmp_path)
    text = (tmp_path / "metrics.jsonl").read_text()
    rows = [line for line in text.splitlines() if '"loss"' in line]
    assert '"robust/time_share"' in rows[-1] and '"robust/click_group"' in rows[-1]
    config.robust.attack_steps = 0
    with pytest.raises(ValueError, match=r"config\.robust\.attack_steps"):
        validate_config(config)
