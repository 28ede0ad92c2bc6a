"""The paper's test sampling (every part and the occluded whole region; every correction of
>= 100 px) against the earlier one (largest part, largest correction), and tables that say how
many samples they hold."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from dig_jax.data.priors import find_corrections, synthesize_prior
from dig_jax.data.regions import extract_regions
from dig_jax.evaluation import SkipLog, evaluation_samples, peer_predictor
from dig_jax.evaluation.evaluators import DigTables
from dig_jax.evaluation.protocol import creation_targets, iter_instances, load_dataset
from dig_jax.evaluation.tables import (
    all_tables,
    kind_table,
    merge_results,
    nog_table,
    paired_nog,
    paired_table,
)

KINDS = (0, 4)


def _counts(samples) -> collections.Counter:
    return collections.Counter((s["mode"], s["image_id"], int(s["instance_id"])) for s in samples)


def _expected_corrections(records, seed: int) -> dict:
    """Corrections of >= 100 px of each region's prior, drawn as the protocol draws it."""
    out = {}
    for inst in iter_instances(records):
        rng = np.random.default_rng([seed, *inst.index, 99])
        prev = synthesize_prior(inst.loaded.image, inst.region.mask, rng, void=inst.loaded.void)
        out[(inst.image_id, inst.region.instance_id)] = find_corrections(
            prev, inst.region.mask, inst.loaded.void
        )
    return out


def test_paper_sampling_takes_every_part_whole_regions_and_every_correction(bench_folder):
    records = load_dataset(f"folder:{bench_folder}")
    modes = ("creation", "refinement", "multi_region")
    paper = list(evaluation_samples(records, kinds=KINDS, modes=modes, seed=3))
    largest = list(evaluation_samples(records, kinds=KINDS, modes=modes, seed=3,
                                      sampling="largest"))  # fmt: skip
    corrections = _expected_corrections(records, 3)
    n_paper, n_largest = _counts(paper), _counts(largest)
    for (image_id, iid), found in corrections.items():
        parts = 3 if iid == 1 else 1  # the first region is split in two: whole + 2 parts
        assert n_paper["creation", image_id, iid] == parts * len(KINDS), (image_id, iid)
        assert n_paper["multi_region", image_id, iid] == parts * len(KINDS)
        assert n_paper["refinement", image_id, iid] == len(found) * len(KINDS)
        for mode in modes:
            assert n_largest[mode, image_id, iid] == len(KINDS)
    assert max(map(len, corrections.values())) > 1  # more than the largest one is scored
    whole = [s for s in paper if s["mode"] == "creation" and int(s["instance_id"]) == 1
             and s["target_index"] == 0]  # fmt: skip
    assert whole and all((s["local"] == s["region"]).all() for s in whole)
    # the largest correction, the largest part: the earlier protocol
    for s in (s for s in largest if s["mode"] == "refinement"):
        found = corrections[s["image_id"], int(s["instance_id"])]
        fixed = np.abs(s["local"].astype(int) - s["prev_mask"]).sum()
        assert fixed == max(c.area for c in found)


def test_creation_targets():
    mask = np.zeros((1, 40, 40), np.uint8)
    mask[0, 0:20, 0:20] = 1  # 400 px
    mask[0, 25:40, 25:40] = 1  # 225 px... too small to be a part (< 300)
    mask[0, 22:40, 0:20] = 1  # 360 px
    (region,) = extract_regions(mask)
    assert region.num_parts == 2
    assert creation_targets(region) == [None, 0, 1]
    assert creation_targets(region, "largest") == [0]
    with pytest.raises(ValueError, match="sampling"):
        next(evaluation_samples([], sampling="every"))


