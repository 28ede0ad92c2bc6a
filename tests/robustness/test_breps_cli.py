"""End to end: `python -m dig_jax.attack` on a tiny exported segmenter and a tiny folder."""

from __future__ import annotations

import json

import cv2
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dig_jax.attack import main
from dig_jax.export import save_segmenter
from dig_jax.models.interactive import build_segmenter
from dig_jax.paths import checkpoint_name

TINY_MODEL = {
    "widths": [4, 8],
    "stem_width": 4,
    "stage1_planes": 4,
    "blocks": 1,
    "stage_modules": [1],
    "head_width": 4,
    "input_kind": "gesture",
    "context_encoding": "gesture",
    "multihead": False,
    "aux_reduce": 4,
    "aux_pool": 4,
    "aux_hidden": [16, 8],
}


def random_variables(model):
    """Variables of the right structure without running `init` (slow to compile on CPU)."""
    shapes = jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.zeros((1, 32, 32, 6))))
    rng = np.random.default_rng(0)

    def fill(path, leaf):
        name = str(path[-1])
        if "var" in name or "scale" in name:
            return np.ones(leaf.shape, leaf.dtype)
        if "mean" in name or "bias" in name:
            return np.zeros(leaf.shape, leaf.dtype)
        return (0.3 * rng.standard_normal(leaf.shape)).astype(leaf.dtype)

    return jax.tree_util.tree_map_with_path(fill, shapes)


def test_attack_cli_end_to_end(tmp_path):
    import ml_collections

    config = ml_collections.ConfigDict({"model": TINY_MODEL, "image_size": 32})
    model = build_segmenter(config.model)
    variables = random_variables(model)
    ckpt = save_segmenter(tmp_path / "tiny" / "segmenter.digjax", variables, config)
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


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--batch", "0"], "--batch must be >= 1"),
        (["--limit", "-1"], "--limit must be >= 0"),
        (["--steps", "0"], "--steps must be >= 1"),
        (["--lr-mult", "0"], "--lr-mult must be > 0"),
        (["--lam", "-1"], "--lam must be >= 0"),
        (["--size", "0"], "--size must be a positive multiple of 32"),
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
