"""The Beam build of a COCO-format set equals the in-process build, byte for byte."""

from __future__ import annotations

import json
import os
from pathlib import Path

import cv2
import numpy as np
import pytest
from pycocotools import mask as mask_utils

import dig_jax
from dig_jax.data import beam_build
from dig_jax.data.build import main as build_main
from dig_jax.data.tfds_builder import tfds_entries

KINDS = "0,2,4"


def _image(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    """A textured background (superpixels need some) with smooth colour ramps."""
    yy, xx = np.mgrid[:h, :w]
    base = np.stack([xx * 255 // w, yy * 255 // h, (xx + yy) * 127 // (h + w)], -1)
    return np.clip(base + rng.integers(-20, 20, (h, w, 3)), 0, 255).astype(np.uint8)


def _rect(x1: int, y1: int, x2: int, y2: int) -> list[float]:
    return [x1, y1, x2, y1, x2, y2, x1, y2]


def coco_set(root: Path) -> tuple[Path, Path]:
    """Three photos of three sizes (JPEG, PNG, gray JPEG), instances as polygons, a two-part
    polygon, compressed and uncompressed RLE and a crowd region (void), plus two bad items:
    a photo whose file is missing and an annotation of an unknown image."""
    rng = np.random.default_rng(7)
    images = root / "images"
    images.mkdir(parents=True)
    sizes = {1: (96, 128, "a.jpg"), 2: (80, 72, "b.png"), 3: (120, 90, "c.jpg"),
             4: (64, 64, "d.jpg")}  # fmt: skip
    anns, infos = [], []
    for image_id, (h, w, name) in sizes.items():
        infos.append(dict(id=image_id, height=h, width=w, file_name=name))
        image = _image(rng, h, w)
        if image_id == 1:
            image[10:50, 20:60] = (200, 40, 40)
            image[60:90, 10:40] = image[60:90, 80:120] = (40, 200, 40)
        if image_id != 4:  # photo 4's file is missing: a bad item
            gray = image_id == 3
            cv2.imwrite(str(images / name), image[..., 1] if gray else image[..., ::-1])
    box = dict(area=1.0, iscrowd=0, category_id=1)
    anns += [
        dict(id=10, image_id=1, segmentation=[_rect(20, 10, 60, 50)], **box),
        dict(id=11, image_id=1, segmentation=[_rect(10, 60, 40, 90), _rect(80, 60, 120, 90)],
             **box),  # one instance, two parts (occluded in the middle)
    ]  # fmt: skip
    crowd = np.zeros((96, 128), np.uint8)
    crowd[0:8, 0:128] = 1
    anns.append(dict(id=12, image_id=1, area=1.0, iscrowd=1, category_id=1,
                     segmentation=dict(size=[96, 128], counts=_uncompressed(crowd))))  # fmt: skip
    blob = np.zeros((80, 72), np.uint8)
    cv2.circle(blob, (30, 35), 18, 1, -1)
    counts = mask_utils.encode(np.asfortranarray(blob))["counts"].decode("ascii")
    anns.append(dict(id=20, image_id=2, segmentation=dict(size=[80, 72], counts=counts), **box))
    anns.append(dict(id=21, image_id=2, segmentation=[[50, 5, 70, 5, 70, 30, 50, 30]], **box))
    anns.append(dict(id=30, image_id=3, segmentation=[_rect(5, 5, 80, 60)], **box))
    anns.append(dict(id=31, image_id=3, segmentation=[[10, 70, 85, 70, 45, 115]], **box))
    anns.append(dict(id=40, image_id=4, segmentation=[_rect(5, 5, 50, 50)], **box))
    anns.append(dict(id=50, image_id=99, segmentation=[_rect(5, 5, 50, 50)], **box))
    path = root / "instances.json"
    path.write_text(json.dumps(dict(images=infos, annotations=anns, categories=[{"id": 1}])))
    return path, images


def _uncompressed(mask: np.ndarray) -> list[int]:
    """COCO's uncompressed RLE counts (column-major runs, starting with zeros)."""
    flat = mask.ravel(order="F")
    edges = np.flatnonzero(np.diff(flat)) + 1
    runs = np.diff(np.concatenate([[0], edges, [flat.size]]))
    return ([0] if flat[0] else []) + runs.tolist()


def _records(data_dir: Path, split: str) -> list[bytes]:
    """The serialized examples of a split, in order over its shards."""
    from array_record.python.array_record_module import ArrayRecordReader

    out = []
    for shard in sorted((data_dir / "dig_samples").glob(f"*/dig_samples-{split}.array_record-*")):
        reader = ArrayRecordReader(str(shard))
        out += reader.read_all()
        reader.close()
    return out


def _metadata(data_dir: Path) -> dict:
    return json.loads(next((data_dir / "dig_samples").glob("*/metadata.json")).read_text())


@pytest.mark.slow
def test_beam_build_on_two_workers_equals_the_in_process_build(tmp_path, monkeypatch, capsys):
    pytest.importorskip("apache_beam", reason="apache-beam not installed: pip install -e '.[beam]'")
    pytest.importorskip("importlib_resources", reason="tfds builders need importlib_resources")
    coco, images = coco_set(tmp_path / "coco")
    local = tmp_path / "local"
    argv = ["--source", f"coco_json:{coco}:{images}", "--kinds", KINDS, "--out",
            str(tmp_path / "b"), "--tfds-dir", str(local)]  # fmt: skip
    assert build_main(argv) == 0
    capsys.readouterr()
    root = str(Path(dig_jax.__file__).resolve().parents[1])  # the workers import this dig_jax
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    out = tmp_path / "beam"
    argv = ["--coco-json", str(coco), "--images", str(images), "--kinds", KINDS, "--out",
            str(out), "--runner", "DirectRunner", "--direct_num_workers", "2",
            "--direct_running_mode", "multi_processing"]  # fmt: skip
    assert beam_build.main(argv) == 0
    text = capsys.readouterr()
    assert "d.jpg" in text.err and "unknown image id 99" in text.err  # bad items reported
    assert "records/s per worker" in text.out
    summary = _metadata(out)["summary"][f"coco_json:{coco}:{images}"]
    assert summary["images"] == 3 and summary["bad items"] == 2 and summary["parts"] >= 2
    for split in ("train", "multi"):
        want = _records(local, split)
        assert want and _records(out, split) == want, split
    assert _metadata(out)["multi_index"] == _metadata(local)["multi_index"]
    entries = tfds_entries(out)
    variant = next(e for e in entries if e.has_multi).multi_variant().load()
    assert variant["has_prev"] and entries[0].load()["image"].dtype == np.uint8
    sizes = {e.load()["image"].shape[:2] for e in entries}
    assert sizes == {(96, 128), (80, 72), (120, 90)}  # every photo at its own size
    assert beam_build.main(argv) == 1  # a second run does not overwrite the first
    assert "already holds" in capsys.readouterr().err


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--coco-json", "{tmp}/none.json", "--images", "{tmp}"], "--coco-json: not found"),
        (["--coco-json", "{tmp}/i.json", "--images", "{tmp}/nope"], "--images: not a folder"),
        (["--coco-json", "{tmp}/i.json", "--images", "{tmp}", "--out", "{tmp}/i.json"],
         "is a file"),
    ],
)  # fmt: skip
def test_bad_paths_are_one_line_errors(tmp_path, capsys, flags, message):
    (tmp_path / "i.json").write_text(json.dumps(dict(images=[], annotations=[])))
    argv = [f.format(tmp=tmp_path) for f in flags]
    if "--out" not in argv:
        argv += ["--out", str(tmp_path / "out")]
    assert beam_build.main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
