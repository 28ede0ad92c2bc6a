"""Every source yields the common Record; counts on the real data; bad input is reported."""

from __future__ import annotations

import json
import pickle

import cv2
import numpy as np
import pytest
from pycocotools import mask as mask_utils
from skimage.segmentation import find_boundaries

from dig_jax.data.pipeline import bad_item_count, make_dataset
from dig_jax.data.regions import extract_regions
from dig_jax.data.sources.benchmark_folder import benchmark_folder, scan_benchmark_folder
from dig_jax.data.sources.bsds_regions import bsds_regions
from dig_jax.data.sources.coco_json import coco_json, scan_coco_json
from dig_jax.data.sources.procedural import procedural
from dig_jax.data.sources.record import Record, resize_loaded


@pytest.mark.parametrize(
    ("name", "images", "instances"),
    [("grabcut", 50, 50), ("berkeley", 96, 100), ("coco_mval", 800, 800)],
)
def test_benchmark_counts(shared_data, name, images, instances):
    records = benchmark_folder(shared_data / name)
    assert len(records) == images
    assert sum(r.num_instances for r in records) == instances
    assert len({r.image_id for r in records}) == images


def test_grabcut_band_is_void_and_berkeley_ab_share_a_photo(shared_data):
    grabcut = {r.image_id: r for r in benchmark_folder(shared_data / "grabcut")}
    loaded = grabcut["banana1"].load()
    raw = cv2.imread(str(shared_data / "grabcut/masks/banana1.bmp"), cv2.IMREAD_GRAYSCALE)
    assert np.array_equal(loaded.void, (raw == 128).astype(np.uint8))
    assert np.array_equal(loaded.instances[0], (raw == 255).astype(np.uint8))
    berkeley = {r.image_id: r for r in benchmark_folder(shared_data / "berkeley")}
    loaded = berkeley["189011"].load()
    assert loaded.instances.shape[0] == 3 and loaded.image.shape[:2] == loaded.shape


def test_bsds_regions(shared_data):
    root = shared_data / "bsds500_regions"
    every = bsds_regions(root)
    assert len(every) == 1112
    first = bsds_regions(root, annotators="first")
    assert len(first) == 204
    loaded = first[0].load()
    labels = cv2.imread(str(root / "train/labels" / f"{first[0].image_id}.png"), -1)
    assert labels.dtype == np.uint16
    assert loaded.instance_ids == tuple(int(v) for v in np.unique(labels) if v >= 1)
    assert np.all(loaded.instances.sum(0) == (labels >= 1))
    with pytest.raises(ValueError, match="annotators"):
        bsds_regions(root, annotators="best")


def test_bsds_photos_stored_on_their_side_are_turned_upright(shared_data):
    records = bsds_regions(shared_data / "bsds500_regions/train", annotators=0)
    (record,) = [r for r in records if r.image_id == "106025_0"]
    stored = cv2.imread(str(shared_data / "bsds500_regions/train/images/106025.jpg"))
    loaded = record.load()
    assert loaded.image.shape[:2] == stored.shape[1::-1] == loaded.shape
    gray = cv2.GaussianBlur(loaded.image.mean(-1), (5, 5), 1)
    edges = np.hypot(*np.gradient(gray))
    boundary = find_boundaries(np.argmax(loaded.instances, 0))
    assert edges[boundary].mean() > 2 * edges.mean()  # label boundaries sit on image edges


def test_procedural_is_deterministic_cheap_and_has_parts():
    a, b = procedural(7, 12, size=96), procedural(7, 12, size=96)
    assert pickle.loads(pickle.dumps(a[0])).load().image.tobytes() == a[0].load().image.tobytes()
    parts = 0
    for ra, rb in zip(a, b, strict=True):
        la, lb = ra.load(), rb.load()
        assert la.image.tobytes() == lb.image.tobytes()
        assert la.instances.tobytes() == lb.instances.tobytes()
        assert la.image.shape == (96, 96, 3) and la.instances.shape[0] >= 1
        parts += sum(r.num_parts > 1 for r in extract_regions(la.instances, min_area=30))
    assert parts >= 1
    assert procedural(8, 1, size=96)[0].load().image.tobytes() != a[0].load().image.tobytes()
    with pytest.raises(ValueError, match="n:"):
        procedural(0, -1)


def _write_folder(root, masks: dict[str, np.ndarray], images: dict[str, np.ndarray]):
    (root / "images").mkdir(parents=True)
    (root / "masks").mkdir()
    for stem, img in images.items():
        cv2.imwrite(str(root / "images" / f"{stem}.png"), img)
    for stem, m in masks.items():
        cv2.imwrite(str(root / "masks" / f"{stem}.png"), m)


