"""Fixed, deterministic evaluation sets: creation and refinement samples per gesture kind.

Every record is used at the photo's own resolution (or shrunk to `max_side` when given):
gestures are simulated there with the 5 px brush, as a person would draw them, and every score
is computed there, as the papers do. Predictors zoom in themselves (`dig_jax.prompts`).
For each region: creation targets its largest part; refinement corrects the largest error
component of one synthetic prior (the same prior for every kind, so kinds are compared on equal
footing). Seeds derive from (seed, record index, region index, kind): same seed, same samples.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from dig_jax.data.priors import PriorUnreachableError, find_corrections, synthesize_prior
from dig_jax.data.regions import extract_regions
from dig_jax.data.samples import Sample, creation_sample, refinement_sample
from dig_jax.data.sources.record import resize_loaded
from dig_jax.gestures.types import GestureKind

log = logging.getLogger(__name__)
MODES = ("creation", "refinement")
_MODE_CODE = {"creation": 0, "refinement": 1}


@dataclasses.dataclass
class SkipLog:
    """Items that could not be evaluated: `(name, reason)` pairs, reported at the end."""

    items: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    def add(self, name: str, reason: str) -> None:
        log.warning("skipping %s: %s", name, reason)
        self.items.append((name, reason))

    def __len__(self) -> int:
        return len(self.items)


def load_record(record: Any, max_side: int | None = None) -> Any:
    """`record.load()`, shrunk (aspect kept) when its long side exceeds `max_side`."""
    from dig_jax.data.pipeline import fit_within

    loaded = record.load()
    if max_side is not None and max(loaded.shape) > max_side:
        loaded = resize_loaded(loaded, fit_within(loaded.shape, max_side))
    return loaded


def evaluation_samples(
    records: Sequence[Any],
    *,
    max_side: int | None = None,
    kinds: Sequence[int] = tuple(GestureKind),
    modes: Sequence[str] = MODES,
    seed: int = 0,
    skipped: SkipLog | None = None,
) -> Iterator[Sample]:
    """Samples (dicts per the Sample contract, plus `mode` str) for every region x kind x mode.

    Records that fail to load, and regions whose prior cannot reach the IoU band or has no
    correction of >= 100 px, are reported to `skipped` and left out.
    """
    unknown = set(modes) - set(MODES)
    if unknown:
        raise ValueError(f"modes: unknown {sorted(unknown)}, expected a subset of {MODES}")
    skipped = SkipLog() if skipped is None else skipped
    for index, record in enumerate(records):
        name = getattr(record, "describe", "") or f"{record.source}:{record.image_id}"
        try:
            loaded = load_record(record, max_side)
        except (OSError, ValueError) as error:
            skipped.add(name, str(error))
            continue
        image_id = f"{loaded.source}/{loaded.image_id}"
        for r, region in enumerate(extract_regions(loaded.instances, loaded.instance_ids)):
            yield from _region_samples(loaded, region, image_id, (seed, index, r), kinds, modes,
                                       skipped)  # fmt: skip


def _region_samples(loaded, region, image_id, key, kinds, modes, skipped) -> Iterator[Sample]:
    largest = int(np.argmax(region.parts.reshape(region.num_parts, -1).sum(1)))
    correction, prev = None, None
    if "refinement" in modes:
        try:
            prev = synthesize_prior(
                loaded.image, region.mask, np.random.default_rng([*key, 99]), void=loaded.void
            )
            corrections = find_corrections(prev, region.mask, loaded.void)
            if corrections:
                correction = max(corrections, key=lambda c: c.area)
            else:
                skipped.add(f"{image_id}#{region.instance_id}", "prior has no correction >= 100 px")
        except PriorUnreachableError as error:
            skipped.add(f"{image_id}#{region.instance_id}", str(error))
    for mode in modes:
        for kind in kinds:
            rng = np.random.default_rng([*key, _MODE_CODE[mode], int(kind)])
            if mode == "creation":
                sample = creation_sample(
                    loaded.image, region, largest, int(kind), rng, void=loaded.void,
                    image_id=image_id,
                )  # fmt: skip
            elif correction is not None:
                sample = refinement_sample(
                    loaded.image, region, prev, correction, int(kind), rng, void=loaded.void,
                    image_id=image_id,
                )  # fmt: skip
            else:
                continue
            sample["mode"] = mode
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
