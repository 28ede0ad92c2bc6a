"""The DIG evaluation protocol as DESIGN.md defines it: local vs global GT on real photos, the
iterative protocol's stopping rule, dataAug on DIG JSON, and results that render again."""

from __future__ import annotations

import collections
import json

import numpy as np
import pytest

from dig_jax.data.build import build
from dig_jax.data.pipeline import make_dataset, resolve_source
from dig_jax.evaluate import main as evaluate_main
from dig_jax.evaluation import SkipLog, evaluation_samples, iterative_ious
from dig_jax.evaluation.dig_tables import score_samples
from dig_jax.evaluation.protocol import load_dataset, nog_items
from dig_jax.evaluation.tables import all_tables
from dig_jax.evaluation.tables import main as tables_main
from dig_jax.gestures import Gesture, GestureKind, rasterize
from dig_jax.prompts import encode_context_clicks


@pytest.fixture(scope="module")
def grabcut_samples(shared_data):
    return list(evaluation_samples(load_dataset("grabcut[0:4]"), kinds=(0, 3), seed=3))


def scores(predict, samples):
    return score_samples(predict, samples, batch_size=4, progress=False).compute()


def test_local_gt_is_the_prior_with_only_the_targeted_error_fixed(grabcut_samples):
    refine = [s for s in grabcut_samples if s["mode"] == "refinement"]
    assert refine and len(refine) < len(grabcut_samples)
    oracle = scores(lambda ss: [s["local"] for s in ss], grabcut_samples)
    assert oracle["rice_local/all/create"] == pytest.approx(1.0)
    assert oracle["rice_local/all/refine"] == pytest.approx(1.0)
    identity = scores(lambda ss: [s["prev_mask"] * np.uint8(s["has_prev"]) for s in ss], refine)
    assert identity["rice_local/all/refine"] == pytest.approx(0.0)
    assert identity["rice_global/all/refine"] == pytest.approx(0.0)
    # Fixing every error is what the global column rewards, not the local one: the local GT
    # keeps the untargeted errors of the prior (the void-bearing training target did not).
    everything = scores(lambda ss: [s["region"] for s in ss], refine)
    assert everything["rice_global/all/refine"] == pytest.approx(1.0)
    assert everything["rice_local/all/refine"] < 0.9
    for s in refine:
        untargeted = (s["prev_mask"] != s["region"]) & (s["target"] == 255) & (s["void"] == 0)
        assert (s["local"][untargeted] == s["prev_mask"][untargeted]).all()


def test_grabcut_void_band_is_ignored(grabcut_samples):
    s = next(s for s in grabcut_samples if s["void"].any())  # GrabCut's 128 band
    pred = s["region"].copy()
    pred[s["void"] > 0] = 1 - pred[s["void"] > 0]  # wrong everywhere in the band only
    assert scores(lambda ss: [pred], [s])["iou_global/all/create"] == pytest.approx(1.0)


def test_iterative_protocol_stops_at_the_first_success_and_caps_at_20():
    items = nog_items(resolve_source("procedural:3:5", image_size=(96, 96)), None, SkipLog())[:3]
    solve_at = {"0": 3, "1": 1, "2": None}  # instance 2 is never solved
    calls = collections.Counter()

    def predict(samples):
        out = []
        for s in samples:
            calls[s["image_id"]] += 1
            k = solve_at[s["image_id"]]
            solved = k is not None and calls[s["image_id"]] >= k
            out.append((s["region"] if solved else np.zeros_like(s["region"])).astype(np.uint8))
        return out

    ious = iterative_ious(predict, items, int(GestureKind.CLICK))
    assert ious.shape == (3, 20)
    assert calls == {"0": 3, "1": 1, "2": 20}  # no gesture after the mask is right
    np.testing.assert_allclose(ious[0, 2:], 1.0)
    assert ious[0, 1] < 1.0 and ious[2].max() < 1.0


@pytest.fixture(scope="module")
def dig_json_set(tmp_path_factory):
    out = tmp_path_factory.mktemp("dig")
    table = build(["procedural:8:2"], out, image_size=96, kinds=(0, 4), progress=False)
    return f"dig_json:{out / 'dig.json'}:{out / 'images'}", table["procedural:8:2"]


@pytest.mark.parametrize("p", [0.0, 0.5, 1.0])
def test_dataaug_probability_is_honoured_on_dig_json(dig_json_set, p):
    spec, counts = dig_json_set
    assert counts["multi-region"] > 0
    ds = make_dataset(dict(sources=[spec], image_size=32, batch_size=1, multi_region_prob=p,
                           num_epochs=1, seed=4, shard=(0, 1)), "train")  # fmt: skip
    has_prev = sum(int(b["has_prev"][0]) for b in ds)
    multi = has_prev - counts["refinement"]  # creation samples replaced by their variant
    assert 0 <= multi <= counts["multi-region"]
    if p == 0.0:
        assert multi == 0
    elif p == 1.0:
        assert multi == counts["multi-region"]
    else:
        assert 0 < multi < counts["multi-region"]


def test_evaluate_runs_on_dig_json_and_results_render_again(dig_json_set, tmp_path):
    spec, _ = dig_json_set
    argv = ["--predictor", "filled", "--datasets", spec, "--out", str(tmp_path)]
    assert evaluate_main([*argv, "--modes", "creation,refinement,multi_region"]) == 0
    payload = json.loads((tmp_path / "metrics.json").read_text())
    metrics = payload["results"]["peer:filled"]["dig"]["metrics"]
    for phase in ("create", "refine", "multi"):
        assert f"{spec}/iou_global/all/{phase}" in metrics
    assert all_tables(payload["results"]) + "\n" == (tmp_path / "tables.md").read_text()

    # A run made separately merges into one set of tables (peers once, checkpoints later).
    other = {"results": {"other": payload["results"]["peer:filled"]}}
    (tmp_path / "other.json").write_text(json.dumps(other))
    merged_dir = tmp_path / "merged"
    argv = [str(tmp_path / "metrics.json"), str(tmp_path / "other.json"), "--out", str(merged_dir)]
    assert tables_main(argv) == 0
    merged = json.loads((merged_dir / "metrics.json").read_text())["results"]
    assert set(merged) == {"peer:filled", "other"} and merged["other"] == merged["peer:filled"]
    text = (merged_dir / "tables.md").read_text()
    assert "| peer:filled |" in text and "| other |" in text
    with pytest.raises(SystemExit):
        tables_main([str(tmp_path / "missing.json")])


def test_random_context_is_drawn_per_click():
    gesture = rasterize(Gesture(GestureKind.SCRIBBLE, [[5.0, 30], [120, 30]], False), (64, 128))
    batch = {
        "gesture": gesture[None],
        "context": np.array([1]),
        "gesture_kind": np.array([int(GestureKind.SCRIBBLE)]),
    }
    per_gesture = encode_context_clicks(batch)
    assert per_gesture["negative"].sum() == 0 and per_gesture["positive"].sum() > 0
    per_click = encode_context_clicks(batch, click_rng=np.random.default_rng(1))
    assert per_click["positive"].sum() > 0 and per_click["negative"].sum() > 0
    union = per_click["positive"] | per_click["negative"]
    np.testing.assert_array_equal(union, per_gesture["positive"])
