"""Benchmark folders: `<root>/images/<stem>.<jpg|JPG|bmp|png>` and
`<root>/masks/<stem>[a|b|..].<png|bmp>`.

The layout of GrabCut, Berkeley and COCO-MVal under `../shared/data`. Every mask file is one
instance; masks sharing an image stem (Berkeley `<id>.png`, `<id>a.png`, `<id>b.png`) are the
instances of one photo, so one `Record` per image. Mask values: > 128 object, 0 background,
exactly 128 (GrabCut's uncertain band) void. A mask file holding only 0 and 1 (a mask saved
as {0,1}, not {0,255}) is read as 1 object, 0 background.
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from pathlib import Path

import numpy as np

from dig_jax.data.sources.record import Record, read_gray

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp")
MASK_SUFFIXES = (".png", ".bmp")
VOID_VALUE = 128


@dataclasses.dataclass(frozen=True)
class FolderMasks:
    """Picklable mask loader: reads every mask file of one image."""

    paths: tuple[str, ...]

    def __call__(self) -> tuple[np.ndarray, np.ndarray]:
        masks = [read_gray(p) for p in self.paths]
        shapes = {m.shape for m in masks}
        if len(shapes) != 1:
            raise ValueError(f"masks of one image differ in size: {self.paths} -> {shapes}")
        void = np.zeros(masks[0].shape, np.uint8)
        for m in masks:
            void |= m == VOID_VALUE
        instances = np.stack([object_pixels(m) for m in masks])
        return instances, void


def object_pixels(mask: np.ndarray) -> np.ndarray:
    """uint8 {0,1}: values > 128 of a 0/255 mask, or the 1s of a mask saved as {0,1}."""
    if mask.size and mask.max() == 1:
        return (mask == 1).astype(np.uint8)
    return (mask > VOID_VALUE).astype(np.uint8)


def _image_index(image_dir: Path) -> dict[str, Path]:
    return {
        p.stem: p
        for p in sorted(image_dir.iterdir())
        if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES
    }


def benchmark_folder(root: str | Path, *, name: str | None = None) -> list[Record]:
    """Records of a benchmark folder, one per image, sorted by image stem.

    Args:
      root: folder holding `images/` and `masks/`.
      name: source name for the records (default: the folder's name).
    Raises:
      ValueError if `root` lacks `images/` or `masks/`. A mask without an image raises too;
      use `scan_benchmark_folder` to get such problems as a list instead. Images without any
      mask are left out with a UserWarning naming them.
    """
    records, orphan_masks, unmasked = _scan(Path(root), name)
    if orphan_masks:
        raise ValueError(f"benchmark_folder({root}): {orphan_masks[0]}")
    if unmasked:
        warnings.warn(
            f"{root}: {len(unmasked)} image(s) without a mask left out, e.g. {unmasked[0]}",
            UserWarning,
            stacklevel=2,
        )
    return records


def scan_benchmark_folder(
    root: str | Path, *, name: str | None = None
) -> tuple[list[Record], list[str]]:
    """Like `benchmark_folder` but returns (records, problems) instead of raising on bad items:
    masks without an image and images without a mask, one line each."""
    records, orphan_masks, unmasked = _scan(Path(root), name)
    return records, orphan_masks + unmasked


def _scan(root: Path, name: str | None) -> tuple[list[Record], list[str], list[str]]:
    """(records, masks without an image, images without a mask)."""
    image_dir, mask_dir = root / "images", root / "masks"
    if not image_dir.is_dir() or not mask_dir.is_dir():
        raise ValueError(f"root: {root} must contain images/ and masks/ folders")
    name = name or root.name
    images = _image_index(image_dir)
    groups: dict[str, list[Path]] = {}
    problems = []
    for mask in sorted(mask_dir.iterdir()):
        if not mask.is_file() or mask.suffix.lower() not in MASK_SUFFIXES:
            continue
        stem = mask.stem
        if stem not in images:  # Berkeley-style instance suffix: <stem>a, <stem>b, ...
            base = re.sub(r"[a-z]$", "", stem)
            if base == stem or base not in images:
                problems.append(f"mask {mask} has no image in {image_dir}")
                continue
            stem = base
        groups.setdefault(stem, []).append(mask)
    unmasked = [f"image {images[s]} has no mask in {mask_dir}" for s in images if s not in groups]
    records = []
    for stem in sorted(groups):
        paths = tuple(str(p) for p in sorted(groups[stem], key=lambda p: (len(p.stem), p.stem)))
        records.append(
            Record(
                source=name,
                image_id=stem,
                image=images[stem],
                masks=FolderMasks(paths),
                instance_ids=tuple(range(1, len(paths) + 1)),
                describe=str(images[stem]),
            )
        )
    return records, problems, unmasked
