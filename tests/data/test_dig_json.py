"""DIG JSON: write -> read is byte-identical in masks; both row and column layouts read."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from dig_jax.data.sources.dig_json import (
    DigRowWriter,
    decode_rle,
    dig_json,
    encode_rle,
    write_dig_json,
)


def _masks(rng, h=37, w=53):
    target = rng.integers(0, 2, (h, w)).astype(np.uint8)
    target[rng.random((h, w)) < 0.1] = 255
    return target, rng.integers(0, 2, (h, w)).astype(np.uint8)


def test_rle_round_trip():
    rng = np.random.default_rng(0)
    for shape in [(1, 1), (5, 7), (64, 33)]:
        m = rng.integers(0, 2, shape).astype(np.uint8)
        rle = encode_rle(m)
        assert isinstance(rle["counts"], str)
        assert decode_rle(json.loads(json.dumps(rle))).tobytes() == m.tobytes()


def test_write_read_round_trip_is_byte_identical(tmp_path):
    rng = np.random.default_rng(1)
    h, w = 37, 53
    image = rng.integers(0, 256, (h, w, 3)).astype(np.uint8)
    cv2.imwrite(str(tmp_path / "img7.png"), image[..., ::-1])
    writer = DigRowWriter("img7", (h, w), "img7.png")
    region, prior = _masks(rng)[1], _masks(rng)[1]
    writer.set_object(4, region, prior)
    t1, a1 = _masks(rng)
    t2, a2 = _masks(rng)
    gt, other = _masks(rng)[1], _masks(rng)[1]
    multi = dict(obj_id=5, gesture=3, gt=gt, annotation=a1, prior=other)
    writer.add_sample(obj_id=4, target=t1, annotation=a1, gesture=3, mode=1, has_prior=False,
                      multi=multi)  # fmt: skip
    writer.add_sample(obj_id=4, target=t2, annotation=a2, gesture=0, mode=0, has_prior=True,
                      corr_id=2)  # fmt: skip
    write_dig_json(tmp_path / "d.json", [writer.row])
    entries = dig_json(tmp_path / "d.json", tmp_path)
    assert [(e.index, e.multi) for e in entries] == [(0, False), (0, True), (1, False)]
    s1, s1m, s2 = (e.load() for e in entries)
    assert s1["target"].tobytes() == t1.tobytes() and s1["gesture"].tobytes() == a1.tobytes()
    assert s2["target"].tobytes() == t2.tobytes() and s2["prev_mask"].tobytes() == prior.tobytes()
    assert s1["region"].tobytes() == region.tobytes()
    assert s1["image"].tobytes() == image.tobytes()
    assert (int(s1["gesture_kind"]), int(s1["context"]), bool(s1["has_prev"])) == (3, 1, False)
    assert (int(s2["gesture_kind"]), int(s2["context"]), bool(s2["has_prev"])) == (0, 0, True)
    assert s1m["target"].tobytes() == gt.tobytes() and s1m["prev_mask"].tobytes() == other.tobytes()
    row = json.loads((tmp_path / "d.json").read_text())[0]
    assert row["corr_id"] == [-1, 2] and row["mul_obj_id"] == [5, -1]


def test_reads_column_oriented_release_layout_and_string_modes(tmp_path):
    rng = np.random.default_rng(2)
    target, annot = _masks(rng, 8, 9)
    cv2.imwrite(str(tmp_path / "12.jpg"), np.zeros((8, 9, 3), np.uint8))
    columns = {
        "img_id": {"0": "12"}, "size": {"0": [8, 9]}, "obj_id": {"0": [1]},
        "syn_gt": {"0": [encode_rle(target == 1)]},
        "syn_gt_void": {"0": [encode_rle(target == 255)]},
        "syn_annotations": {"0": [encode_rle(annot)]}, "has_prior": {"0": [False]},
        "prior": {"0": {}}, "corr_id": {"0": [-1]}, "gesture": {"0": [4]}, "mode": {"0": ["sub"]},
    }  # fmt: skip
    (tmp_path / "c.json").write_text(json.dumps(columns))
    (entry,) = dig_json(tmp_path / "c.json", tmp_path)
    sample = entry.load()
    assert sample["target"].tobytes() == target.tobytes()
    assert int(sample["context"]) == 0 and int(sample["gesture_kind"]) == 4
    assert np.array_equal(sample["region"], (target == 1).astype(np.uint8))


def test_bad_input(tmp_path):
    with pytest.raises(ValueError, match="not found"):
        dig_json(tmp_path / "none.json", tmp_path)
    (tmp_path / "x.json").write_text(json.dumps([{"img_id": "1"}]))
    with pytest.raises(ValueError, match="lacks"):
        dig_json(tmp_path / "x.json", tmp_path)
    writer = DigRowWriter("1", (4, 4))
    with pytest.raises(ValueError, match="has_prior"):
        writer.add_sample(obj_id=1, target=np.zeros((4, 4)), annotation=np.zeros((4, 4)),
                          gesture=0, mode=1, has_prior=True)  # fmt: skip
