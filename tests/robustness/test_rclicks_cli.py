"""`python -m dig_jax.rclicks` on one real photo with the shipped checkpoints; argument errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dig_jax import rclicks
from dig_jax.cli import COMMANDS

CHECKPOINTS = Path(__file__).resolve().parents[2] / "checkpoints"
MODELS = [
    CHECKPOINTS / "hrnet_dataaug_offline.digjax",
    CHECKPOINTS / "context_baseline_offline.digjax",
]


@pytest.mark.slow
@pytest.mark.shared_data
def test_cli_writes_tables_json_and_figure(shared_data, tmp_path):
    models = [m for m in MODELS if m.is_file()]
    if not models:
        pytest.skip(f"no shipped checkpoints under {CHECKPOINTS}")
    args = [f"--checkpoint={m}" for m in models]
    args += ["--datasets", "grabcut[0:1]", "--map", "dt", "--clicks", "2", "--max-side", "160",
             "--out", str(tmp_path), "--no-progress"]  # fmt: skip
    assert rclicks.main(args) == 0
    table = (tmp_path / "rclicks.md").read_text()
    assert table.count("| grabcut[0:1] | 1 |") == len(models) and "ΔGR %" in table
    payload = json.loads((tmp_path / "rclicks.json").read_text())
    result = payload["results"][f"grabcut[0:1]/{models[0].stem}"]
    assert result["metrics"]["n"] == 1 and len(result["instances"][0]["ious"]) == 11
    assert (tmp_path / "groups.png").stat().st_size > 10_000
    assert payload["settings"]["map_name"] == "dt"


@pytest.mark.parametrize(
    "extra",
    [["--map", "nope"], ["--clicks", "1"], ["--chunk", "0"], ["--max-side", "8"], ["--seed", "-1"]],
)
def test_bad_arguments_exit(tmp_path, extra):
    model = tmp_path / "m.digjax"
    model.write_bytes(b"x")
    with pytest.raises(SystemExit):
        rclicks.main(["--checkpoint", str(model), *extra])
    with pytest.raises(SystemExit):
        rclicks.main(["--checkpoint", str(tmp_path / "missing.digjax")])


def test_unknown_dataset_returns_an_error_and_writes_nothing(tmp_path, capsys):
    model = tmp_path / "m.digjax"
    model.write_bytes(b"x")
    out = tmp_path / "out"
    assert rclicks.main(["--checkpoint", str(model), "--datasets", "no_such_source",
                         "--out", str(out)]) == 2  # fmt: skip
    assert "--datasets" in capsys.readouterr().err and not out.exists()


def test_not_a_segmenter_file_returns_an_error(tmp_path, capsys, shared_data):
    model = tmp_path / "m.digjax"
    model.write_bytes(b"not a segmenter")
    args = ["--checkpoint", str(model), "--datasets", "grabcut[0:1]", "--out", str(tmp_path / "o")]
    assert rclicks.main(args) == 2
    assert "--checkpoint" in capsys.readouterr().err and not (tmp_path / "o").exists()


def test_registered_as_a_command():
    assert COMMANDS["rclicks"] == "dig_jax.rclicks"


def test_truncated_clickability_file_is_a_map_error(tmp_path, capsys):
    """Case R1: rclicks --map with a truncated clickability file gave a struct.error traceback."""
    import jax

    from dig_jax.robustness.rclicks.model import init_clickability, save_clickability

    model = tmp_path / "m.digjax"
    model.write_bytes(b"x")
    path = save_clickability(
        tmp_path / "cm.msgpack", init_clickability(jax.random.key(0), 16, (4,))
    )
    data = path.read_bytes()
    for cut in (10, 20, len(data) - 7):
        path.write_bytes(data[:cut])
        with pytest.raises(SystemExit) as exit_info:
            rclicks.main(["--checkpoint", str(model), "--map", str(path), "--out", str(tmp_path)])
        assert exit_info.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert "error: --map: path" in err and "cm.msgpack" in err and "clickability" in err
