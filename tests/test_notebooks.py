"""Every notebook in notebooks/ runs top to bottom (jupytext -> nbclient).

They use small subsets and fall back to generated data when the real photos are absent. Here the
notebooks that take a model (`DIG_JAX_CHECKPOINT`) get a tiny random one: this test checks that
they run, and compiling the attacks' gradients for the shipped EfficientNet-Lite0 took ~8 min
on 2 cores; `make notebooks` runs them on the shipped checkpoint.
"""

from __future__ import annotations

from pathlib import Path

import jax
import pytest

from dig_jax.notebooks import NOTEBOOK_DIR, run_notebook

NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("[0-9]*.py"))


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path: Path, tmp_path: Path, tiny_checkpoint: Path, monkeypatch):
    monkeypatch.setenv("DIG_JAX_CHECKPOINT", str(tiny_checkpoint))  # the kernel inherits it
    monkeypatch.setenv("DIG_JAX_FIGURES", str(tmp_path / "figures"))  # not into the checkout
    monkeypatch.setenv("DIG_JAX_QUICK", "1")  # notebook 05: 20 attack steps, not the paper's 50
    # The kernel shares the suite's persistent compile cache: a warm run skips its compiles.
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", jax.config.jax_compilation_cache_dir)
    monkeypatch.setenv(
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
        str(jax.config.jax_persistent_cache_min_compile_time_secs),
    )
    out = run_notebook(path, timeout=600, output_dir=tmp_path)
    assert out.is_file() and out.stat().st_size > 0


def test_attack_steps_are_the_papers_unless_quick(monkeypatch):
    from dig_jax.notebooks import notebook_attack_steps

    monkeypatch.delenv("DIG_JAX_QUICK", raising=False)
    assert notebook_attack_steps() == 50
    monkeypatch.setenv("DIG_JAX_QUICK", "0")
    assert notebook_attack_steps() == 50
    monkeypatch.setenv("DIG_JAX_QUICK", "1")
    assert notebook_attack_steps() == 20


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
