"""YOLOv8 instance-segmentation folders (Roboflow exports, e.g. the feral-cat set of
`pcashman21/feral-cat-segmentation-dataset-and-model`): `<root>/<split>/images*/<stem>.jpg` and
`<root>/<split>/labels*/<stem>.txt`, one object per line: `class x1 y1 x2 y2 ...`, the polygon's
vertices normalised to [0, 1] by the image's width and height.

Roboflow names augmented copies `<photo>.rf.<hash>.<ext>`; the reader keeps one file per photo
(the first hash in sorted order), so a photo exported three times is one record. Images and
labels may be spread over several `images*` / `labels*` folders (GitHub's 1000-file limit).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from dig_jax.data.sources.coco_json import decode_segmentation
from dig_jax.data.sources.record import Record

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp")
_TOLERANCE = 1e-3  # normalised coordinates a little outside [0, 1] are clipped, not refused


def parse_polygon_line(line: str, height: int, width: int) -> list[float]:
    """One label line -> a COCO polygon [x1, y1, ...] in pixel-edge coordinates; ValueError on
    a non-number, a NaN, fewer than 3 vertices, an odd count or a vertex outside [0, 1]."""
    fields = line.split()
    try:
        values = np.asarray([float(v) for v in fields[1:]], np.float64)
    except ValueError:
        raise ValueError(f"label line is not numbers: {line[:60]!r}") from None
    if values.size < 6 or values.size % 2:
        raise ValueError(f"label line needs >= 3 (x, y) vertices, got {values.size} numbers")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"label line holds a NaN or infinite coordinate: {line[:60]!r}")
    if values.min() < -_TOLERANCE or values.max() > 1 + _TOLERANCE:
        raise ValueError(f"label line has a vertex outside [0, 1]: {line[:60]!r}")
    xy = np.clip(values, 0.0, 1.0).reshape(-1, 2) * (width, height)
    return xy.ravel().tolist()


def _image_size(path: str) -> tuple[int, int]:
    """(H, W) of an image file, read from its header only."""
    from PIL import Image

    try:
        with Image.open(path) as image:
            width, height = image.size
    except Exception as err:  # PIL raises OSError, SyntaxError... on bad files
        raise ValueError(f"cannot read image file: {path} ({type(err).__name__})") from None
    return height, width


@dataclasses.dataclass(frozen=True)
class PolygonMasks:
    """Picklable loader: one instance per label line, rasterised like COCO polygons."""

    label_path: str
    image_path: str

    def __call__(self) -> tuple[np.ndarray, np.ndarray]:
        height, width = _image_size(self.image_path)
        try:
            lines = Path(self.label_path).read_text().splitlines()
        except (OSError, UnicodeDecodeError) as err:
            raise ValueError(f"cannot read label file: {self.label_path} ({err})") from None
        masks = []
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                polygon = parse_polygon_line(line, height, width)
            except ValueError as err:
                raise ValueError(f"{self.label_path}:{number}: {err}") from None
            masks.append(decode_segmentation([polygon], height, width))
        masks = [m for m in masks if m.any()]
        if not masks:
            return np.zeros((0, height, width), np.uint8), np.zeros((height, width), np.uint8)
        return np.stack(masks), np.zeros((height, width), np.uint8)


def photo_key(stem: str) -> str:
    """The photo a Roboflow export file comes from: `<photo>.rf.<hash>` -> `<photo>`."""
    return stem.split(".rf.")[0]


def yolo_polygons(root: str | Path, split: str, *, name: str = "yolo") -> list[Record]:
    """Records of one split folder, one per distinct photo (see the module docstring), sorted
    by photo; images without a label file are left out. ValueError when the split has no
    `images*` folder."""
    folder = Path(root) / split
    image_dirs = sorted(d for d in folder.glob("images*") if d.is_dir())
    if not image_dirs:
        raise ValueError(f"root: {folder} has no images*/ folder (YOLOv8 layout)")
    labels = {p.stem: p for d in sorted(folder.glob("labels*")) for p in sorted(d.glob("*.txt"))}
    chosen: dict[str, tuple[Path, Path]] = {}
    for image_dir in image_dirs:
        for image in sorted(image_dir.iterdir()):
            if image.suffix.lower() not in IMAGE_SUFFIXES or image.stem not in labels:
                continue
            key = photo_key(image.stem)
            if key not in chosen or image.stem < chosen[key][0].stem:
                chosen[key] = (image, labels[image.stem])
    return [
        Record(
            source=name,
            image_id=f"{split}/{key}",
            image=image,
            masks=PolygonMasks(str(label), str(image)),
            describe=f"{image} + {label}",
        )
        for key, (image, label) in sorted(chosen.items())
    ]
