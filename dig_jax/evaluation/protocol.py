"""Fixed, deterministic evaluation sets: creation and refinement samples per gesture kind.

Every record is used at the photo's own resolution (or shrunk to `max_side` when given):
gestures are simulated there with the 5 px brush, as a person would draw them, and every score
is computed there, as the papers do. Predictors zoom in themselves (`dig_jax.prompts`).
Every protocol iterates the same `Instance`s (`iter_instances`: one region of one photo).
Sampling "paper" (the default, DIG §4 / Table 4): creation targets every part of a region and,
when it has several (occlusion), the whole region too; refinement corrects every error
component of >= 100 px of one synthetic prior (the same prior for every kind, so kinds are
compared on equal footing); multi-region (DIG Table 5) creates each creation target while
another region is already selected. Sampling "largest" (this project's earlier protocol):
only the largest part and the largest correction of each region. Seeds derive from (seed,
record index, region index, mode, kind, target index): same seed, same samples; the first
target (a region's only part, its largest correction) is drawn as the earlier protocol drew it.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from dig_jax.data.priors import PriorUnreachableError, find_corrections, synthesize_prior
from dig_jax.data.regions import (
    MIN_AREA,
    VOID,
    RecordRegion,
    Region,
    creation_targets,
    record_regions,
)
from dig_jax.data.samples import Sample, creation_sample, join_region, refinement_sample
from dig_jax.data.sources.record import LoadedRecord, shrink_loaded
from dig_jax.gestures.types import GestureKind

log = logging.getLogger(__name__)
MODES = ("creation", "refinement", "multi_region")
DEFAULT_MODES = ("creation", "refinement")
SAMPLINGS = ("paper", "largest")
_MODE_CODE = {"creation": 0, "refinement": 1, "multi_region": 2}


@dataclasses.dataclass
class SkipLog:
    """Items that could not be evaluated: `(name, reason)` pairs, reported at the end."""

    items: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    def add(self, name: str, reason: str) -> None:
        log.warning("skipping %s: %s", name, reason)
        self.items.append((name, reason))

    def __len__(self) -> int:
        return len(self.items)


_SLICE = re.compile(r"^(?P<spec>.+?)\[(?P<start>-?\d*):(?P<stop>-?\d*)\]$")


def load_dataset(spec: str, size: int = 512) -> list:
    """Records of a dataset spec: a `dig_jax.data.pipeline.resolve_source` spec (grabcut,
    berkeley, coco_mval, procedural:N, folder:PATH, ...) with an optional held-out split suffix
    as in the training configs (`coco_mval%val` = every 10th record) and an optional slice,
    e.g. `grabcut[0:10]`. `size`: the side procedural scenes are rendered at."""
    from dig_jax.train.input_pipeline import resolve_records

    match = _SLICE.match(spec)
    base = match["spec"] if match else spec
    records = resolve_records(base, size)
    if match:
        start = int(match["start"]) if match["start"] else None
        stop = int(match["stop"]) if match["stop"] else None
        records = records[start:stop]
    return list(records)


def _name(record: Any, index: int) -> str:
    """How a record or prebuilt entry is named in reports: its file(s), else source:id."""
    name = getattr(record, "describe", "") or getattr(record, "name", "")
    if name:
        return str(name)
    if hasattr(record, "source") and hasattr(record, "image_id"):
        return f"{record.source}:{record.image_id}"
    return f"{type(record).__name__} #{index}"


def _sample_record(sample: Sample) -> LoadedRecord:
    """The photo and object of a prebuilt sample, as a one-instance record."""
    return LoadedRecord(
        "prebuilt", str(sample["image_id"]), sample["image"],
        (np.asarray(sample["region"]) > 0).astype(np.uint8)[None],
        np.asarray(sample.get("void", np.zeros(sample["region"].shape, np.uint8))),
        (int(sample["instance_id"]),),
    )  # fmt: skip


def load_record(record: Any, max_side: int | None = None) -> Any:
    """`record.load()`, shrunk (aspect kept) when its long side exceeds `max_side`
    (`shrink_loaded`); prebuilt samples (DIG JSON, TFDS entries) come back as their sample
    dict, unchanged."""
    loaded = record.load()
    return loaded if isinstance(loaded, dict) else shrink_loaded(loaded, max_side)


@dataclasses.dataclass(frozen=True, eq=False)
class Instance:
    """One region of one photo, at the photo's own resolution: what every protocol iterates.

    `index` = (record index, region index) seeds every draw made for this instance; `entry`
    is the region among the photo's others (`record_regions`: the disjoint ones make
    multi-region samples).
    """

    name: str
    index: tuple[int, int]
    loaded: Any  # LoadedRecord
    entry: RecordRegion

    @property
    def region(self) -> Region:
        return self.entry.region

    @property
    def image_id(self) -> str:
        return f"{self.loaded.source}/{self.loaded.image_id}"

    @property
    def largest_part(self) -> int:
        return creation_targets(self.region, "largest")[0]

    @property
    def gt(self) -> np.ndarray:
        """Global GT uint8[H, W]: the region, 255 on the dataset's void."""
        return np.where(self.loaded.void > 0, VOID, self.region.mask).astype(np.uint8)


