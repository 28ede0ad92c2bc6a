"""The RClicks protocol with a transparent stand-in predictor: samples, determinism, batching."""

from __future__ import annotations

import numpy as np
import pytest

from dig_jax.gestures import GestureKind
from dig_jax.robustness.rclicks.maps import map_function
from dig_jax.robustness.rclicks.protocol import BASELINE, TRAJECTORIES, rclicks_ious
from dig_jax.robustness.rclicks.sampling import group_labels

_, DT = map_function("dt")


class DiscPredictor:
    """Adds (ADD) or removes (REMOVE) a disc of radius 10 px around the click; records samples."""

    def __init__(self):
        self.calls = []

    def __call__(self, samples):
        self.calls.append(samples)
        out = []
        for s in samples:
            ys, xs = np.nonzero(s["gesture"])
            yy, xx = np.mgrid[: s["gesture"].shape[0], : s["gesture"].shape[1]]
            disc = (yy - ys.mean()) ** 2 + (xx - xs.mean()) ** 2 <= 100
            prev = s["prev_mask"] > 0 if s["has_prev"] else np.zeros(disc.shape, bool)
            out.append((prev | disc if s["context"] == 1 else prev & ~disc).astype(np.uint8))
        return out


def make_items(n=3, h=40, w=52):
    rng = np.random.default_rng(0)
    items = []
    for k in range(n):
        image = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        gt = np.zeros((h, w), np.uint8)
        gt[6 + k : 30, 8 : 44 - 2 * k] = 1
        gt[6 + k, 8:20] = 255  # a void strip
        items.append((image, gt, gt == 1))
    return items


def test_trajectories_shapes_and_samples():
    predict = DiscPredictor()
    run = rclicks_ious(predict, make_items(), DT, seed=0, max_clicks=5)
    assert run.ious.shape == (3, TRAJECTORIES, 5) and run.clicks.shape == (3, TRAJECTORIES, 5, 2)
    assert np.isfinite(run.ious).all() and (run.ious >= 0).all() and (run.ious <= 1).all()
    assert len(predict.calls) == 5  # one predictor call per round for every trajectory
    first = predict.calls[0]
    assert len(first) == 3 * TRAJECTORIES
    assert all(not s["has_prev"] and s["context"] == 1 for s in first)
    assert all(s["gesture_kind"] == GestureKind.CLICK for s in first)
    assert run.positive[:, :, 0].all() and run.sampled[:, :BASELINE, 0].all()
    assert not run.sampled[:, BASELINE].any()
    later = [s for call in predict.calls[1:] for s in call]
    assert all(s["has_prev"] for s in later)
    assert {int(s["context"]) for s in later} <= {0, 1}
    assert run.positive.sum() < run.positive.size  # some clicks remove


def test_round_one_clicks_fall_in_their_groups():
    items = make_items(1)
    run = rclicks_ious(DiscPredictor(), items, DT, seed=3, max_clicks=1)
    image, gt, _ = items[0]
    labels = group_labels(DT(image, (gt == 1).astype(np.uint8), gt == 1))
    for t in range(BASELINE):
        x, y = run.clicks[0, t, 0].astype(int)
        assert labels[y, x] == t + 1
    x, y = run.clicks[0, BASELINE, 0]
    assert DT(image, gt, gt == 1)[int(y), int(x)] == DT(image, gt, gt == 1).max()


def test_same_seed_same_bytes_and_batching_does_not_matter():
    items = make_items()
    a = rclicks_ious(DiscPredictor(), items, DT, seed=7, max_clicks=4)
    b = rclicks_ious(DiscPredictor(), items, DT, seed=7, max_clicks=4)
    assert a.clicks.tobytes() == b.clicks.tobytes() and a.ious.tobytes() == b.ious.tobytes()
    for i in range(len(items)):
        one = rclicks_ious(DiscPredictor(), items[i : i + 1], DT, seed=7, start=i, max_clicks=4)
        assert one.clicks.tobytes() == a.clicks[i : i + 1].tobytes()
    c = rclicks_ious(DiscPredictor(), items, DT, seed=8, max_clicks=4)
    assert c.clicks[:, :BASELINE].tobytes() != a.clicks[:, :BASELINE].tobytes()
    assert c.clicks[:, BASELINE, 0].tobytes() == a.clicks[:, BASELINE, 0].tobytes()


def test_finished_and_empty_instances_give_clear_results():
    items = make_items(2)
    image, gt, _ = items[1]
    items[1] = (image, np.zeros_like(gt), None)  # no target at all: nothing to click
    perfect = lambda samples: [np.asarray(items[0][1] == 1, np.uint8) for _ in samples]
    run = rclicks_ious(perfect, items, DT, seed=0, max_clicks=4)
    assert (run.ious == 1).all()
    assert (run.clicks[0, :, 1:] == -1).all() and (run.clicks[1] == -1).all()
    m = run.tally().compute()
    assert m["sample_noc@90"] == 1 and m["dsb@90"] == 0 and m["nsr"] == 0
    assert all(np.isfinite(v) for v in m.values())


def test_bad_inputs_raise_naming_the_argument():
    image, gt, _ = make_items(1)[0]
    with pytest.raises(ValueError, match=r"items\[0\] gt"):
        rclicks_ious(DiscPredictor(), [(image, gt[:-1])], DT)
    with pytest.raises(ValueError, match=r"items\[0\] image"):
        rclicks_ious(DiscPredictor(), [(image[..., 0], gt)], DT)
    with pytest.raises(ValueError, match=r"items\[0\] gt"):
        rclicks_ious(DiscPredictor(), [(image, gt * 2)], DT)
    with pytest.raises(ValueError, match="max_clicks"):
        rclicks_ious(DiscPredictor(), [(image, gt)], DT, max_clicks=0)
