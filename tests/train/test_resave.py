"""`dig-jax export FILE.digjax --out F --set KEY=VALUE`: the same weights, other settings."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import dig_jax
from dig_jax.train.export_step import main


def test_a_segmenter_file_is_resaved_with_new_inference_settings(tiny_checkpoint, tmp_path, capsys):
    out = tmp_path / "whole.digjax"
    argv = [str(tiny_checkpoint), "--out", str(out), "--set", "predict.click_size=64"]
    assert main(argv) == 0
    assert str(out) in capsys.readouterr().out
    before, after = dig_jax.load_segmenter(tiny_checkpoint), dig_jax.load_segmenter(out)
    assert after.passes.click_size == 64 and before.passes.click_size == before.size
    for a, b in zip(
        jax.tree.leaves(before.variables), jax.tree.leaves(after.variables), strict=True
    ):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--out", "SAME"], "is the source file"),
        ([], "needs --out"),
        (["--out", "x.digjax", "--step", "3"], "takes no --step"),
        (["--out", "y.digjax", "--set", "predict.click_size=100"], "click_size"),
    ],
)
def test_resave_refuses_clearly(tiny_checkpoint, tmp_path, capsys, monkeypatch, extra, message):
    monkeypatch.chdir(tmp_path)
    extra = [str(tiny_checkpoint) if e == "SAME" else e for e in extra]
    with pytest.raises(SystemExit):
        main([str(tiny_checkpoint), *extra])
    assert message in capsys.readouterr().err
