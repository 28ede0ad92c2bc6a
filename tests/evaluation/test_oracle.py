"""The oracles prove the scorer: returning each sample's local GT scores IoU_local = RICE_local
= 1 for every kind and phase, and returning the region scores RICE_global = 1, both on a
benchmark-style folder and on the DIG-JSON set `dig_jax.data.build` makes from the same photos.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dig_jax.data.build import build
from dig_jax.evaluate import main as evaluate_main
from dig_jax.evaluation import SkipLog, evaluation_samples, peer_predictor
from dig_jax.evaluation.dig_tables import score_samples
from dig_jax.evaluation.protocol import iter_instances, load_dataset

KINDS = ("click", "scribble", "loose_lasso", "tight_lasso", "rectangle")
PHASES = ("create", "refine", "multi")


@pytest.fixture(scope="module")
def specs(bench_folder, tmp_path_factory):
    out = tmp_path_factory.mktemp("dig")
    build([f"folder:{bench_folder}"], out, progress=False)
    dig = f"dig_json:{out / 'dig.json'}:{out / 'images'}"
    return {"folder": f"folder:{bench_folder}", "dig_json": dig}


def _metrics(spec: str, name: str) -> dict[str, float]:
    samples = evaluation_samples(
        load_dataset(spec), modes=("creation", "refinement", "multi_region"), seed=2
    )
    return score_samples(peer_predictor(name), samples, progress=False).compute()


@pytest.mark.parametrize("source", ["folder", "dig_json"])
def test_oracle_scores_one_locally_for_every_kind_and_phase(specs, source):
    metrics = _metrics(specs[source], "oracle")
    for phase in PHASES:
        for kind in (*KINDS, "all"):
            assert metrics[f"iou_local/{kind}/{phase}"] == pytest.approx(1.0), (kind, phase)
            assert metrics[f"rice_local/{kind}/{phase}"] == pytest.approx(1.0), (kind, phase)


@pytest.mark.parametrize("source", ["folder", "dig_json"])
def test_region_oracle_scores_one_globally(specs, source):
    metrics = _metrics(specs[source], "oracle_region")
    for phase in PHASES:
        assert metrics[f"rice_global/all/{phase}"] == pytest.approx(1.0), phase
        assert metrics[f"iou_global/all/{phase}"] == pytest.approx(1.0), phase
    # the whole region is not the local GT of a part or of one correction among several
    assert metrics["rice_local/all/create"] < 1.0


def test_evaluate_cli_takes_the_oracles(specs, tmp_path):
    argv = ["--predictor", "oracle,oracle_region", "--datasets", specs["dig_json"],
            "--modes", "creation,refinement", "--out", str(tmp_path)]  # fmt: skip
    assert evaluate_main(argv) == 0
    results = json.loads((tmp_path / "metrics.json").read_text())["results"]
    local = results["peer:oracle"]["dig"]["metrics"]
    glob = results["peer:oracle_region"]["dig"]["metrics"]
    for phase in ("create", "refine"):
        assert local[f"{specs['dig_json']}/rice_local/all/{phase}"] == pytest.approx(1.0)
        assert glob[f"{specs['dig_json']}/rice_global/all/{phase}"] == pytest.approx(1.0)


def test_evaluate_refuses_rice_global_without_a_global_gt(specs, tmp_path):
    _, path, images = specs["dig_json"].split(":")
    rows = json.loads(Path(path).read_text())
    for row in rows:
        row.pop("obj_gt")
    (tmp_path / "release.json").write_text(json.dumps(rows))
    spec = f"dig_json:{tmp_path / 'release.json'}:{images}"
    argv = ["--predictor", "oracle", "--datasets", spec, "--out", str(tmp_path / "out")]
    assert evaluate_main(argv) == 0
    payload = json.loads((tmp_path / "out" / "metrics.json").read_text())
    metrics = payload["results"]["peer:oracle"]["dig"]["metrics"]
    assert metrics[f"{spec}/rice_local/all/refine"] == pytest.approx(1.0)
    assert not any("/rice_global/" in k or "/iou_global/" in k for k in metrics)
    assert any("rice_global/iou_global refused" in reason for _, reason in payload["skipped"])
    skipped = SkipLog()  # the iterative protocols need the whole region: reported, not guessed
    assert list(iter_instances(load_dataset(spec), skipped=skipped)) == []
    assert skipped and all("no global GT" in reason for _, reason in skipped.items)
