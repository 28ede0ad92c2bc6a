"""COCO / LVIS instance annotations (polygons, uncompressed or compressed RLE) via pycocotools.

One `Record` per image that has at least one annotation; `iscrowd` annotations become void.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
from pycocotools import mask as mask_utils

from dig_jax.data.sources.record import Record


def decode_segmentation(segmentation, height: int, width: int) -> np.ndarray:
    """COCO `segmentation` (polygon list, RLE dict with list or str counts) -> uint8[H, W] {0,1}."""
    if isinstance(segmentation, list):
        polygons = [p for p in segmentation if len(p) >= 6]
        if not polygons:
            return np.zeros((height, width), np.uint8)
        rle = mask_utils.merge(mask_utils.frPyObjects(polygons, height, width))
    elif isinstance(segmentation, dict) and "counts" in segmentation:
        rle = segmentation
        if isinstance(rle["counts"], list):
            rle = mask_utils.frPyObjects(rle, height, width)
        elif isinstance(rle["counts"], str):
            rle = {"size": rle["size"], "counts": rle["counts"].encode("ascii")}
    else:
        raise ValueError(
            f"segmentation: expected a polygon list or an RLE dict, got {segmentation!r:.80}"
        )
    return np.ascontiguousarray(mask_utils.decode(rle), dtype=np.uint8)


@dataclasses.dataclass(frozen=True)
class CocoMasks:
    """Picklable loader for the annotations of one image."""

    segmentations: tuple
    crowd: tuple
    height: int
    width: int

    def __call__(self) -> tuple[np.ndarray, np.ndarray]:
        h, w = self.height, self.width
        masks = [decode_segmentation(s, h, w) for s in self.segmentations]
        crowd = [decode_segmentation(s, h, w) for s in self.crowd]
        void = np.zeros((h, w), np.uint8)
        for m in crowd:
            void |= m
        instances = np.stack(masks) if masks else np.zeros((0, h, w), np.uint8)
        return instances, void


def coco_json(
    annotation_file: str | Path, image_dir: str | Path, *, name: str = "coco"
) -> list[Record]:
    """Records of a COCO/LVIS instance annotation file, sorted by image id.

    Args:
      annotation_file: the JSON with `images` and `annotations` (`segmentation`, `image_id`, `id`).
      image_dir: folder with the images' `file_name`s.
      name: source name.
    Annotations with an empty segmentation (area 0) are left out; crowd ones become void.
    """
    annotation_file = Path(annotation_file)
    if not annotation_file.is_file():
        raise ValueError(f"annotation_file: not found: {annotation_file}")
    try:
        data = json.loads(annotation_file.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"annotation_file: {annotation_file} is not valid JSON ({err})") from None
    if "images" not in data or "annotations" not in data:
        raise ValueError(f"annotation_file: {annotation_file} lacks 'images' or 'annotations'")
    images = {img["id"]: img for img in data["images"]}
    by_image: dict = {}
    for ann in data["annotations"]:
        if ann.get("area", 1) == 0 or not ann.get("segmentation"):
            continue
        by_image.setdefault(ann["image_id"], []).append(ann)
    records = []
    for image_id in sorted(by_image, key=str):
        if image_id not in images:
            raise ValueError(f"annotation_file: annotation refers to unknown image id {image_id}")
        info = images[image_id]
        anns = sorted(by_image[image_id], key=lambda a: a["id"])
        objects = [a for a in anns if not a.get("iscrowd", 0)]
        if not objects:
            continue
        path = Path(image_dir) / info["file_name"]
        records.append(
            Record(
                source=name,
                image_id=str(image_id),
                image=path,
                masks=CocoMasks(
                    tuple(a["segmentation"] for a in objects),
                    tuple(a["segmentation"] for a in anns if a.get("iscrowd", 0)),
                    int(info["height"]),
                    int(info["width"]),
                ),
                instance_ids=tuple(int(a["id"]) for a in objects),
                describe=str(path),
            )
        )
    return records
