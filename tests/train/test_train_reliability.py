"""Training faults (tests/reliability_cases.md, section "training"): a changed model config keeps
every checkpoint, NaN never reaches a checkpoint or an export, a corrupt or NaN checkpoint is
moved aside (not deleted), unwritable checkpoints and all-bad data stop the loop."""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import re
import shutil
import sys
from pathlib import Path

import cv2
import numpy as np
import orbax.checkpoint as ocp
import pytest
from shared_run import once_per_run
from tiny_models import TINY_MODEL_FLAGS

from dig_jax.train import checkpointing
from dig_jax.train.__main__ import main, parse_flags
from dig_jax.train.config import validate_config
from dig_jax.train.train import NonFiniteError, train

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / "experiments" / "hrnet_dataaug.py") + ":tiny"
# hrnet_dataaug:tiny with the test model (2 branches, not 4): every run here compiles in a
# fraction of the time; what is checked is the loop's handling of faults, not the network.
TINY = ["--config", CONFIG, *TINY_MODEL_FLAGS]


def tiny(total_steps: int = 4, *overrides: str):
    flags = [f"--config.{item}" for item in (f"total_steps={total_steps}", *overrides)]
    return parse_flags([*TINY, "--workdir", "unused", *flags])[0]


@contextlib.contextmanager
def watchdog(seconds: int = 600):
    """Fail a hang loudly: dump every thread's stack and exit after `seconds`."""
    faulthandler.dump_traceback_later(seconds, exit=True, file=sys.__stderr__)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def snapshot(workdir: Path) -> dict[str, bytes]:
    """Every file under `workdir` (path -> bytes): what a failed run must leave untouched."""
    return {str(p.relative_to(workdir)): p.read_bytes() for p in workdir.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def run4(tmp_path_factory):
    """4 steps of hrnet_dataaug:tiny through the command line: checkpoints, metrics, export;
    trained once per test run (pytest-xdist workers share it; tests work on copies)."""

    def build(workdir: Path) -> None:
        assert main([*TINY, "--workdir", str(workdir), "--config.total_steps=4"]) == 0

    return once_per_run(tmp_path_factory, "run4", build)


@pytest.fixture
def workdir(run4, tmp_path):
    shutil.copytree(run4, tmp_path, dirs_exist_ok=True)
    return tmp_path


def steps_on_disk(workdir: Path) -> list[str]:
    return sorted(p.name for p in (workdir / "checkpoints").iterdir() if not p.name.startswith("."))


def test_changed_model_config_stops_and_keeps_every_checkpoint(workdir, capsys):
    """Case T1: --config.model.head_width=16 on a workdir trained with 4."""
    before = snapshot(workdir)
    argv = [*TINY, "--workdir", str(workdir), "--config.total_steps=6"]
    assert main([*argv, "--config.model.head_width=16"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(workdir) in err[0]
    assert "model.head_width: 4 -> 16" in err[0] and "params/FusionHead_0" in err[0]
    assert "Nothing was deleted" in err[0]
    assert snapshot(workdir) == before  # checkpoints, metrics.jsonl, config.json, export
    assert main(argv) == 0  # the original model resumes from its newest checkpoint
    rows = [json.loads(x) for x in (workdir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "loss" in r] == [1, 2, 3, 4, 5, 6]


def test_divergence_stops_before_saving_and_exports_nothing(workdir):
    """Case T2: a learning rate that overflows the weights (1e30) after a good run."""
    before = snapshot(workdir)
    with pytest.raises(NonFiniteError, match=r"at step \d+ .*last good checkpoint: step 4") as err:
        train(tiny(12, "optim.lr=1e30"), workdir)
    assert int(str(err.value).split("at step ")[1].split()[0]) in (5, 6)
    after = snapshot(workdir)
    assert {k: v for k, v in after.items() if k.startswith("checkpoints")} == {
        k: v for k, v in before.items() if k.startswith("checkpoints")
    }
    assert after["segmenter.digjax"] == before["segmenter.digjax"]  # not overwritten
    rows = [json.loads(x) for x in (workdir / "metrics.jsonl").read_text().splitlines()]
    assert all(np.isfinite(v) for r in rows for v in r.values())


def test_infinite_learning_rate_is_a_config_error(tmp_path, capsys):
    """Case T3: --config.optim.lr=1e999 (inf)."""
    assert main(["--config", CONFIG, "--workdir", str(tmp_path), "--config.optim.lr=1e999"]) == 1
    assert "config.optim.lr must be a finite number > 0, got inf" in capsys.readouterr().err
    config = tiny()
    config.optim.weight_decay = float("nan")
    with pytest.raises(ValueError, match=r"config\.optim\.weight_decay"):
        validate_config(config)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def get_config(arg=None):\n    return {\n", r"bad\.py line 2: '\{' was never closed"),
        ("import no_such_module_43\n", r"bad\.py raised ModuleNotFoundError: No module named"),
        ("def get_config(arg=None):\n    return {}[arg]\n", r"get_config\('x'\) of .*KeyError"),
    ],
)
def test_config_file_that_does_not_run_is_one_line(tmp_path, capsys, source, message):
    """Case T8: train --config with a syntax error printed a traceback."""
    (tmp_path / "bad.py").write_text(source)
    argv = ["--config", f"{tmp_path / 'bad.py'}:x", "--workdir", str(tmp_path / "w")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert re.search(rf"^python -m dig_jax.train: error: --config: .*{message}", err), err


def _nan_checkpoint(workdir: Path, step: int, from_step: int) -> None:
    """Write the state of `from_step` with one NaN weight as checkpoint `step` (a bit flip)."""
    manager = checkpointing.make_manager(
        workdir / "checkpoints", save_every=1, keep=10, async_save=False
    )
    state = manager.restore(
        from_step, args=ocp.args.Composite(state=ocp.args.StandardRestore())
    ).state
    leaf = state["params"]["FusionHead_0"]["mask_logits"]["kernel"]
    state["params"]["FusionHead_0"]["mask_logits"]["kernel"] = np.full_like(leaf, np.nan)
    manager.save(step, args=ocp.args.Composite(state=ocp.args.StandardSave(state)), force=True)
    manager.wait_until_finished()
    manager.close()


def test_nan_checkpoint_is_moved_aside_and_training_resumes(workdir):
    """Case T4: a checkpoint whose weights read back as NaN."""
    _nan_checkpoint(workdir, 6, from_step=4)
    with pytest.warns(UserWarning, match=r"step 6 .*NaN.*moved it to 6\.corrupt"):
        result = train(tiny(6), workdir)
    assert result.step == 6 and checkpointing.all_finite(result.state)
    assert (workdir / "checkpoints" / "6.corrupt").is_dir()  # kept for inspection
    assert "6" in steps_on_disk(workdir)  # step 6 saved again


def test_corrupt_checkpoint_is_moved_aside_not_deleted(workdir):
    """Case T5: garbage in every file of the newest checkpoint."""
    for path in (workdir / "checkpoints" / "4").rglob("*"):
        if path.is_file():
            path.write_bytes(b"\x00garbage")
    with pytest.warns(UserWarning, match=r"step 4 .*moved it to 4\.corrupt"):
        result = train(tiny(4), workdir)
    assert result.step == 4
    corrupt = workdir / "checkpoints" / "4.corrupt"
    assert corrupt.is_dir() and any(p.read_bytes() == b"\x00garbage" for p in corrupt.rglob("*"))


def test_unwritable_checkpoints_stop_the_loop_without_hanging(tmp_path, monkeypatch):
    """Case T6: the checkpoint folder stops being writable (orbax's async save would hang)."""
    real_save = checkpointing.save

    def save_into_a_file(manager, step, *args, **kwargs):
        directory = Path(manager.directory)
        if directory.is_dir():  # replaced by a file: nothing can be created in it
            shutil.rmtree(directory)
            directory.write_text("not a folder")
        return real_save(manager, step, *args, **kwargs)

    monkeypatch.setattr(checkpointing, "save", save_into_a_file)
    with watchdog(), pytest.raises(checkpointing.CheckpointSaveError, match="cannot write"):
        train(tiny(4, "checkpoint.async_save=True"), tmp_path)
    assert not (tmp_path / "segmenter.digjax").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write into a read-only folder")
def test_read_only_checkpoint_folder_is_refused(tmp_path):
    """Case T6 as a non-root user meets it."""
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        with pytest.raises(checkpointing.CheckpointSaveError, match="cannot write"):
            checkpointing.check_writable(folder)
    finally:
        folder.chmod(0o755)


def test_save_refuses_a_non_finite_state(tmp_path):
    """Case T2 at the checkpoint layer: `save` never writes NaN."""
    manager = checkpointing.make_manager(tmp_path, save_every=1, keep=3, async_save=False)
    with pytest.raises(FloatingPointError, match="step 1"):
        checkpointing.save(manager, 1, {"w": np.array([1.0, np.nan], np.float32)}, None)
    manager.close()
    assert not list(tmp_path.iterdir())


def test_all_bad_data_source_stops_training_with_the_reasons(tmp_path, capsys):
    """Case D1 through training: every mask of the folder has the wrong size."""
    folder = tmp_path / "bad"
    (folder / "images").mkdir(parents=True)
    (folder / "masks").mkdir()
    for i in range(3):
        cv2.imwrite(str(folder / "images" / f"p{i}.png"), np.zeros((40, 50, 3), np.uint8))
        cv2.imwrite(str(folder / "masks" / f"p{i}.png"), np.full((20, 20), 255, np.uint8))
    argv = [*TINY, "--workdir", str(tmp_path / "w"), "--config.total_steps=2"]
    with watchdog():
        assert main([*argv, f"--config.data.sources=('folder:{folder}',)"]) == 1
    err = capsys.readouterr().err
    assert "source 'bad' gave no valid sample in 200 tries" in err and "mask size" in err
    assert not (tmp_path / "w" / "segmenter.digjax").exists()


def test_export_step_writes_a_saved_step_with_settings(workdir, capsys):
    """`dig-jax export WORKDIR --set predict.focus_pass=true`: the newest step as a segmenter
    whose config carries the setting; a bad --set or step is a one-line error."""
    from dig_jax.export import load_segmenter
    from dig_jax.train import export_step

    out = workdir / "exported.digjax"
    argv = [str(workdir), "--out", str(out), "--set", "predict.focus_pass=true"]
    assert export_step.main(argv) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    seg = load_segmenter(out)
    assert seg.focus_pass is True
    mine = workdir / "notes.txt"
    mine.write_text("mine")
    assert export_step.main(argv) == 0  # an earlier export of its own is replaced
    with pytest.raises(SystemExit):
        export_step.main([str(workdir), "--out", str(mine)])
    assert "not a segmenter file" in capsys.readouterr().err and mine.read_text() == "mine"
    for bad, message in ((["--set", "no_equals"], "KEY=VALUE"), (["--step", "999"], "step 999")):
        with pytest.raises(SystemExit):
            export_step.main([str(workdir), "--out", str(workdir / "x.digjax"), *bad])
        assert message in capsys.readouterr().err
