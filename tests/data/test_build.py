"""The static DIG-style build: counts, bad items reported and skipped, readable output."""

from __future__ import annotations

import json

import cv2
import numpy as np

from dig_jax.data.build import build, format_summary, main
from dig_jax.data.pipeline import make_dataset
from dig_jax.data.sources.dig_json import dig_json


def test_build_counts_and_bad_items(tmp_path, capsys):
    folder = tmp_path / "bench"
    (folder / "images").mkdir(parents=True)
    (folder / "masks").mkdir()
    img = np.full((60, 60, 3), 80, np.uint8)
    img[10:40, 10:40] = 200
    mask = np.zeros((60, 60), np.uint8)
    mask[10:40, 10:40] = 255
    cv2.imwrite(str(folder / "images/good.png"), img)
    cv2.imwrite(str(folder / "masks/good.png"), mask)
    cv2.imwrite(str(folder / "images/wrong.png"), img[:30])
    cv2.imwrite(str(folder / "masks/wrong.png"), mask)
    (folder / "images/broken.jpg").write_bytes(b"\x00garbage")
    cv2.imwrite(str(folder / "masks/broken.png"), mask)
    cv2.imwrite(str(folder / "masks/orphan.png"), mask)
    out = tmp_path / "out"
    table = build([f"folder:{folder}", "procedural:2:1"], out, image_size=64, kinds=(0, 4),
                  progress=False)  # fmt: skip
    err = capsys.readouterr().err
    assert "orphan" in err and "wrong.png" in err and "broken.jpg" in err
    bench = table[f"folder:{folder}"]
    assert bench["bad items"] == 3 and bench["images"] == 1 and bench["regions"] == 1
    assert (
        bench["creation"] == 2
        and bench["click"] + bench["rectangle"] == bench["creation"] + bench["refinement"]
    )
    assert bench["refinement"] == bench["additions"] + bench["subtractions"]
    entries = dig_json(out / "dig.json", out / "images")
    total = sum(c["creation"] + c["refinement"] + c["multi-region"] for c in table.values())
    assert len(entries) == total
    summary = json.loads((out / "summary.json").read_text())
    assert summary[f"folder:{folder}"]["bad items"] == 3
    assert "bad items" in format_summary(table).splitlines()[0]
    cfg = dict(sources=[entries], image_size=32, batch_size=2, read_threads=0, shard=(0, 1))
    batch = next(iter(make_dataset(cfg, "eval")))
    assert batch["target"].shape == (2, 32, 32)


def test_cli_on_real_photos(shared_data, tmp_path, capsys):
    assert main(["--source", "grabcut", "--limit", "2", "--image-size", "96", "--kinds", "1",
                 "--out", str(tmp_path)]) == 0  # fmt: skip
    text = capsys.readouterr().out
    assert "grabcut" in text and "total" in text
    rows = json.loads((tmp_path / "dig.json").read_text())
    assert len(rows) == 2 and all(set(r["gesture"]) == {1} for r in rows)
