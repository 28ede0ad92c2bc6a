"""Regions (whole objects), their parts (connected components) and creation targets.

`record_regions` is the one loop over a record's instances that training samples, evaluation
sets and the static build share: each region with the record's other regions and, on demand,
those disjoint from it (the multi-region candidates).

A region is one instance mask. When occlusion splits it into several 8-connected components,
each component of at least `MIN_AREA` px is a *part* and a gesture targets one part at a time;
the other components of the region are void (255) in that training target, while the global
GT stays the whole region. Regions under `MIN_AREA` px, or without a part that large, are dropped.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from dig_jax import _numba
from dig_jax.gestures.runs import join_runs, row_runs, union_root
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
    """8-connected components of a mask inside its bounding box `box`, as row runs (rows,
    starts, stops int64[R] in the box, each run's component `labels` int64[R], components
    numbered in raster order of their first pixel), and the components kept (area >=
    min_area, in that order)."""

    box: tuple[slice, slice]
    rows: np.ndarray
    starts: np.ndarray
    stops: np.ndarray
    labels: np.ndarray
    keep: tuple[int, ...]

    def stack(self, shape: tuple[int, int]) -> np.ndarray:
        out = np.zeros((len(self.keep), *shape), np.uint8)
        for k, i in enumerate(self.keep):
            _paint_runs(out[k][self.box], self.rows, self.starts, self.stops, self.labels, i)
        return out


def _label(mask: np.ndarray, min_area: int) -> _Labelled | None:
    """Components of a bool mask with >= `min_area` px; None for an empty mask."""
    x1, y1, x2, y2 = (int(v) for v in tight_box(mask))
    if x1 < 0:
        return None
    box = (slice(y1, y2), slice(x1, x2))
    crop = np.ascontiguousarray(mask[box]).view(np.uint8)
    rows, starts, stops, labels, areas = _label_runs(crop)
    keep = tuple(int(i) for i in np.flatnonzero(areas >= min_area))
    return _Labelled(box, rows, starts, stops, labels, keep)


@_numba.njit(cache=True, nogil=True)
def _label_runs(marked):
    """8-connected components of uint8 {0, 1} [H, W] (what OpenCV's and scikit-image's
    labelling find): the marked row runs (rows, starts, stops), each run's component
    (numbered by first pixel in raster order) and the components' areas (px).

    Runs of consecutive rows that touch (columns within one of each other) are joined by
    union-find; one pass over the pixels, then work per run."""
    starts, stops, row_first = row_runs(marked)
    parent = join_runs(starts, stops, row_first, 1)
    n = starts.shape[0]
    rows = np.empty(n, np.int64)
    for r in range(row_first.shape[0] - 1):
        rows[row_first[r] : row_first[r + 1]] = r
    labels = np.empty(n, np.int64)
    number = np.full(n, -1, np.int64)  # component number of each root
    areas = np.zeros(n, np.int64)
    count = 0
    for k in range(n):  # runs in raster order: a root's first run holds its first pixel
        root = union_root(parent, k)
        if number[root] < 0:
            number[root] = count
            count += 1
        labels[k] = number[root]
        areas[labels[k]] += stops[k] - starts[k]
    return rows, starts, stops, labels, areas[:count]


@_numba.njit(cache=True, nogil=True)
def _paint_runs(out, rows, starts, stops, labels, which) -> None:
    """Set to 1 the pixels of out ([H, W] view) covered by the runs of component `which`."""
    for k in range(rows.shape[0]):
        if labels[k] == which:
            out[rows[k], starts[k] : stops[k]] = 1


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
        void = np.asarray(void)
        if void.shape != instances.shape[1:]:
            raise ValueError(f"void: shape {void.shape} differs from masks {instances.shape[1:]}")
        if void.any():  # most records have no void: their areas need no masking
            valid = ~(void > 0)
    regions = []
    for iid, inst in zip(ids, instances, strict=True):
        if inst.dtype == np.bool_ or (inst.dtype == np.uint8 and inst.max(initial=0) <= 1):
            marked = inst.view(bool)  # {0, 1} bytes already are a bool mask: no copy,
            marked.flags.writeable = False  # so the region's mask is the record's, read-only
        else:
            marked = inst > 0
        if np.count_nonzero(marked if valid is None else marked & valid) < min_area:
            continue
        labelled = _label(marked, min_area)
        if labelled is not None and labelled.keep:
            regions.append(Region(int(iid), marked.view(np.uint8), labelled))
    return regions


def creation_target(region: Region, part: int | None, void: np.ndarray | None = None) -> np.ndarray:
    """Local training target uint8[H,W] for a gesture on `region.parts[part]` (`part=None`:
    on the whole region, e.g. an occluded object taken whole).

    1 on the part, 255 on the region's other pixels and on `void`, 0 elsewhere.
    """
    if part is not None and not 0 <= part < region.num_parts:
        raise ValueError(f"part: index {part} out of range for {region.num_parts} parts")
    target_part = region.mask > 0 if part is None else region.parts[part] > 0
    target = target_part.astype(np.uint8)  # 1 on the part, 0 elsewhere
    target[(region.mask > 0) & ~target_part] = VOID
    if void is not None:
        target[np.asarray(void) > 0] = VOID
    return target


def creation_targets(region: Region, sampling: str = "paper") -> list[int | None]:
    """The parts a creation gesture aims at (None = the whole region): "paper" — the whole
    region when it has several parts, then every part; "largest" — the largest part."""
    areas = region.parts.reshape(region.num_parts, -1).sum(1)
    if sampling == "largest":
        return [int(np.argmax(areas))]
    return ([None] if region.num_parts > 1 else []) + list(range(region.num_parts))


def disjoint_regions(regions: list[Region], mask: np.ndarray) -> list[Region]:
    """Regions sharing no pixel with `mask` (candidates for a multi-region sample)."""
    occupied = np.asarray(mask) > 0
    return [r for r in regions if not np.any((r.mask > 0) & occupied)]


@dataclasses.dataclass(frozen=True, eq=False)
class RecordRegion:
    """One region of a record among the others: `index` its position in the record's regions,
    `others` the record's other regions in that order; `disjoint` (computed on first use) the
    others sharing no pixel with it."""

    index: int
    region: Region
    others: tuple[Region, ...]

    @functools.cached_property
    def disjoint(self) -> list[Region]:
        return disjoint_regions(list(self.others), self.region.mask)


def record_regions(
    instances: np.ndarray,
    instance_ids: tuple[int, ...] | None = None,
    *,
    void: np.ndarray | None = None,
    min_area: int = MIN_AREA,
) -> list[RecordRegion]:
    """Every region of one record, in instance order, each with the others (`RecordRegion`).

    `instances` uint8/bool[K, H, W], `instance_ids` one per instance (default 1..K), `void`
    {0,1}/bool[H, W] or None. Area filter and parts as `extract_regions`: an instance is kept
    when it has >= `min_area` px (non-void px when `void` is given) and a part that large;
    its parts (`Region.parts` uint8[P, H, W]) are in raster order of their first pixel.
    """
    regions = extract_regions(instances, instance_ids, min_area, void=void)
    return [
        RecordRegion(i, region, tuple(o for o in regions if o is not region))
        for i, region in enumerate(regions)
    ]
