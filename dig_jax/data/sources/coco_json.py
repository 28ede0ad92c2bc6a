"""COCO / LVIS instance annotations (polygons, uncompressed or compressed RLE) via pycocotools.

One `Record` per image that has at least one annotation; `iscrowd` annotations become void.
Bad items do not abort the file: an annotation of an unknown image id, an image entry without
a usable height / width / file name, or an annotation without an id is reported and left out
(`scan_coco_json` returns the problems, `coco_json` logs them); an annotation that decodes to an
empty mask drops that instance when the image is loaded, not the image.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import numpy as np
from pycocotools import mask as mask_utils

from dig_jax.data.sources.record import Record, read_json
from dig_jax.data.sources.rle import MAX_PIXELS, decode_rle

log = logging.getLogger(__name__)


def decode_segmentation(segmentation, height: int, width: int) -> np.ndarray:
    """COCO `segmentation` (polygon list, RLE dict with list or str counts) -> uint8[H, W] {0,1}."""
    try:
        return _decode(segmentation, height, width)
    except (TypeError, KeyError, IndexError, UnicodeError, OverflowError) as err:  # malformed
        raise ValueError(
            f"segmentation: cannot decode {segmentation!r:.60} ({type(err).__name__})"
        ) from None


def _decode(segmentation, height: int, width: int) -> np.ndarray:
    if height * width > MAX_PIXELS:
        raise ValueError(f"segmentation: image of {height}x{width} px is over {MAX_PIXELS} px")
    if isinstance(segmentation, list):
        checked = [_checked_polygon(p, height, width) for p in segmentation]
        polygons = [p for p in checked if len(p) >= 6]  # fewer than 3 vertices: no area
        if not polygons:
            return np.zeros((height, width), np.uint8)
        rle = mask_utils.merge(mask_utils.frPyObjects(polygons, height, width))
    elif isinstance(segmentation, dict) and "counts" in segmentation:
        mask = decode_rle(segmentation, "segmentation")
        if mask.shape != (height, width):
            raise ValueError(
                f"segmentation: RLE size {list(mask.shape)} != image size {[height, width]}"
            )
        return mask
    else:
        raise ValueError(
            f"segmentation: expected a polygon list or an RLE dict, got {segmentation!r:.80}"
        )
    return np.ascontiguousarray(mask_utils.decode(rle), dtype=np.uint8)


def _checked_polygon(polygon, height: int, width: int) -> list[float]:
    """A polygon's coordinates as floats, clipped to one pixel around the image (annotations
    often overshoot the border a little); ValueError, before pycocotools allocates (it grows
    without bound on huge or NaN vertices), on a NaN, infinite, nested or non-numeric value and
    on a vertex more than the image's own size outside it."""
    try:
        values = np.asarray(polygon, np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"segmentation: polygon of non-numbers: {polygon!r:.60}") from None
    if values.ndim != 1 or not np.all(np.isfinite(values)):
        raise ValueError(f"segmentation: polygon with a NaN, infinite or nested value: "
                         f"{polygon!r:.60}")  # fmt: skip
    xy = values[: values.size // 2 * 2].reshape(-1, 2)
    far = (xy < -np.array([width, height])) | (xy > 2 * np.array([width, height]))
    if far.any():
        x, y = xy[np.flatnonzero(far.any(axis=1))[0]]
        raise ValueError(f"segmentation: polygon vertex ({x:.6g}, {y:.6g}) lies far outside the "
                         f"{width}×{height} image")  # fmt: skip
    xy = np.clip(xy, -1.0, (width + 1.0, height + 1.0))
    return xy.ravel().tolist()


@dataclasses.dataclass(frozen=True)
class CocoMasks:
    """Picklable loader for the annotations of one image: (instances, void, instance_ids),
    leaving out the instances whose mask decodes empty."""

    segmentations: tuple
    crowd: tuple
    height: int
    width: int
    ids: tuple[int, ...]

    def __call__(self) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
        h, w = self.height, self.width
        masks = [decode_segmentation(s, h, w) for s in self.segmentations]
        kept = [(m, i) for m, i in zip(masks, self.ids, strict=True) if m.any()]
        void = np.zeros((h, w), np.uint8)
        for s in self.crowd:
            void |= decode_segmentation(s, h, w)
        instances = np.stack([m for m, _ in kept]) if kept else np.zeros((0, h, w), np.uint8)
        return instances, void, tuple(i for _, i in kept)


def _image_size(info: dict) -> tuple[int, int] | None:
    try:
        h, w = int(info["height"]), int(info["width"])
    except (KeyError, TypeError, ValueError, OverflowError):
        return None
    return (h, w) if h >= 1 and w >= 1 and h * w <= MAX_PIXELS else None


def scan_coco_json(
    annotation_file: str | Path, image_dir: str | Path, *, name: str = "coco"
) -> tuple[list[Record], list[str]]:
    """Like `coco_json` but returns (records, problems): one line per item left out.

    Raises ValueError only when the file itself is unusable (missing, not JSON, no `images` or
    `annotations` list).
    """
    annotation_file = Path(annotation_file)
    if not annotation_file.is_file():
        raise ValueError(f"annotation_file: not found: {annotation_file}")
    data = read_json(annotation_file, "annotation_file")
    if not isinstance(data, dict) or not all(
        isinstance(data.get(k), list) for k in ("images", "annotations")
    ):
        raise ValueError(f"annotation_file: {annotation_file} lacks 'images' or 'annotations'")
    problems: list[str] = []
    images = {img["id"]: img for img in data["images"] if isinstance(img, dict) and "id" in img}
    if len(images) != len(data["images"]):
        problems.append(f"{annotation_file}: {len(data['images']) - len(images)} image(s) lack id")
    by_image: dict = {}
    for ann in data["annotations"]:
        if not isinstance(ann, dict) or ann.get("area", 1) == 0 or not ann.get("segmentation"):
            continue
        if not isinstance(ann.get("id"), int):
            problems.append(f"{annotation_file}: annotation without an integer id skipped")
        elif ann.get("image_id") not in images:
            problems.append(
                f"{annotation_file}: annotation {ann['id']} refers to unknown image id "
                f"{ann.get('image_id')!r}"
            )
        else:
            by_image.setdefault(ann["image_id"], []).append(ann)
    records = []
    for image_id in sorted(by_image, key=str):
        info = images[image_id]
        size = _image_size(info)
        if size is None or not isinstance(info.get("file_name"), str):
            problems.append(f"{annotation_file}: image {image_id!r} lacks height/width/file_name")
            continue
        anns = sorted(by_image[image_id], key=lambda a: a["id"])
        objects = [a for a in anns if not a.get("iscrowd", 0)]
        if not objects:
            continue
        path = Path(image_dir) / info["file_name"]
        ids = tuple(int(a["id"]) for a in objects)
        records.append(
            Record(
                source=name,
                image_id=str(image_id),
                image=path,
                masks=CocoMasks(
                    tuple(a["segmentation"] for a in objects),
                    tuple(a["segmentation"] for a in anns if a.get("iscrowd", 0)),
                    *size,
                    ids,
                ),
                describe=str(path),
            )
        )
    return records, problems


def coco_json(
    annotation_file: str | Path, image_dir: str | Path, *, name: str = "coco"
) -> list[Record]:
    """Records of a COCO/LVIS instance annotation file, sorted by image id.

    Args:
      annotation_file: the JSON with `images` and `annotations` (`segmentation`, `image_id`, `id`).
      image_dir: folder with the images' `file_name`s.
      name: source name.
    Annotations with an empty segmentation (area 0) are left out; crowd ones become void. Bad
    items (see the module docstring) are logged as warnings and left out.
    """
    records, problems = scan_coco_json(annotation_file, image_dir, name=name)
    for problem in problems:
        log.warning("skipping bad item: %s", problem)
    return records
