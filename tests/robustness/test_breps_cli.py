"""End to end: `python -m dig_jax.attack` on a tiny exported segmenter and a tiny folder."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from dig_jax.attack import main
from dig_jax.paths import checkpoint_name


def test_attack_cli_end_to_end(tmp_path, tiny_checkpoint):
    ckpt = tiny_checkpoint
    assert checkpoint_name(ckpt) == "tiny"

    data = tmp_path / "toyset"
    (data / "images").mkdir(parents=True)
    (data / "masks").mkdir()
    rng = np.random.default_rng(0)
    for i in range(3):
        cv2.imwrite(
            str(data / "images" / f"im{i}.png"), rng.integers(0, 255, (24, 32, 3), np.uint8)
        )
        mask = np.zeros((24, 32), np.uint8)
        mask[4 + i : 16, 6 : 20 + i] = 255
        cv2.imwrite(str(data / "masks" / f"im{i}.png"), mask)
    cv2.imwrite(str(data / "masks" / "orphan.png"), mask)  # no image: reported, not fatal

    out = tmp_path / "results"
    argv = [
        "--checkpoint",
        str(ckpt),
        "--datasets",
        str(data),
        "--out",
        str(out),
        "--size",
        "32",
        "--steps",
        "2",
        "--batch",
        "2",
        "--no-progress",
    ]
    assert main(argv) == 0
    result = json.loads((out / "breps.json").read_text())["results"]["toyset/tiny"]
    m = result["metrics"]
    assert m["n"] == 3
    assert m["iou_min"] <= m["iou_tight"] <= m["iou_max"]
    assert m["iou_delta"] >= 0
    assert any("orphan" in s for s in result["skipped"])
    inst = result["instances"][0]
    np.testing.assert_allclose(inst["tight"], [6, 4, 20, 16], atol=0.01)  # original pixels
    assert "| toyset | tiny | 3 |" in (out / "breps.md").read_text()

    # a dataset spec (as evaluate takes it) instead of a folder: a held-out slice of a source
    spec = "procedural:4:7[0:2]"
    argv[argv.index(str(data))] = spec
    assert main([*argv[:-1], "--limit", "2", "--no-progress"]) == 0
    result = json.loads((out / "breps.json").read_text())["results"][f"{spec}/tiny"]
    assert result["metrics"]["n"] == 2


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--batch", "0"], "--batch-size must be >= 1"),
        (["--limit", "-1"], "--limit must be >= 0"),
        (["--steps", "0"], "--steps must be >= 1"),
        (["--lr-mult", "0"], "--lr-mult must be a finite number > 0"),
        (["--lam", "-1"], "--lam must be a finite number >= 0"),
        (["--size", "0"], "--working-size must be a positive multiple of 32"),
        ([], "is not a file"),
    ],
)
def test_attack_cli_rejects_bad_arguments(tmp_path, capsys, flags, message):
    checkpoint = tmp_path / "model.digjax"
    if flags:
        checkpoint.write_bytes(b"")  # exists: the other flag is what is wrong
    with pytest.raises(SystemExit) as exit_info:
        main(["--checkpoint", str(checkpoint), "--out", str(tmp_path / "out"), *flags])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert message in err[-1]
