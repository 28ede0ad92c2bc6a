"""The static DIG-style build: counts, bad items reported and skipped, readable output."""

from __future__ import annotations

import json

import cv2
import numpy as np

from dig_jax.data.build import build, format_summary, main
from dig_jax.data.pipeline import bad_item_count, make_dataset
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


def _bsds_folder(root):
    """A BSDS-style split: photo "good" (two regions), photo "bad" with a corrupt label file."""
    (root / "images").mkdir(parents=True)
    (root / "labels").mkdir()
    image = np.random.default_rng(0).integers(0, 256, (48, 64, 3)).astype(np.uint8)
    labels = np.ones((48, 64), np.uint16)
    labels[:, 32:] = 2
    for photo in ("good", "bad"):
        cv2.imwrite(str(root / "images" / f"{photo}.jpg"), image)
    cv2.imwrite(str(root / "labels/good_0.png"), labels)
    (root / "labels/bad_0.png").write_bytes(b"\x89PNG\r\n\x1a\n truncated garbage")
    return root


def test_corrupt_bsds_label_is_skipped_and_counted_by_build_and_pipeline(tmp_path, capsys):
    spec = f"bsds:{_bsds_folder(tmp_path / 'bsds')}"
    table = build([spec], tmp_path / "out", kinds=(0,), refinement=False, progress=False)
    assert table[spec]["bad items"] == 1 and table[spec]["images"] == 1
    assert table[spec]["regions"] == 2 and "bad_0.png" in capsys.readouterr().err
    before = bad_item_count()
    cfg = dict(sources=[spec], image_size=32, batch_size=1, prior_prob=0.0, shard=(0, 1))
    ids = [str(b["image_id"][0]) for b in make_dataset(cfg, "eval")]
    assert ids == ["bsds500_regions/good_0"] and bad_item_count() == before + 1


def test_multi_region_samples_keep_the_void(tmp_path):
    folder = tmp_path / "bench"
    (folder / "images").mkdir(parents=True)
    (folder / "masks").mkdir()
    cv2.imwrite(str(folder / "images/p.png"), np.full((48, 48, 3), 90, np.uint8))
    first, second = np.zeros((48, 48), np.uint8), np.zeros((48, 48), np.uint8)
    first[4:24, 4:28] = 255
    first[4:8, 4:28] = 128  # GrabCut-style void band over the first object
    second[30:46, 10:40] = 255
    cv2.imwrite(str(folder / "masks/p.png"), first)
    cv2.imwrite(str(folder / "masks/pa.png"), second)
    out = tmp_path / "out"
    build([f"folder:{folder}"], out, kinds=(4,), refinement=False, progress=False)
    multi = [e.load() for e in dig_json(out / "dig.json", out / "images") if e.multi]
    assert len(multi) == 2  # each region with the other joined
    void = first == 128
    whole = (first == 255) | (second == 255)  # 128 is void, not object
    for s in multi:
        np.testing.assert_array_equal(s["target"] == 255, void)
        np.testing.assert_array_equal(s["target"] == 1, whole & ~void)
        np.testing.assert_array_equal(s["region"], whole)
