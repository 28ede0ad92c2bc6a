"""Every notebook in notebooks/ runs top to bottom (jupytext -> nbclient).

They use small subsets and fall back to generated data when the real photos are absent. Here the
notebooks that take a model (`DIG_JAX_CHECKPOINT`) get a tiny random one: this test checks that
they run, and compiling the attacks' gradients for the shipped EfficientNet-Lite0 took ~8 min
on 2 cores; `make notebooks` runs them on the shipped checkpoint.
"""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np
import pytest

from dig_jax.notebooks import NOTEBOOK_DIR, run_notebook

NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("[0-9]*.py"))


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path: Path, tmp_path: Path, tiny_checkpoint: Path, monkeypatch):
    monkeypatch.setenv("DIG_JAX_CHECKPOINT", str(tiny_checkpoint))  # the kernel inherits it
    monkeypatch.setenv("DIG_JAX_FIGURES", str(tmp_path / "figures"))  # not into the checkout
    for name in ("DIG_JAX_BEFORE", "DIG_JAX_AFTER"):  # notebook 06: the tiny one for both
        monkeypatch.delenv(name, raising=False)
    # quick_mode(): fewer instances, steps, clicks and heatmap cells (01, 04, 05, 06)
    monkeypatch.setenv("DIG_JAX_QUICK", "1")
    # The kernel shares the suite's persistent compile cache: a warm run skips its compiles, and
    # a notebook those of the notebooks before it with the same shapes (the tiny model's
    # forward passes, 05's attack in 06). It caches every compile: with the suite's 0.5 s
    # floor, whether one was shared depended on the machine's load (unloaded, the tiny
    # model's forward compiled in 0.3 s and 06 compiled it again; 0 here: ~5 % less time).
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", jax.config.jax_compilation_cache_dir)
    monkeypatch.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    out = run_notebook(path, timeout=600, output_dir=tmp_path)
    assert out.is_file() and out.stat().st_size > 0


def test_attack_steps_are_the_papers_unless_quick(monkeypatch):
    from dig_jax.notebooks import notebook_attack_steps, quick_mode

    monkeypatch.delenv("DIG_JAX_QUICK", raising=False)
    assert notebook_attack_steps() == 50 and not quick_mode()
    monkeypatch.setenv("DIG_JAX_QUICK", "0")
    assert notebook_attack_steps() == 50 and not quick_mode()
    monkeypatch.setenv("DIG_JAX_QUICK", "1")
    assert notebook_attack_steps() == 20 and quick_mode()


def test_notebook_checkpoint_is_the_named_file_else_the_shipped_one(tmp_path, monkeypatch):
    from dig_jax.notebooks import CHECKPOINT_ENV, notebook_checkpoint
    from dig_jax.paths import shipped_checkpoint

    monkeypatch.setenv(CHECKPOINT_ENV, str(tmp_path / "tiny.digjax"))
    assert notebook_checkpoint() == tmp_path / "tiny.digjax"
    for value in (None, ""):
        if value is None:
            monkeypatch.delenv(CHECKPOINT_ENV)
        else:
            monkeypatch.setenv(CHECKPOINT_ENV, value)
        assert notebook_checkpoint() == shipped_checkpoint("gesture")
        assert notebook_checkpoint("context") == shipped_checkpoint("context")


def test_first_instances_fall_back_to_synthetic_scenes(tmp_path, monkeypatch):
    from dig_jax.notebooks import first_instances

    monkeypatch.setenv("DIG_JAX_DATA", str(tmp_path / "none"))
    samples, source = first_instances(2, max_side=100)
    assert source == "synthetic" and len(samples) == 2
    for image, gt in samples:
        assert image.dtype == np.uint8 and image.shape == (*gt.shape, 3) and (gt == 1).any()
    again, _ = first_instances(2)
    assert all((a[0] == b[0]).all() for a, b in zip(samples, again, strict=True))


def test_an_unknown_notebook_name_is_an_error(tmp_path, capsys):
    """Case N1: `python -m dig_jax.notebooks nosuch` exited 0 and ran nothing."""
    from dig_jax.notebooks import main

    with pytest.raises(SystemExit) as exit_info:
        main(["nosuch", "--out", str(tmp_path / "nb")])
    assert exit_info.value.code == 2
    assert "no notebook named ['nosuch']" in capsys.readouterr().err
    assert not (tmp_path / "nb").exists()


def test_out_is_checked_before_running_any(tmp_path, capsys):
    from dig_jax.notebooks import main

    (tmp_path / "file").write_text("mine")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "01_gestures.ipynb").write_text("mine")
    for out, message in [("file", "is a file, not a folder"), ("d", "01_gestures.ipynb, not")]:
        with pytest.raises(SystemExit) as exit_info:
            main(["01_gestures", "--out", str(tmp_path / out)])
        assert exit_info.value.code == 2 and message in capsys.readouterr().err
    assert (tmp_path / "d" / "01_gestures.ipynb").read_text() == "mine"