def test_bad_items_raise_clear_errors(tmp_path):
    img = np.zeros((20, 30, 3), np.uint8)
    ok = np.zeros((20, 30), np.uint8)
    ok[5:10, 5:10] = 255
    _write_folder(
        tmp_path,
        masks={"good": ok, "small": ok[:10], "empty": ok * 0, "corrupt": ok, "orphan": ok},
        images={"good": img, "small": img, "empty": img},
    )
    (tmp_path / "images/corrupt.jpg").write_bytes(b"not a jpeg")
    records, problems = scan_benchmark_folder(tmp_path)
    assert [p for p in problems if "orphan" in p]
    by_id = {r.image_id: r for r in records}
    assert by_id["good"].load().instances.sum() == 25
    with pytest.raises(ValueError, match=r"small.*differs"):
        by_id["small"].load()
    with pytest.raises(ValueError, match=r"empty.*empty instance"):
        by_id["empty"].load()
    with pytest.raises(ValueError, match=r"cannot decode image.*corrupt"):
        by_id["corrupt"].load()
    with pytest.raises(ValueError, match="orphan"):
        benchmark_folder(tmp_path)
    missing = Record("x", "missing", tmp_path / "nope.jpg", (np.zeros((1, 2, 2)), None))
    with pytest.raises(ValueError, match="not found"):
        missing.load()


def test_coco_json_polygons_rle_and_crowd(tmp_path):
    h, w = 40, 50
    cv2.imwrite(str(tmp_path / "a.png"), np.full((h, w, 3), 90, np.uint8))
    box = np.zeros((h, w), np.uint8)
    box[20:30, 5:25] = 1
    rle = mask_utils.encode(np.asfortranarray(box))
    rle["counts"] = rle["counts"].decode("ascii")
    uncompressed = {"size": [h, w], "counts": [w * 2, 3, h * w - w * 2 - 3]}  # column-major
    annotations = {
        "images": [{"id": 3, "file_name": "a.png", "height": h, "width": w}],
        "annotations": [
            {"id": 11, "image_id": 3, "segmentation": [[2, 2, 12, 2, 12, 12, 2, 12]], "iscrowd": 0},
            {"id": 12, "image_id": 3, "segmentation": rle, "iscrowd": 0},
            {"id": 13, "image_id": 3, "segmentation": uncompressed, "iscrowd": 1},
            {"id": 14, "image_id": 3, "segmentation": [], "area": 0, "iscrowd": 0},
        ],
    }
    path = tmp_path / "ann.json"
    path.write_text(json.dumps(annotations))
    (record,) = coco_json(path, tmp_path)
    loaded = record.load()
    assert loaded.instance_ids == (11, 12)
    assert np.array_equal(loaded.instances[1], box)
    assert 90 <= loaded.instances[0].sum() <= 130  # the 10x10 polygon, rasterised by pycocotools
    assert loaded.void.sum() == 3 and loaded.void[:, 2].sum() == 3
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(ValueError, match="not valid JSON"):
        coco_json(bad, tmp_path)


def test_resize_keeps_mask_values(shared_data):
    record = benchmark_folder(shared_data / "grabcut")[0]
    small = resize_loaded(record.load(), (64, 48))
    assert small.image.shape == (64, 48, 3)
    assert small.instances.shape == (1, 64, 48) and set(np.unique(small.instances)) <= {0, 1}
    assert set(np.unique(small.void)) <= {0, 1}


def test_coco_json_bad_items_are_reported_and_skipped(tmp_path, caplog):
    h, w = 30, 40
    cv2.imwrite(str(tmp_path / "a.png"), np.full((h, w, 3), 90, np.uint8))
    cv2.imwrite(str(tmp_path / "b.png"), np.full((h, w, 3), 90, np.uint8))
    square = [[2, 2, 22, 2, 22, 22, 2, 22]]
    all_zero = {"size": [h, w], "counts": [h * w]}  # uncompressed RLE of an empty mask
    annotations = {
        "images": [
            {"id": 1, "file_name": "a.png", "height": h, "width": w},
            {"id": 2, "file_name": "b.png"},  # no height / width
        ],
        "annotations": [
            {"id": 10, "image_id": 1, "segmentation": square},
            {"id": 11, "image_id": 1, "segmentation": all_zero},  # decodes empty: dropped
            {"id": 12, "image_id": 2, "segmentation": square},
            {"id": 13, "image_id": 99, "segmentation": square},  # unknown image
        ],
    }
    path = tmp_path / "ann.json"
    path.write_text(json.dumps(annotations))
    records, problems = scan_coco_json(path, tmp_path)
    assert [r.image_id for r in records] == ["1"] and len(problems) == 2
    assert any("unknown image id 99" in p for p in problems)
    assert any("image 2 lacks height/width/file_name" in p for p in problems)
    loaded = records[0].load()  # the empty instance is dropped, not the image
    assert loaded.instance_ids == (10,) and 350 <= loaded.instances[0].sum() <= 480
    with caplog.at_level("WARNING"):
        assert len(coco_json(path, tmp_path)) == 1
    assert caplog.text.count("skipping bad item") == 2
    before = bad_item_count()
    cfg = dict(sources=[f"coco_json:{path}:{tmp_path}"], image_size=32, batch_size=1,
               prior_prob=0.0, shard=(0, 1))  # fmt: skip
    assert len(list(make_dataset(cfg, "eval"))) == 1 and bad_item_count() == before + 2
