"""BSDS500 human region segmentations: `<root>/<split>/images/<id>.jpg` and
`<root>/<split>/labels/<id>_<k>.png` (uint16 label map of annotator k; each label >= 1 a region).

In the shared copy 51 portrait photos are stored lying on their side: their label maps are
upright (H x W transposed w.r.t. the stored photo) and match the photo turned 90 degrees
counter-clockwise (checked on all 282 such maps by aligning label boundaries with image
edges). `UprightImage` turns such photos back to match their labels, as the Berkeley copy did.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
from PIL import Image

from dig_jax.data.sources.record import Record, read_gray, read_image


@dataclasses.dataclass(frozen=True)
class UprightImage:
    """Picklable image loader: the photo, turned 90 degrees counter-clockwise when its label
    map (only the PNG header is read) has the transposed shape."""

    path: str
    label_path: str

    def __call__(self) -> np.ndarray:
        image = read_image(self.path)
        try:
            with Image.open(self.label_path) as labels:  # header only
                width, height = labels.size
        except Exception as err:  # PIL raises OSError, SyntaxError, struct.error, IndexError...
            # on missing, truncated or malformed files: all of them mean "bad item" here
            raise ValueError(f"cannot read label file: {self.label_path} ({err})") from None
        h, w = image.shape[:2]
        if (height, width) == (w, h) != (h, w):
            image = np.ascontiguousarray(np.rot90(image, k=1))  # counter-clockwise
        return image


@dataclasses.dataclass(frozen=True)
class LabelMapMasks:
    """Picklable loader: one instance per label >= 1 of a label map (label 0 is unlabelled);
    ValueError naming the file when it cannot be read."""

    path: str

    def __call__(self) -> tuple[np.ndarray, np.ndarray]:
        labels = read_gray(self.path)
        ids = np.unique(labels)
        ids = ids[ids >= 1]
        instances = (labels[None] == ids[:, None, None]).astype(np.uint8)
        return instances, np.zeros(labels.shape, np.uint8)


def bsds_regions(
    root: str | Path,
    *,
    splits: tuple[str, ...] = ("train", "val"),
    annotators: str | int = "all",
) -> list[Record]:
    """Records of BSDS500 region label maps, one per (photo, annotator), sorted.

    Args:
      root: the `bsds500_regions` folder (or one split folder holding images/ and labels/).
      splits: sub-folders to read when `root` has them.
      annotators: "all" (default: every human segmentation is a record, ids `<id>_<k>`),
        "first" (only the lowest k per photo) or an int k (only annotator k when present).
    Instance ids are the label values; they are known only after loading (instance_ids=None).
    """
    root = Path(root)
    if annotators not in ("all", "first") and not isinstance(annotators, int):
        raise ValueError(f"annotators: expected 'all', 'first' or an int, got {annotators!r}")
    folders = [root] if (root / "labels").is_dir() else [root / s for s in splits]
    folders = [f for f in folders if (f / "labels").is_dir()]
    if not folders:
        raise ValueError(f"root: no labels/ folder under {root} (splits {splits})")
    records = []
    for folder in folders:
        by_photo: dict[str, list[tuple[int, Path]]] = {}
        for path in sorted((folder / "labels").glob("*.png")):
            photo, _, k = path.stem.rpartition("_")
            if not photo or not k.isdigit():
                continue
            by_photo.setdefault(photo, []).append((int(k), path))
        for photo in sorted(by_photo):
            image = folder / "images" / f"{photo}.jpg"
            chosen = sorted(by_photo[photo])
            if annotators == "first":
                chosen = chosen[:1]
            elif isinstance(annotators, int):
                chosen = [c for c in chosen if c[0] == annotators]
            for k, path in chosen:
                records.append(
                    Record(
                        source="bsds500_regions",
                        image_id=f"{photo}_{k}",
                        image=UprightImage(str(image), str(path)),
                        masks=LabelMapMasks(str(path)),
                        describe=f"{image} + {path}",
                    )
                )
    return records