def _loaded(records: Sequence[Any], max_side: int | None, skipped: SkipLog) -> Iterator:
    """(index, record, loaded record or prebuilt sample dict); failures go to `skipped`."""
    for index, record in enumerate(records):
        try:
            yield index, record, load_record(record, max_side)
        except (OSError, ValueError) as error:
            skipped.add(_name(record, index), str(error))


def _record_instances(index: int, loaded: Any, min_area: int) -> Iterator[Instance]:
    # void=None: the area filter counts void pixels too (training and the build count
    # non-void pixels only); kept so that evaluation sets stay as they were.
    for entry in record_regions(loaded.instances, loaded.instance_ids, min_area=min_area):
        name = f"{loaded.source}/{loaded.image_id}#{entry.region.instance_id}"
        yield Instance(name, (index, entry.index), loaded, entry)


def iter_instances(
    records: Sequence[Any],
    *,
    max_side: int | None = None,
    skipped: SkipLog | None = None,
    min_area: int = MIN_AREA,
) -> Iterator[Instance]:
    """Every region (>= `min_area` px: DIG drops smaller ones) of every record, in order (of a
    prebuilt set, every object once); records that fail to load, and prebuilt objects without a
    global GT (DIG JSON without `obj_gt`), are reported to `skipped`."""
    skipped = SkipLog() if skipped is None else skipped
    seen: set[tuple[str, int]] = set()
    for index, record, loaded in _loaded(records, max_side, skipped):
        if isinstance(loaded, dict):  # a prebuilt sample: its object, once
            key = (str(loaded["image_id"]), int(loaded["instance_id"]))
            if key in seen:
                continue
            seen.add(key)
            if not loaded.get("has_region", True):
                skipped.add(_name(record, index), "no global GT (the whole region) to iterate on")
                continue
            loaded = _sample_record(loaded)
        yield from _record_instances(index, loaded, min_area)