def test_tables_state_sample_counts_and_print_creation_once(bench_folder):
    evaluator = DigTables(peer_predictor("filled"), [f"folder:{bench_folder}"], kinds=KINDS,
                          modes=("creation", "refinement"), progress=False)  # fmt: skip
    metrics = evaluator.compute(evaluator.run())
    spec = f"folder:{bench_folder}"
    assert metrics[f"{spec}/n/all/create"] == 2 * (3 + 1) * len(KINDS)
    results = {"peer:filled": {"dig": {"type": "dig_tables", "metrics": metrics}}}
    table = kind_table(results, "rice_local", "create")
    n = int(metrics[f"{spec}/n/all/create"])
    assert table.splitlines()[2].endswith("| all | n |") and table.endswith(f"| {n} |")
    text = all_tables(results)
    assert text.count(", creation**") == 2  # rice_local (= iou_local) and, parts here, iou_global
    one_part = {k: v for k, v in metrics.items() if "/iou_global/" not in k}
    one_part.update({k.replace("/rice_local/", "/iou_global/"): v for k, v in metrics.items()
                     if "/rice_local/" in k and k.endswith("/create")})  # fmt: skip
    text = all_tables({"p": {"dig": {"type": "dig_tables", "metrics": one_part}}})
    assert text.count(", creation**") == 1


def test_nog_title_states_the_real_cap():
    entry = {"type": "iterative", "max_interactions": 5,
             "metrics": {"d/scratch/click/NoC@90": 3.0, "d/scratch/click/NoF@90": 1.0}}  # fmt: skip
    assert "at most 5 gestures" in nog_table({"p": {"nog": entry}}, 90)
    del entry["max_interactions"]
    assert "at most 20 gestures" in nog_table({"p": {"nog": entry}}, 90)


def test_unknown_sampling_is_refused_by_the_evaluator():
    evaluator = DigTables(peer_predictor("filled"), ["procedural:1:0"], sampling="all",
                          progress=False, skipped=SkipLog())  # fmt: skip
    with pytest.raises(ValueError, match="sampling"):
        evaluator.run()


def test_build_writes_whole_occluded_regions_as_well(bench_folder, tmp_path):
    from dig_jax.data.build import build
    from dig_jax.data.sources.dig_json import dig_json

    table = build([f"folder:{bench_folder}"], tmp_path, kinds=(0,), refinement=False,
                  multi=False, progress=False)  # fmt: skip
    assert table[f"folder:{bench_folder}"]["creation"] == 2 * (3 + 1)  # whole + 2 parts, 1 part
    samples = [e.load() for e in dig_json(tmp_path / "dig.json", tmp_path / "images")]
    whole = [s for s in samples if (s["local"] == s["region"]).all() and s["instance_id"] == 1]
    assert len(whole) == 2  # one per photo: the occluded region taken whole


def test_evaluate_nog_tables_state_nog_max(tmp_path):
    from dig_jax.evaluate import main as evaluate_main

    argv = ["--predictor", "filled", "--datasets", "procedural:1:3", "--modes", "creation",
            "--nog-kinds", "click", "--nog-max", "3", "--out", str(tmp_path)]  # fmt: skip
    assert evaluate_main(argv) == 0
    text = (tmp_path / "tables.md").read_text()
    assert "at most 3 gestures" in text and "at most 20" not in text


def _nog_entry(trajectories: dict, cap: int = 4) -> dict:
    return {"type": "iterative", "max_interactions": cap, "metrics": {},
            "trajectories": {k: {"instances": names, "ious": ious}
                             for k, (names, ious) in trajectories.items()}}  # fmt: skip


