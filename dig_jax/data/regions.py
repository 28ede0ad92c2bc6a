"""Regions (whole objects), their parts (connected components) and creation targets.

A region is one instance mask. When occlusion splits it into several 8-connected components,
each component of at least `MIN_AREA` px is a *part* and a gesture targets one part at a time;
the other components of the region are void (255) in that training target, while the global
GT stays the whole region. Regions under `MIN_AREA` px, or without a part that large, are dropped.
"""

from __future__ import annotations

import dataclasses
import functools

import cv2
import numpy as np

from dig_jax.gestures.scan import tight_box
from dig_jax.metrics import VOID

MIN_AREA = 300  # px, regions and parts smaller than this are dropped


@dataclasses.dataclass(frozen=True, eq=False)
class Region:
    """`mask` uint8[H,W] {0,1} (the whole instance); `parts` uint8[P,H,W] {0,1}, P >= 1.

    The parts are built on first use from the component labels of the mask's bounding box
    (most regions of a photo are never drawn, so most never need them).
    """

    instance_id: int
    mask: np.ndarray
    labelled: _Labelled = dataclasses.field(repr=False)

    @functools.cached_property
    def parts(self) -> np.ndarray:
        return self.labelled.stack(self.mask.shape)

    @property
    def area(self) -> int:
        return int(self.mask.sum())

    @property
    def num_parts(self) -> int:
        return len(self.labelled.keep)


@dataclasses.dataclass(frozen=True)
class _Labelled:
    """8-connected component labels of a mask inside its bounding box `box`, and the labels
    kept (area >= min_area, in raster order of their first pixel)."""

    box: tuple[slice, slice]
    labels: np.ndarray
    keep: tuple[int, ...]

    def stack(self, shape: tuple[int, int]) -> np.ndarray:
        out = np.zeros((len(self.keep), *shape), np.uint8)
        for k, i in enumerate(self.keep):
            out[k][self.box] = self.labels == i
        return out


def _label(mask: np.ndarray, min_area: int) -> _Labelled | None:
    """Components of a bool mask with >= `min_area` px; None for an empty mask."""
    x1, y1, x2, y2 = (int(v) for v in tight_box(mask))
    if x1 < 0:
        return None
    box = (slice(y1, y2), slice(x1, x2))
    crop = np.ascontiguousarray(mask[box]).view(np.uint8)
    n, labels, stats, _ = cv2.connectedComponentsWithStats(crop, connectivity=8)
    big = [i for i in range(1, n) if stats[i, cv2.CC_STAT_AREA] >= min_area]
    # OpenCV's numbering is its own: order the kept components by their first pixel in raster
    # order (the order scikit-image's `label` gives), found in the component's top row.
    tops = stats[:, cv2.CC_STAT_TOP]
    first = {i: (tops[i], int(np.argmax(labels[tops[i]] == i))) for i in big}
    return _Labelled(box, labels, tuple(sorted(big, key=first.__getitem__)))


def components(mask: np.ndarray, min_area: int = 0) -> np.ndarray:
    """8-connected components of a {0,1}/bool mask with >= `min_area` px, uint8[C, H, W],
    ordered by their first pixel in raster order."""
    mask = np.asarray(mask) > 0
    labelled = _label(mask, min_area)
    if labelled is None:
        return np.zeros((0, *mask.shape), np.uint8)
    return labelled.stack(mask.shape)


def extract_regions(
    instances: np.ndarray,
    instance_ids: tuple[int, ...] | None = None,
    min_area: int = MIN_AREA,
    *,
    void: np.ndarray | None = None,
) -> list[Region]:
    """Regions with their parts from instance masks uint8/bool[K, H, W].

    Keeps instances of area >= `min_area` that have at least one component of area >= `min_area`;
    with `void` ({0,1}/bool[H, W]) the area counted is the instance's non-void area.
    """
    instances = np.asarray(instances)
    if instances.ndim != 3:
        raise ValueError(f"instances: expected [K, H, W], got shape {instances.shape}")
    ids = tuple(range(1, len(instances) + 1)) if instance_ids is None else tuple(instance_ids)
    if len(ids) != len(instances):
        raise ValueError(f"instance_ids: {len(ids)} ids for {len(instances)} instances")
    valid = None
    if void is not None:
        valid = ~(np.asarray(void) > 0)
        if valid.shape != instances.shape[1:]:
            raise ValueError(f"void: shape {valid.shape} differs from masks {instances.shape[1:]}")
    regions = []
    for iid, inst in zip(ids, instances, strict=True):
        if valid is None and inst.dtype in (np.uint8, np.bool_):  # nonzero == (inst > 0):
            if np.count_nonzero(inst) < min_area:  # no bool copy of the instances dropped
                continue
            marked = inst > 0
        else:
            marked = inst > 0
            if np.count_nonzero(marked if valid is None else marked & valid) < min_area:
                continue
        labelled = _label(marked, min_area)
        if labelled is not None and labelled.keep:
            regions.append(Region(int(iid), marked.view(np.uint8), labelled))
    return regions


def creation_target(region: Region, part: int, void: np.ndarray | None = None) -> np.ndarray:
    """Local training target uint8[H,W] for a gesture on `region.parts[part]`.

    1 on the part, 255 on the region's other pixels and on `void`, 0 elsewhere.
    """
    if not 0 <= part < region.num_parts:
        raise ValueError(f"part: index {part} out of range for {region.num_parts} parts")
    target_part = region.parts[part] > 0
    target = target_part.astype(np.uint8)  # 1 on the part, 0 elsewhere
    target[(region.mask > 0) & ~target_part] = VOID
    if void is not None:
        target[np.asarray(void) > 0] = VOID
    return target


def disjoint_regions(regions: list[Region], mask: np.ndarray) -> list[Region]:
    """Regions sharing no pixel with `mask` (candidates for a multi-region sample)."""
    occupied = np.asarray(mask) > 0
    return [r for r in regions if not np.any((r.mask > 0) & occupied)]
