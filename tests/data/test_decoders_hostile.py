"""Hostile and malformed annotation files (issue 43): COCO RLE and polygons checked before
pycocotools allocates, JSON that is not UTF-8 or nested too deep, DIG rows with fields of the
wrong type, and mask folders saved as {0,1}. Every case is a one-line ValueError naming the
file or field, or the right result."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest
from pycocotools import mask as mask_utils

from dig_jax.data.sources.benchmark_folder import benchmark_folder
from dig_jax.data.sources.coco_json import decode_segmentation, scan_coco_json
from dig_jax.data.sources.dig_json import DigRowWriter, dig_json, scan_dig_json, write_dig_json
from dig_jax.data.sources.rle import MAX_PIXELS, decode_rle, rle_counts, string_counts


@pytest.mark.parametrize(
    ("rle", "message"),
    [
        ({"size": [64, 64], "counts": "~~~~!!!!" * 8}, "characters outside '0'..'o'"),
        ({"size": [64, 64], "counts": [0, 10**7]}, r"counts sum to 4097, not H\*W = 64\*64"),
        ({"size": [64, 64], "counts": [-5, 4101]}, "negative run length"),
        ({"size": [64, 64], "counts": [0, -(2**70)]}, "negative run length"),  # was OverflowError
        ({"size": [64, 64], "counts": [0.5, 4095.5]}, "list of integers"),
        ({"size": [64, 64], "counts": "0"}, r"counts sum to 0, not H\*W"),
        ({"size": [64, 64], "counts": "P"}, "cut short"),
        ({"size": [64, 64], "counts": "P" * 20 + "0"}, "characters long"),
        ({"size": [10**6, 10**6], "counts": [10**12]}, "size must be"),
        ({"size": [0, 5], "counts": []}, "size must be"),
        ({"size": [2, True], "counts": [2]}, "size must be"),
        ({"size": [4, 4]}, "not a COCO RLE dict"),
        ("abc", "not a COCO RLE dict"),
    ],
)
def test_bad_rle_is_refused_before_decoding(rle, message):
    with pytest.raises(ValueError, match=rf"^mask_field.*{message}"):
        decode_rle(rle, "mask_field")


def test_good_rle_reads_as_pycocotools_does():
    rng = np.random.default_rng(0)
    for h, w in [(1, 1), (5, 7), (64, 48), (131, 97)]:
        mask = (rng.random((h, w)) < rng.random()).astype(np.uint8)
        rle = mask_utils.encode(np.asfortranarray(mask))
        assert string_counts(rle["counts"]).sum() == h * w
        for counts in (rle["counts"], rle["counts"].decode()):
            np.testing.assert_array_equal(decode_rle({"size": [h, w], "counts": counts}), mask)
        listed = rle_counts({"size": [h, w], "counts": rle["counts"]})[0].tolist()
        np.testing.assert_array_equal(decode_rle({"size": [h, w], "counts": listed}), mask)


def test_coco_rle_and_polygons_name_the_problem():
    with pytest.raises(ValueError, match=r"segmentation.*characters outside"):
        decode_segmentation({"size": [64, 64], "counts": "~~~~!!!!"}, 64, 64)
    with pytest.raises(ValueError, match=r"segmentation: RLE size \[4, 4\] != image size \[4, 5\]"):
        decode_segmentation({"size": [4, 4], "counts": [16]}, 4, 5)
    with pytest.raises(ValueError, match="NaN, infinite"):
        decode_segmentation([[0, 0, 10, float("nan"), 5, 5]], 20, 20)
    with pytest.raises(ValueError, match="segmentation: polygon with a NaN, infinite or nested"):
        decode_segmentation([[[0, 0], [9, 0], [9, 9]]], 20, 20)  # was read as empty
    with pytest.raises(ValueError, match="segmentation: polygon of non-numbers"):
        decode_segmentation([["a", "b", "c", "d", "e", "f"]], 20, 20)
    with pytest.raises(ValueError, match=f"over {MAX_PIXELS} px"):
        decode_segmentation([[0, 0, 10, 0, 5, 5]], 10**6, 10**6)


def _coco_file(tmp_path, data: bytes) -> tuple:
    (tmp_path / "c.json").write_bytes(data)
    return tmp_path / "c.json", tmp_path


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"images": [], "annotations": []\xff}', r"c\.json is not UTF-8 text \(byte 32\)"),
        (b"[" * 100_000 + b"]" * 100_000, r"c\.json is JSON nested too deep"),
        (b'{"images": [', r"c\.json is not valid JSON"),
    ],
)
def test_unreadable_json_names_the_file(tmp_path, data, message):
    """Cases J1, J2: a 0xFF byte (bare UnicodeDecodeError), 100,000-deep nesting
    (RecursionError)."""
    path, folder = _coco_file(tmp_path, data)
    with pytest.raises(ValueError, match=rf"^annotation_file: .*{message}"):
        scan_coco_json(path, folder)
    with pytest.raises(ValueError, match=rf"^path: .*{message}"):
        scan_dig_json(path, folder)


def test_coco_image_of_absurd_size_is_a_problem_not_an_allocation(tmp_path):
    data = {
        "images": [{"id": 1, "height": 10**6, "width": 10**6, "file_name": "a.jpg"}],
        "annotations": [{"id": 1, "image_id": 1, "segmentation": [[0, 0, 9, 0, 9, 9]]}],
    }
    path, folder = _coco_file(tmp_path, json.dumps(data).encode())
    records, problems = scan_coco_json(path, folder)
    assert not records and "lacks height/width/file_name" in problems[0]


def _dig_row(tmp_path, h=8, w=9):
    cv2.imwrite(str(tmp_path / "r.png"), np.zeros((h, w, 3), np.uint8))
    writer = DigRowWriter("r", (h, w), "r.png")
    mask = np.zeros((h, w), np.uint8)
    mask[2:5, 2:6] = 1
    writer.set_object(1, mask)
    writer.add_sample(obj_id=1, target=mask, annotation=mask, gesture=1, mode=1, has_prior=False)
    return writer.row


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: r.update(obj_gt="1"), "field 'obj_gt' must map str"),  # was "string indices"
        (lambda r: r.update(size=[10**6, 10**6]), "field 'size' must be"),
        (lambda r: r["syn_gt"][0].update(counts=[-3, 75]), "field 'syn_gt': counts hold a neg"),
        (
            lambda r: r["syn_annotations"][0].update(counts="~~~~"),
            "'syn_annotations': compressed counts",
        ),
        (lambda r: r["obj_gt"].update({"1": {"size": [8, 9], "counts": [0, 10**7]}}), "sum to"),
    ],
)
def test_dig_rows_with_wrong_types_name_the_field(tmp_path, edit, message):
    row = _dig_row(tmp_path)
    edit(row)
    write_dig_json(tmp_path / "d.json", [row])
    (entry,) = dig_json(tmp_path / "d.json", tmp_path)
    with pytest.raises(ValueError, match=rf"d\.json row 'r' #0: .*{message}"):
        entry.load()


def test_dig_column_file_with_a_row_key_that_is_not_a_number(tmp_path):
    """Case J4: a DIG row key "first" gave "invalid literal for int()"."""
    row = _dig_row(tmp_path)
    columns = {field: {"first": value} for field, value in row.items()}
    (tmp_path / "d.json").write_text(json.dumps(columns))
    with pytest.raises(ValueError, match=r"d\.json: row key 'first' is not a row number"):
        scan_dig_json(tmp_path / "d.json", tmp_path)


def test_mask_folder_saved_as_0_1_is_read_as_objects(tmp_path):
    """Case D8: a mask folder saved as 0/1 was reported as "empty instance mask(s)"."""
    (tmp_path / "images").mkdir()
    (tmp_path / "masks").mkdir()
    cv2.imwrite(str(tmp_path / "images" / "a.png"), np.zeros((20, 30, 3), np.uint8))
    mask = np.zeros((20, 30), np.uint8)
    mask[5:15, 5:20] = 1
    cv2.imwrite(str(tmp_path / "masks" / "a.png"), mask)
    (record,) = benchmark_folder(tmp_path)
    loaded = record.load()
    np.testing.assert_array_equal(loaded.instances[0], mask)
