"""DIG JSON: write -> read is byte-identical in masks; both row and column layouts read."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from dig_jax.data.samples import make_sample
from dig_jax.data.sources.dig_json import (
    DigRowWriter,
    decode_rle,
    dig_json,
    encode_rle,
    scan_dig_json,
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
    # no obj_gt, no source annotations: the global GT is unknown, not the local target
    assert not sample["has_region"] and not sample["region"].any()
    assert np.array_equal(sample["local"], (target == 1).astype(np.uint8))


def _one_sample_row(tmp_path, h=8, w=9):
    """A valid single-sample row (object 1, creation) with its image written to tmp_path."""
    cv2.imwrite(str(tmp_path / "r.png"), np.zeros((h, w, 3), np.uint8))
    writer = DigRowWriter("r", (h, w), "r.png")
    mask = np.zeros((h, w), np.uint8)
    mask[2:5, 2:6] = 1
    writer.set_object(1, mask)
    writer.add_sample(obj_id=1, target=mask, annotation=mask, gesture=1, mode=1, has_prior=False)
    return writer.row


def _entries(tmp_path, rows):
    write_dig_json(tmp_path / "d.json", rows)
    return dig_json(tmp_path / "d.json", tmp_path)


def test_bad_input(tmp_path, caplog):
    with pytest.raises(ValueError, match="not found"):
        dig_json(tmp_path / "none.json", tmp_path)
    (tmp_path / "x.json").write_text(json.dumps([{"img_id": "1"}, _one_sample_row(tmp_path)]))
    entries, problems = scan_dig_json(tmp_path / "x.json", tmp_path)
    assert len(entries) == 1 and len(problems) == 1 and "row 0" in problems[0]
    assert "lacks 'img_id' or an 'obj_id' list" in problems[0]
    with caplog.at_level("WARNING"):
        assert len(dig_json(tmp_path / "x.json", tmp_path)) == 1
    assert "skipping bad item" in caplog.text
    writer = DigRowWriter("1", (4, 4))
    with pytest.raises(ValueError, match="has_prior"):
        writer.add_sample(obj_id=1, target=np.zeros((4, 4)), annotation=np.zeros((4, 4)),
                          gesture=0, mode=1, has_prior=True)  # fmt: skip


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: r.pop("gesture"), r"d\.json row 'r' #0: field 'gesture' missing"),
        (lambda r: r.pop("syn_gt_void"), "field 'syn_gt_void' missing"),
        (lambda r: r.update(mode=["maybe"]), "field 'mode' has unknown value 'maybe'"),
        (lambda r: r.update(has_prior=[True]), "has_prior is true but 'prior' lacks the object"),
        (lambda r: r.update(size=[8]), r"field 'size' must be \[H, W\]"),
        (lambda r: r.update(syn_annotations=[{"counts": "x"}]), "'syn_annotations' is not a COCO"),
    ],
)
def test_bad_fields_raise_value_errors_naming_the_field(tmp_path, edit, message):
    row = _one_sample_row(tmp_path)
    edit(row)
    (entry,) = _entries(tmp_path, [row])
    with pytest.raises(ValueError, match=message):
        entry.load()


def test_mask_size_differing_from_the_image_is_refused(tmp_path):
    row = _one_sample_row(tmp_path)
    row["syn_annotations"] = [encode_rle(np.ones((8, 10), np.uint8))]
    (entry,) = _entries(tmp_path, [row])
    with pytest.raises(ValueError, match=r"syn_annotations size \(8, 10\) != image size \(8, 9\)"):
        entry.load()
    row = _one_sample_row(tmp_path)
    row["obj_gt"]["1"] = encode_rle(np.ones((7, 9), np.uint8))
    (entry,) = _entries(tmp_path, [row])
    with pytest.raises(ValueError, match=r"obj_gt size \(7, 9\)"):
        entry.load()
    image = np.zeros((8, 9, 3), np.uint8)
    with pytest.raises(ValueError, match=r"target: size \(8, 10\) differs from image size"):
        make_sample(image=image, gesture_map=np.zeros((8, 9)), prev_mask=None,
                    target=np.zeros((8, 10)), region=np.zeros((8, 9)), kind=0, context=1,
                    image_id="x", instance_id=1)  # fmt: skip


def test_multi_region_target_keeps_its_void(tmp_path):
    h, w = 12, 14
    cv2.imwrite(str(tmp_path / "m.png"), np.zeros((h, w, 3), np.uint8))
    region, other = np.zeros((h, w), np.uint8), np.zeros((h, w), np.uint8)
    region[1:6, 1:7] = 1
    other[8:11, 2:12] = 1
    writer = DigRowWriter("m", (h, w), "m.png")
    writer.set_object(3, region)
    target = region.copy()
    target[1:3, 1:7] = 255  # e.g. another part of the region
    target[0, :] = 255  # dataset void
    mul_target = target.copy()
    mul_target[8:11, 2:12] = 1
    multi = dict(obj_id=4, gesture=2, gt=mul_target, annotation=region, prior=other)
    writer.add_sample(obj_id=3, target=target, annotation=region, gesture=2, mode=1,
                      has_prior=False, multi=multi)  # fmt: skip
    _, mul = _entries(tmp_path, [writer.row])
    sample = mul.load()
    assert sample["target"].tobytes() == mul_target.tobytes()
    assert (sample["target"] == 255).sum() == 2 * 6 + 14  # rows 1-2 of the region + row 0
    assert np.array_equal(sample["region"], region | other)  # global GT: the two whole regions
    assert np.array_equal(sample["prev_mask"], other) and int(sample["gesture_kind"]) == 2
    release = dict(writer.row)
    del release["mul_gt_void"]  # DIG release rows have no mul_gt_void: no void
    _, mul = _entries(tmp_path, [release])
    assert np.array_equal(mul.load()["target"], (mul_target == 1).astype(np.uint8))
