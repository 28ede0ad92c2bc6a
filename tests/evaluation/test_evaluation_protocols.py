"""Evaluation protocols against predictors with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from dig_jax.data.sources.procedural import procedural
from dig_jax.evaluation import (
    SkipLog,
    apply_context_strategy,
    evaluate_samples,
    evaluation_samples,
    largest_error,
    nog,
)
from dig_jax.gestures.types import Context, GestureKind

SIZE = 128


@pytest.fixture(scope="module")
def samples():
    records = procedural(1, 2, size=(SIZE, SIZE))
    return list(evaluation_samples(records, kinds=(0, 4), seed=1))


def oracle(samples):
    """Perfect model: returns the global ground truth."""
    return [s["region"].astype(np.uint8) for s in samples]


def keep_previous(samples):
    """Does nothing: returns the previous mask (empty for creation)."""
    return [s["prev_mask"] * np.uint8(s["has_prev"]) for s in samples]


def test_samples_deterministic_and_complete(samples):
    again = list(evaluation_samples(procedural(1, 2, size=(SIZE, SIZE)), kinds=(0, 4), seed=1))
    assert len(samples) == len(again) > 0
    for a, b in zip(samples, again, strict=True):
        assert np.array_equal(a["gesture"], b["gesture"]) and a["mode"] == b["mode"]
    modes = {s["mode"] for s in samples}
    assert modes == {"creation", "refinement"}
    assert {int(s["gesture_kind"]) for s in samples} == {0, 4}
    for s in samples:
        assert bool(s["has_prev"]) == (s["mode"] == "refinement")


def test_oracle_scores_one_and_doing_nothing_scores_zero(samples):
    metrics, count = evaluate_samples(oracle, samples, batch_size=4)
    assert count == len(samples)
    assert metrics["iou_global/all/create"] == pytest.approx(1.0)
    assert metrics["rice_global/all/refine"] == pytest.approx(1.0)
    metrics, _ = evaluate_samples(keep_previous, samples, batch_size=3)
    assert metrics["rice_global/all/refine"] == pytest.approx(0.0)
    assert metrics["rice_local/click/refine"] == pytest.approx(0.0)
    assert metrics["iou_global/all/create"] == pytest.approx(0.0)


def test_bad_record_is_reported_and_skipped():
    class Broken:
        source, image_id, describe = "broken", "x", "broken.png"

        def load(self):
            raise ValueError("broken.png: cannot decode image")

    skipped = SkipLog()
    records = [Broken(), *procedural(3, 1, size=(SIZE, SIZE))]
    out = list(evaluation_samples(records, kinds=(0,), modes=("creation",), skipped=skipped))
    assert out and skipped.items[0][0] == "broken.png"


def test_largest_error_context():
    gt = np.zeros((20, 20), np.uint8)
    gt[2:12, 2:12] = 1
    pred = gt.copy()
    pred[2:4, 2:12] = 0  # 20 px missing
    pred[15:17, 15:18] = 1  # 6 px extra
    comp, context = largest_error(pred, gt)
    assert context == Context.ADD and comp.sum() == 20
    gt[2:4, 2:12] = 255  # the missing band becomes void: only the extra pixels remain
    comp, context = largest_error(pred, gt)
    assert context == Context.REMOVE and comp.sum() == 6
    assert largest_error(gt == 1, gt) is None


def test_nog_oracle_reaches_every_threshold_at_first_gesture():
    records = procedural(5, 1, size=(SIZE, SIZE))
    from dig_jax.evaluation.protocol import nog_items

    items = nog_items(records, None, SkipLog())
    out = nog(oracle, items, int(GestureKind.CLICK), max_interactions=5)
    assert out["ious"].shape == (len(items), 5)
    assert out["noc"].shape == (len(items), 3)  # default thresholds 0.80, 0.85, 0.90
    assert (out["noc"] == 1).all() and not out["failed"].any()
    out = nog(keep_previous, items, int(GestureKind.CLICK), max_interactions=5)
    assert (out["noc"] == 5).all() and out["failed"].all()


def test_context_strategies():
    batch = {"context": np.array([1, 0, 1, 0], np.int32)}
    rng = np.random.default_rng(0)
    assert apply_context_strategy(batch, "oracle", rng)["context"].tolist() == [1, 0, 1, 0]
    assert apply_context_strategy(batch, "positive", rng)["context"].tolist() == [1] * 4
    assert apply_context_strategy(batch, "negative", rng)["context"].tolist() == [0] * 4
    random = apply_context_strategy(batch, "random", np.random.default_rng(0))["context"]
    assert set(random.tolist()) <= {0, 1}
    with pytest.raises(ValueError, match="strategy must be one of"):
        apply_context_strategy(batch, "guess", rng)