def nog_items(
    records: Sequence[Any], max_side: int | None = None, skipped: SkipLog | None = None
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(image, global GT with void, largest part bool) of every instance, at the photo's own
    size: the items of the iterative protocols (NoG, RClicks)."""
    return [
        (i.loaded.image, i.gt, i.region.parts[i.largest_part] > 0)
        for i in iter_instances(records, max_side=max_side, skipped=skipped)
    ]


def evaluation_samples(
    records: Sequence[Any],
    *,
    max_side: int | None = None,
    kinds: Sequence[int] = tuple(GestureKind),
    modes: Sequence[str] = DEFAULT_MODES,
    seed: int = 0,
    skipped: SkipLog | None = None,
    sampling: str = "paper",
) -> Iterator[Sample]:
    """Samples (dicts per the Sample contract, plus `mode` str and `target_index` int) for
    every region x mode x target x kind.

    Modes: "creation" (a gesture on each part, and on the whole region when it has several
    parts), "refinement" (each correction of >= 100 px of one synthetic prior, the same prior
    for every kind), "multi_region" (DIG Table 5: a creation gesture while the previous mask
    already holds the photo's largest other disjoint region, which must be kept). `sampling`
    "largest": the largest part and the largest correction only (see the module docstring).
    Records that fail to load, and regions whose prior cannot reach the IoU band, has no
    correction of >= 100 px, or (multi-region) that have no disjoint other region, are
    reported to `skipped` and left out.
    """
    unknown = set(modes) - set(MODES)
    if unknown:
        raise ValueError(f"modes: unknown {sorted(unknown)}, expected a subset of {MODES}")
    if sampling not in SAMPLINGS:
        raise ValueError(f"sampling: expected one of {SAMPLINGS}, got {sampling!r}")
    skipped = SkipLog() if skipped is None else skipped
    for index, record, loaded in _loaded(records, max_side, skipped):
        if isinstance(loaded, dict):  # a prebuilt set, e.g. DIG JSON: its own samples
            yield from _prebuilt_samples(record, loaded, index, kinds, modes, skipped)
            continue
        for instance in _record_instances(index, loaded, MIN_AREA):
            yield from _region_samples(
                instance, (seed, *instance.index), kinds, modes, skipped, sampling
            )


def _prebuilt_samples(entry, sample, index, kinds, modes, skipped) -> Iterator[Sample]:
    """A prebuilt sample as it was built (gesture and prior included) and, when
    "multi_region" is among `modes`, its multi-region variant (DIG JSON)."""
    variants = [(entry, sample)]
    if "multi_region" in modes and getattr(entry, "has_multi", False):
        try:
            variant = entry.multi_variant()
            variants.append((variant, variant.load()))
        except (OSError, ValueError) as error:
            skipped.add(_name(entry, index), str(error))
    for variant, s in variants:
        s["mode"] = MODES[2 if getattr(variant, "multi", False) else int(bool(s["has_prev"]))]
        if s["mode"] in modes and int(s["gesture_kind"]) in kinds:
            yield s


def _refinement_start(instance: Instance, key: tuple, skipped: SkipLog):
    """(prior, its corrections of >= 100 px, largest first) of an instance, or (None, [])
    reported as skipped."""
    loaded, region = instance.loaded, instance.region
    try:
        prev = synthesize_prior(
            loaded.image, region.mask, np.random.default_rng([*key, 99]), void=loaded.void
        )
    except PriorUnreachableError as error:
        skipped.add(instance.name, str(error))
        return None, []
    corrections = find_corrections(prev, region.mask, loaded.void)
    if not corrections:
        skipped.add(instance.name, "prior has no correction >= 100 px")
        return None, []
    return prev, sorted(corrections, key=lambda c: -c.area)  # stable: ties keep their order


def _other_region(instance: Instance, skipped: SkipLog) -> Region | None:
    """The largest other region sharing no pixel with the instance's region, or None."""
    others = instance.entry.disjoint
    if not others:
        skipped.add(instance.name, "no disjoint other region for a multi-region sample")
        return None
    return max(others, key=lambda r: r.area)


def _region_samples(instance: Instance, key, kinds, modes, skipped, sampling) -> Iterator[Sample]:
    """One region's samples: per mode, per target (part / whole region, or correction), per
    kind; `key` seeds them (see the module docstring)."""
    loaded, region = instance.loaded, instance.region
    prev, corrections, other = None, [], None
    if "refinement" in modes:
        prev, corrections = _refinement_start(instance, key, skipped)
        corrections = corrections[:1] if sampling == "largest" else corrections
    if "multi_region" in modes:
        other = _other_region(instance, skipped)
    parts = creation_targets(region, sampling)
    for mode in modes:
        if mode == "multi_region" and other is None:
            continue
        targets = corrections if mode == "refinement" else parts
        for t, aim in enumerate(targets):
            for kind in kinds:
                seeds = [*key, _MODE_CODE[mode], int(kind)] + ([t] if t > 0 else [])
                rng = np.random.default_rng(seeds)
                if mode == "refinement":
                    sample = refinement_sample(
                        loaded.image, region, prev, aim, int(kind), rng, void=loaded.void,
                        image_id=instance.image_id,
                    )  # fmt: skip
                else:
                    sample = creation_sample(
                        loaded.image, region, aim, int(kind), rng, void=loaded.void,
                        image_id=instance.image_id,
                    )  # fmt: skip
                    if mode == "multi_region":
                        sample = join_region(sample, other.mask)
                sample["mode"] = mode
                sample["target_index"] = t
                yield sample


def chunks(samples: Iterable[Sample], size: int) -> Iterator[list[Sample]]:
    """Consecutive lists of `size` samples (the last one may be shorter)."""
    chunk: list[Sample] = []
    for sample in samples:
        chunk.append(sample)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def stack(samples: Sequence[Sample]) -> dict[str, np.ndarray]:
    """Batch dict: every key of the samples with a leading axis (samples of one shape)."""
    return {key: np.stack([np.asarray(s[key]) for s in samples]) for key in samples[0]}
