"""Validation scoring during training: per-kind, per-phase means and the RICE table."""

from __future__ import annotations

import numpy as np

from dig_jax.evaluation.scores import format_rice_table, score_batch, summarize_scores


def test_score_batch_known_answers():
    region = np.zeros((2, 4, 4), np.uint8)
    region[:, :2] = 1  # 8 pixels
    prev = np.zeros_like(region)
    prev[1, :1] = 1  # refinement: 4 of 8 pixels
    pred = region.copy()
    pred[0, 0] = 0  # creation prediction misses 4 pixels -> IoU 0.5
    batch = {"prev_mask": prev, "region": region, "target": region,
             "has_prev": np.array([False, True]), "gesture_kind": np.array([0, 4])}  # fmt: skip
    scores = score_batch(pred, batch)
    np.testing.assert_allclose(scores["iou_local"], [0.5, 1.0])
    np.testing.assert_allclose(scores["rice_local"], [0.5, 1.0])  # beta = 0.5, alpha = 1
    assert scores["has_prev"].tolist() == [False, True]


def test_summary_means_per_kind_and_phase_and_table():
    batches = [
        {"rice_local": np.array([0.2, 0.4, -0.5]), "gesture_kind": np.array([0, 0, 4]),
         "has_prev": np.array([False, False, True])},
        {"rice_local": np.array([0.6]), "gesture_kind": np.array([4]),
         "has_prev": np.array([False])},
    ]  # fmt: skip
    summary = summarize_scores(batches)
    expected = {
        "rice_local/all/create": 0.4,
        "rice_local/all/refine": -0.5,
        "rice_local/click/create": 0.3,
        "rice_local/rectangle/create": 0.6,
        "rice_local/rectangle/refine": -0.5,
    }
    assert summary.keys() == expected.keys()
    np.testing.assert_allclose([summary[k] for k in expected], list(expected.values()))
    table = format_rice_table(summary, title="t").splitlines()
    assert table[2].split() == ["click", "0.300", "-"]
    assert table[3].split() == ["rectangle", "0.600", "-0.500"]
    assert table[4].split() == ["all", "0.400", "-0.500"]


def test_rows_without_a_global_gt_are_left_out_of_the_global_scores():
    region = np.zeros((2, 4, 4), np.uint8)
    region[:, :2] = 1
    pred = region.copy()
    pred[1] = 0  # the second sample's region is unknown (empty): a stand-in would score it 1.0
    batch = {"prev_mask": np.zeros_like(region), "region": region * np.array([1, 0])[:, None, None],
             "target": region, "has_prev": np.array([False, False]),
             "gesture_kind": np.array([0, 0]), "has_region": np.array([True, False])}  # fmt: skip
    summary = summarize_scores([{k: np.asarray(v) for k, v in score_batch(pred, batch).items()}])
    assert summary["rice_global/all/create"] == 1.0  # the first sample only
    assert summary["iou_local/all/create"] == 0.5  # both: 1.0 and 0.0
    assert "has_region/all/create" not in summary
