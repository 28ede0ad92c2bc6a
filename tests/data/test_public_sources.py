"""Readers of the public sets with regions and parts (docs/data.md), on tiny files made here in
each format: Clothing Co-Parsing (.mat label maps), CamVid (class-map PNGs), YOLOv8 polygons."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import scipy.io

from dig_jax.data.pipeline import make_dataset, resolve_source
from dig_jax.data.regions import extract_regions
from dig_jax.data.sources.camvid import VOID_LABEL, camvid, class_map_instances
from dig_jax.data.sources.clothing_parsing import PERSON_ID, clothing_co_parsing
from dig_jax.data.sources.yolo_polygons import parse_polygon_line, photo_key, yolo_polygons


def _photo(h: int, w: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def _ccp(root, labels: np.ndarray, stem: str = "0001") -> None:
    (root / "photos").mkdir(parents=True, exist_ok=True)
    (root / "annotations" / "pixel-level").mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(root / "photos" / f"{stem}.jpg"), _photo(*labels.shape))
    scipy.io.savemat(root / "annotations" / "pixel-level" / f"{stem}.mat", {"groundtruth": labels})


def test_clothing_person_is_a_region_and_each_class_a_region_inside_it(tmp_path):
    labels = np.zeros((60, 40), np.uint8)
    labels[5:55, 10:30] = 41  # skin
    labels[20:40, 10:30] = 38  # shirt
    labels[45:55, 10:18] = 39  # shoes: two components
    labels[45:55, 22:30] = 39
    _ccp(tmp_path, labels)
    (tmp_path / "annotations" / "pixel-level" / "0002.mat").write_bytes(b"")  # no photo: left out
    records = clothing_co_parsing(tmp_path)
    assert [r.image_id for r in records] == ["0001"]
    loaded = records[0].load()
    assert loaded.instance_ids == (PERSON_ID, 38, 39, 41)
    np.testing.assert_array_equal(loaded.instances[0], labels > 0)
    np.testing.assert_array_equal(loaded.instances[2], labels == 39)
    assert not loaded.void.any()
    regions = extract_regions(loaded.instances, loaded.instance_ids, min_area=40)
    shoes = next(r for r in regions if r.instance_id == 39)
    assert shoes.num_parts == 2  # occlusion-split region: two parts


def test_clothing_bad_files_name_the_file(tmp_path):
    _ccp(tmp_path, np.zeros((8, 8), np.uint8))
    with pytest.raises(ValueError, match=r"0001\.mat: no labelled pixel"):
        clothing_co_parsing(tmp_path)[0].load()
    (tmp_path / "annotations" / "pixel-level" / "0001.mat").write_bytes(b"not a mat file")
    with pytest.raises(ValueError, match=r"cannot read label file: .*0001\.mat"):
        clothing_co_parsing(tmp_path)[0].load()
    scipy.io.savemat(tmp_path / "annotations" / "pixel-level" / "0001.mat", {"other": 1})
    with pytest.raises(ValueError, match="has no 'groundtruth'"):
        clothing_co_parsing(tmp_path)[0].load()
    with pytest.raises(ValueError, match="lacks photos/"):
        clothing_co_parsing(tmp_path / "missing")


def test_camvid_things_are_components_stuff_whole_void_ignored(tmp_path):
    labels = np.full((40, 60), 3, np.uint8)  # road
    labels[:10] = 0  # sky
    labels[20:30, 5:15] = 8  # car 1
    labels[20:30, 40:50] = 8  # car 2
    labels[35:, :] = VOID_LABEL
    instances, void, ids = class_map_instances(labels)
    assert ids == (0, 30000, 80001, 80002)
    np.testing.assert_array_equal(instances[1], labels == 3)
    assert instances[2].sum() == instances[3].sum() == 100
    np.testing.assert_array_equal(void, labels == VOID_LABEL)
    for split in ("train", "val"):
        (tmp_path / split).mkdir()
        (tmp_path / f"{split}annot").mkdir()
        cv2.imwrite(str(tmp_path / split / "f001.png"), _photo(40, 60))
        cv2.imwrite(str(tmp_path / f"{split}annot" / "f001.png"), labels)
    cv2.imwrite(str(tmp_path / "train" / "f002.png"), _photo(40, 60))  # no class map
    records = camvid(tmp_path, "val")
    assert [r.image_id for r in records] == ["val/f001"]
    assert records[0].load().instance_ids == ids
    assert [r.image_id for r in resolve_source(f"camvid/train:{tmp_path}")] == ["train/f001"]
    with pytest.raises(ValueError, match="label 12 > 11"):
        class_map_instances(np.full((4, 4), 12, np.uint8))
    with pytest.raises(ValueError, match="split: must be one of"):
        camvid(tmp_path, "dev")


def _yolo(root, split: str, stem: str, lines: list[str], folder: str = "1st_500") -> None:
    (root / split / f"images_{folder}").mkdir(parents=True, exist_ok=True)
    (root / split / f"labels_{folder}").mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(root / split / f"images_{folder}" / f"{stem}.jpg"), _photo(40, 80))
    (root / split / f"labels_{folder}" / f"{stem}.txt").write_text("\n".join(lines) + "\n")


def test_yolo_polygons_one_record_per_photo_pixel_coordinates(tmp_path):
    square = "0 0.25 0.25 0.75 0.25 0.75 0.75 0.25 0.75"  # x 20..60, y 10..30 on 80 x 40
    _yolo(tmp_path, "train", "group0001_png.rf.bbb", [square, "0 0 0 0.1 0 0.1 0.2"])
    _yolo(tmp_path, "train", "group0001_png.rf.aaa", [square], folder="2nd_500")
    _yolo(tmp_path, "train", "group0002_jpeg.rf.ccc", [square])
    records = yolo_polygons(tmp_path, "train", name="cats")
    assert [r.image_id for r in records] == ["train/group0001_png", "train/group0002_jpeg"]
    assert "rf.aaa" in records[0].describe  # the first copy in sorted order
    loaded = records[1].load()
    assert loaded.instances.shape == (1, 40, 80)
    rows, cols = np.nonzero(loaded.instances[0])
    assert (rows.min(), rows.max(), cols.min(), cols.max()) == (10, 29, 20, 59)
    assert photo_key("group0001_png.rf.aaa") == "group0001_png"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("0 0.1 0.1 0.5 nan 0.2 0.9", "NaN or infinite"),
        ("0 0.1 0.1 0.5 0.5", "needs >= 3"),
        ("0 0.1 0.1 0.5 0.5 x 0.2", "not numbers"),
        ("0 0.1 0.1 0.5 0.5 3.0 0.2", "outside \\[0, 1\\]"),
    ],
)
def test_yolo_bad_lines_are_named(tmp_path, line, message):
    with pytest.raises(ValueError, match=message):
        parse_polygon_line(line, 40, 80)
    _yolo(tmp_path, "valid", "a.rf.x", [line])
    with pytest.raises(ValueError, match=r"a\.rf\.x\.txt:1: "):
        yolo_polygons(tmp_path, "valid")[0].load()


def test_new_sources_feed_the_training_pipeline(tmp_path):
    labels = np.zeros((64, 48), np.uint8)
    labels[4:60, 8:40] = 41
    labels[20:40, 8:40] = 38
    _ccp(tmp_path / "ccp", labels)
    _yolo(tmp_path / "cats", "train", "p.rf.a", ["0 0.1 0.1 0.9 0.1 0.9 0.9 0.1 0.9"])
    specs = (f"clothing_co_parsing:{tmp_path / 'ccp'}", f"feral_cats/train:{tmp_path / 'cats'}")
    ds = make_dataset(dict(sources=specs, image_size=32, batch_size=4, seed=1), "train")
    batch = next(iter(ds))
    assert batch["image"].shape == (4, 32, 32, 3)
    assert set(np.unique(batch["target"])) <= {0, 1, 255}


def test_coco_polygons_with_nan_or_far_outside_are_refused_and_overshoots_clipped():
    """Issue 43: non-finite and out-of-image vertices are refused before pycocotools allocates;
    a vertex a little past the border (common in real annotations) is clipped."""
    from dig_jax.data.sources.coco_json import decode_segmentation

    with pytest.raises(ValueError, match="NaN, infinite"):
        decode_segmentation([[0, 0, 10, float("nan"), 5, 5]], 20, 20)
    with pytest.raises(ValueError, match=r"vertex \(-1e\+12, -1e\+12\) lies far outside the 30×20"):
        decode_segmentation([[-1e12, -1e12, 1e12, -1e12, 1e12, 1e12, -1e12, 1e12]], 20, 30)
    over = decode_segmentation([[-3, -2, 33, -2, 33, 22, -3, 22]], 20, 30)
    assert over.shape == (20, 30) and over.all()