def test_paired_nog_matches_instances_by_name_and_bounds_the_difference():
    reach = {n: [0.5] * (n - 1) + [0.95] * (5 - n) for n in (1, 2, 3, 4)}  # NoG@90 = n
    never = [0.5] * 4  # counted as the cap, 4
    base = {"d/scratch/click": (["a", "b", "c"], [reach[1], reach[2], never]),
            "e/f/scratch/click": (["x", "y"], [reach[3], reach[3]])}  # fmt: skip
    other = {"d/scratch/click": (["c", "a", "b"], [reach[2], reach[1], reach[2]]),
             "e/f/scratch/click": (["y", "x", "z"], [reach[1], reach[1], reach[4]])}  # fmt: skip
    results = {"base": {"nog": _nog_entry(base)}, "other": {"nog": _nog_entry(other)}}
    rows = {r["key"]: r for r in paired_nog(results, "base", "other", 90, draws=2000)}
    d = rows["d/scratch/click"]  # a: 1 -> 1, b: 2 -> 2, c: 4 -> 2
    assert d["n"] == 3 and d["base"] == pytest.approx(7 / 3) and d["other"] == pytest.approx(5 / 3)
    assert d["diff"] == pytest.approx(-2 / 3) and -2.0 <= d["low"] <= d["diff"] <= d["high"] <= 0.0
    e = rows["e/f/scratch/click"]  # "z" ran only for other: left out
    assert e["n"] == 2 and e["diff"] == pytest.approx(-2.0) and e["low"] == e["high"] == -2.0
    pooled = rows["all/scratch/click"]  # five pairs over both datasets
    assert pooled["n"] == 5 and pooled["diff"] == pytest.approx((-2 - 4) / 5)
    same = paired_nog({"base": results["base"], "copy": results["base"]}, "base", "copy")
    assert all(r["diff"] == r["low"] == r["high"] == 0.0 for r in same)
    table = paired_table(results, "base")
    assert "Paired NoG@90 against base" in table and "| d/scratch/click | other | 3 |" in table
    with pytest.raises(ValueError, match="no predictor 'nobody'"):
        paired_nog(results, "nobody", "other")
    with pytest.raises(ValueError, match="has no NoG trajectories"):
        paired_nog({**results, "old": {"nog": {"type": "iterative", "metrics": {}}}}, "base", "old")
    capped = {"other": {"nog": _nog_entry(other, cap=5)}, "base": results["base"]}
    with pytest.raises(ValueError, match="at most 4 and 5 gestures"):
        paired_nog(capped, "base", "other")


def test_evaluate_saves_nog_trajectories_for_paired_tables(tmp_path):
    import json

    from dig_jax.evaluate import main as evaluate_main
    from dig_jax.evaluation.tables import main as tables_main

    argv = ["--predictor", "filled", "--datasets", "procedural:1:3", "--modes", "creation",
            "--nog-kinds", "click", "--nog-max", "3", "--out", str(tmp_path / "a")]  # fmt: skip
    assert evaluate_main(argv) == 0
    payload = json.loads((tmp_path / "a" / "metrics.json").read_text())
    entry = payload["results"]["peer:filled"]["nog"]
    saved = entry["trajectories"]["procedural:1:3/scratch/click"]
    assert len(saved["instances"]) == len(saved["ious"]) >= 1
    assert all(len(row) == 3 and all(0.0 <= v <= 1.0 for v in row) for row in saved["ious"])
    nog90 = entry["metrics"]["procedural:1:3/scratch/click/NoC@90"]
    counts = [next((i + 1 for i, v in enumerate(row) if v >= 0.9), 3) for row in saved["ious"]]
    assert nog90 == pytest.approx(np.mean(counts))  # the trajectories are the table's
    payload["results"] = {"copy": payload["results"]["peer:filled"]}
    (tmp_path / "b.json").write_text(json.dumps(payload))
    out = tmp_path / "t"
    first = str(tmp_path / "a" / "metrics.json")
    argv = [first, str(tmp_path / "b.json"), "--paired", "peer:filled", "--out", str(out)]
    assert tables_main(argv) == 0
    assert "| procedural:1:3/scratch/click | copy |" in (out / "tables.md").read_text()
    with pytest.raises(SystemExit):
        tables_main([str(tmp_path / "a" / "metrics.json"), "--paired", "nobody"])


def test_merge_results_joins_one_predictors_runs_per_dataset():
    first = {"p": {"nog": _nog_entry({"d/scratch/click": (["a"], [[0.95] * 4])})}}
    second = {"p": {"nog": _nog_entry({"e/scratch/click": (["b"], [[0.5] * 4])})}}
    first["p"]["nog"]["metrics"] = {"d/scratch/click/NoC@90": 1.0}
    second["p"]["nog"]["metrics"] = {"e/scratch/click/NoC@90": 4.0}
    merged = merge_results([{"results": first}, {"results": second}])["p"]["nog"]
    assert merged["metrics"] == {"d/scratch/click/NoC@90": 1.0, "e/scratch/click/NoC@90": 4.0}
    assert set(merged["trajectories"]) == {"d/scratch/click", "e/scratch/click"}
    again = merge_results([{"results": first}, {"results": first}])["p"]["nog"]
    assert again["metrics"] == first["p"]["nog"]["metrics"]  # the same run twice: unchanged
