"""evaluate / attack on bad arguments, NaN checkpoints and empty runs (tests/reliability_cases.md,
section "commands"): one-line errors, non-zero exits, earlier results never replaced."""

from __future__ import annotations

import json
import struct

import cv2
import numpy as np
import pytest
from flax import serialization
from tiny_models import tiny_variables

from dig_jax import attack, evaluate
from dig_jax.export import MAGIC, save_segmenter
from dig_jax.outputs import record_written

CONFIG = tiny_variables()[0]


def variables(var: float = 1.0, nan: bool = False) -> dict:
    return tiny_variables(var=var, nan=nan)[1]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A good checkpoint, one with NaN weights (written raw), one that predicts NaN, data."""
    root = tmp_path_factory.mktemp("cli")
    good = save_segmenter(root / "good.digjax", variables(), CONFIG)
    nan_weights = root / "nan.digjax"
    header = json.dumps(CONFIG).encode()
    payload = serialization.msgpack_serialize(variables(nan=True))
    nan_weights.write_bytes(MAGIC + struct.pack("<Q", len(header)) + header + payload)
    nan_out = save_segmenter(root / "negvar.digjax", variables(var=-1.0), CONFIG)
    data = root / "toyset"
    (data / "images").mkdir(parents=True)
    (data / "masks").mkdir()
    mask = np.zeros((24, 32), np.uint8)
    mask[4:16, 6:20] = 255
    cv2.imwrite(str(data / "images" / "im0.png"), np.full((24, 32, 3), 100, np.uint8))
    cv2.imwrite(str(data / "masks" / "im0.png"), mask)
    return {"good": good, "nan": nan_weights, "negvar": nan_out, "data": data}


def earlier_result(folder, *names):
    """Files as an earlier run of the command left them (recorded as written by dig-jax)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_text("earlier result\n")
    record_written(folder, list(names))
    return {name: "earlier result\n" for name in names}


def contents(folder, names):
    return {name: (folder / name).read_text() for name in names}


ATTACK = ["--size", "32", "--steps", "1", "--batch", "1", "--no-progress"]


def test_attack_on_a_missing_dataset_keeps_the_earlier_result(files, tmp_path, capsys):
    """Case C1: attack --datasets nosuch into a folder holding breps.json."""
    before = earlier_result(tmp_path, "breps.json", "breps.md")
    argv = ["--checkpoint", str(files["good"]), "--out", str(tmp_path), *ATTACK]
    with pytest.raises(SystemExit) as exit_info:
        attack.main([*argv, "--datasets", "nosuch"])
    assert exit_info.value.code == 2
    assert "--datasets: no folder 'nosuch'" in capsys.readouterr().err
    assert contents(tmp_path, before) == before


@pytest.mark.parametrize("checkpoint", ["nan", "negvar"])
def test_attack_stops_on_nan_weights_or_predictions(files, tmp_path, capsys, checkpoint):
    """Case C2: attack with a NaN checkpoint printed 0.000 and exited 0."""
    before = earlier_result(tmp_path, "breps.json", "breps.md")
    argv = ["--checkpoint", str(files[checkpoint]), "--datasets", str(files["data"])]
    assert attack.main([*argv, "--out", str(tmp_path), *ATTACK]) == 1
    assert "NaN" in capsys.readouterr().err
    assert contents(tmp_path, before) == before


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--lr-mult", "inf"], "--lr-mult must be a finite number > 0, got inf"),
        (["--lr-mult", "nan"], "--lr-mult must be a finite number > 0, got nan"),
        (["--lam", "inf"], "--lam must be a finite number >= 0, got inf"),
        (["--user-boxes", "/nonexistent/43"], "--user-boxes /nonexistent/43 is not a folder"),
    ],
)
def test_attack_rejects_infinite_settings(files, tmp_path, capsys, flags, message):
    """Case C7: attack --lr-mult inf failed without naming the flag."""
    argv = ["--checkpoint", str(files["good"]), "--datasets", str(files["data"]), *ATTACK]
    with pytest.raises(SystemExit) as exit_info:
        attack.main([*argv, "--out", str(tmp_path / "o"), *flags])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]
    assert not (tmp_path / "o").exists()


EVAL = ["--datasets", "procedural:1", "--max-side", "64", "--modes", "creation"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--max-side", "0"], "--max-side must be >= 32 px, got 0"),
        (["--nog-kinds", "blah"], "--nog-kinds: unknown ['blah']"),
        (["--datasets", "nosuch"], "unknown source spec 'nosuch'"),
        (["--datasets", "procedural:abc"], "must be procedural[:N[:SEED]]"),
        (["--modes", "create"], "--modes: use some of"),
        (["--seed", "-1"], "--seed must be >= 0, got -1"),  # issue 43: a traceback
    ],
)
def test_evaluate_rejects_bad_arguments(files, tmp_path, capsys, flags, message):
    """Cases C3-C5: evaluate --max-side 0 (was --size 0), --nog-kinds blah, bad datasets."""
    argv = ["--checkpoint", str(files["good"]), *EVAL, "--out", str(tmp_path / "o"), *flags]
    with pytest.raises(SystemExit) as exit_info:
        evaluate.main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]
    assert not (tmp_path / "o").exists()


def test_evaluate_refuses_nan_weights_and_nan_predictions(files, tmp_path, capsys):
    """Case C2 for evaluate: no table of 0.000, exit non-zero, earlier result kept."""
    before = earlier_result(tmp_path, "metrics.json", "tables.md")
    argv = [*EVAL, "--out", str(tmp_path)]
    with pytest.raises(SystemExit) as exit_info:
        evaluate.main(["--checkpoint", str(files["nan"]), *argv])
    assert exit_info.value.code == 2
    assert "weights hold NaN" in capsys.readouterr().err
    assert evaluate.main(["--checkpoint", str(files["negvar"]), *argv]) == 1
    assert "NaN/Inf logits" in capsys.readouterr().err
    assert contents(tmp_path, before) == before


def test_evaluate_that_scores_nothing_keeps_the_earlier_result(files, tmp_path, capsys):
    """Case C6: an empty slice evaluates nothing; the earlier tables stay."""
    before = earlier_result(tmp_path, "metrics.json", "tables.md")
    argv = ["--predictor", "filled", "--datasets", "procedural:2[0:0]", "--out", str(tmp_path)]
    assert evaluate.main(argv) == 1
    assert "no sample was evaluated" in capsys.readouterr().err
    assert contents(tmp_path, before) == before
