"""Turn a loaded record (or a region and a prior) into training samples.

A sample is a dict of numpy values, exactly the contract of COMMON.md / DESIGN.md:
  image uint8[H,W,3], gesture uint8[H,W] {0,1}, distance uint8[H,W] (EDT in px to the marked
  pixels, truncated at 255), prev_mask uint8[H,W] {0,1}, target uint8[H,W] {0,1,255} (local GT
  with void), region uint8[H,W] {0,1} (global GT), gesture_kind int32, context int32,
  has_prev bool, image_id str, instance_id int32, plus for scoring: local uint8[H,W] {0,1}
  (local GT per DESIGN.md: creation — the targeted part; refinement — the previous mask with
  exactly the targeted error corrected) and void uint8[H,W] {0,1} (the dataset's own void,
  e.g. GrabCut's boundary band, ignored by every score).
Gestures are simulated at the array size they are given (the photo's own, or shrunk).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict, Unpack

import numpy as np

from dig_jax.data.priors import (
    COARSE_OVER,
    Correction,
    PriorUnreachableError,
    coarse_prior,
    find_corrections,
    refinement_targets,
    synthesize_prior,
)
from dig_jax.data.regions import VOID, Region, creation_target, record_regions
from dig_jax.gestures import distance_uint8, rasterize, simulate_creation, simulate_refinement
from dig_jax.gestures.types import Context, Gesture, GestureKind

if TYPE_CHECKING:
    from dig_jax.data.sources.record import LoadedRecord

Sample = dict[str, Any]
ALL_KINDS = tuple(GestureKind)
SAMPLE_KEYS = (
    "image", "gesture", "distance", "prev_mask", "target", "region",
    "gesture_kind", "context", "has_prev", "image_id", "instance_id", "local", "void",
)  # fmt: skip


def gesture_maps(gesture: Gesture, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """(gesture map uint8 {0,1}, distance uint8) of a gesture rasterised on `shape`."""
    raster = np.asarray(rasterize(gesture, shape), np.uint8)
    return raster, distance_uint8(raster)


def make_sample(
    *,
    image: np.ndarray,
    gesture_map: np.ndarray,
    prev_mask: np.ndarray | None,
    target: np.ndarray,
    region: np.ndarray,
    kind: int,
    context: int,
    image_id: str,
    instance_id: int,
    distance: np.ndarray | None = None,
    local: np.ndarray | None = None,
    void: np.ndarray | None = None,
    with_distance: bool = True,
) -> Sample:
    """Assemble a sample dict with the contract's dtypes; `prev_mask=None` means no prior.

    `local` defaults to the target's 1 pixels, `void` to none. `with_distance=False` leaves
    the "distance" key out (for callers that crop the sample and compute it on the crop).

    ValueError naming the argument when `image` is not [H, W, 3] or a mask is not [H, W].
    """
    image = np.asarray(image)
    if image.ndim != 3 or image.shape[-1] != 3:
        raise ValueError(f"image: expected RGB [H, W, 3], got shape {image.shape}")
    shape = image.shape[:2]
    masks = dict(gesture_map=gesture_map, prev_mask=prev_mask, target=target, region=region,
                 distance=distance, local=local, void=void)  # fmt: skip
    for name, mask in masks.items():
        if mask is not None and np.shape(mask) != shape:
            raise ValueError(f"{name}: size {np.shape(mask)} differs from image size {shape}")
    gesture_map = (np.asarray(gesture_map) > 0).astype(np.uint8)
    has_prev = prev_mask is not None
    prev = np.zeros(shape, np.uint8) if prev_mask is None else (np.asarray(prev_mask) > 0)
    sample = {
        "image": np.ascontiguousarray(image, np.uint8),
        "gesture": gesture_map,
        "prev_mask": prev.astype(np.uint8),
        "target": np.asarray(target, np.uint8),
        "region": (np.asarray(region) > 0).astype(np.uint8),
        "gesture_kind": np.int32(kind),
        "context": np.int32(context),
        "has_prev": np.bool_(has_prev),
        "image_id": str(image_id),
        "instance_id": np.int32(instance_id),
        "local": (np.asarray(target) == 1 if local is None else np.asarray(local) > 0).astype(
            np.uint8
        ),
        "void": np.zeros(shape, np.uint8)
        if void is None
        else (np.asarray(void) > 0).astype(np.uint8),
    }
    if with_distance:
        sample["distance"] = distance_uint8(gesture_map) if distance is None else distance
    return {key: sample[key] for key in SAMPLE_KEYS if key in sample}  # the contract's order


class SampleOptions(TypedDict, total=False):
    """Keywords of `creation_sample` and `refinement_sample`: the dataset's `void` mask
    (default none), `image_id` (default "") and `with_distance` (default True; see
    `make_sample`)."""

    void: np.ndarray | None
    image_id: str
    with_distance: bool


def _gesture_sample(
    image: np.ndarray,
    region: Region,
    gesture: Gesture,
    kind: int,
    context: int,
    prev: np.ndarray | None,
    target: np.ndarray,
    local: np.ndarray,
    *,
    void: np.ndarray | None = None,
    image_id: str = "",
    with_distance: bool = True,
) -> Sample:
    """The sample of `gesture`, rasterised on `image`, for `region` (see `make_sample`)."""
    raster = np.asarray(rasterize(gesture, image.shape[:2]), np.uint8)
    return make_sample(
        image=image, gesture_map=raster, prev_mask=prev, target=target, region=region.mask,
        kind=kind, context=context, image_id=image_id, instance_id=region.instance_id,
        local=local, void=void, with_distance=with_distance,
    )  # fmt: skip


def creation_sample(
    image: np.ndarray,
    region: Region,
    part: int | None,
    kind: int,
    rng: np.random.Generator,
    **options: Unpack[SampleOptions],
) -> Sample:
    """A creation sample: a gesture of `kind` on `region.parts[part]` (`part=None`: on the
    whole region), no previous mask."""
    aim = region.mask if part is None else region.parts[part]
    gesture = simulate_creation(GestureKind(kind), aim, rng)
    target = creation_target(region, part, options.get("void"))
    return _gesture_sample(image, region, gesture, kind, Context.ADD, None, target, aim, **options)


def refinement_sample(
    image: np.ndarray,
    region: Region,
    prev: np.ndarray,
    correction: Correction,
    kind: int,
    rng: np.random.Generator,
    **options: Unpack[SampleOptions],
) -> Sample:
    """A refinement sample: a gesture of `kind` on one error component of `prev`."""
    gesture = simulate_refinement(GestureKind(kind), correction.mask, correction.context, rng)
    local, target = refinement_targets(prev, region.mask, correction, options.get("void"))
    context = correction.context
    return _gesture_sample(image, region, gesture, kind, context, prev, target, local, **options)


def join_region(sample: Sample, other: np.ndarray) -> Sample:
    """Multi-region sample: `other` (a correct, disjoint region) joins the previous mask,
    the target (except its void pixels) and the global GT. The gesture is unchanged."""
    other = np.asarray(other) > 0
    if np.any(other & (sample["region"] > 0)) or np.any(other & (sample["prev_mask"] > 0)):
        raise ValueError("other: region overlaps the sample's region or previous mask")
    out = dict(sample)
    out["prev_mask"] = (sample["prev_mask"] | other).astype(np.uint8)
    target = sample["target"].copy()
    target[other & (target != VOID)] = 1
    out["target"] = target
    if "local" in sample:
        out["local"] = (sample["local"] | other).astype(np.uint8)
    out["region"] = (sample["region"] | other).astype(np.uint8)
    out["has_prev"] = np.bool_(True)
    return out


def leak_prior(prev: np.ndarray, other: np.ndarray) -> np.ndarray:
    """uint8[H, W] {0,1}: the previous mask `prev` with the region `other` (bool/{0,1}[H, W],
    outside the GT) selected as well: the leak a wrong first mask leaves, for a REMOVE gesture
    to correct. Synthetic priors alone (`synthesize_prior`) only err along the GT boundary."""
    prev, other = np.asarray(prev), np.asarray(other)
    if prev.shape != other.shape:
        raise ValueError(f"other: shape {other.shape} differs from prev shape {prev.shape}")
    return ((prev > 0) | (other > 0)).astype(np.uint8)


def random_sample(
    loaded: LoadedRecord,
    rng: np.random.Generator,
    *,
    prior_prob: float = 0.5,
    multi_region_prob: float = 0.0,
    kinds: tuple[int, ...] = ALL_KINDS,
    with_distance: bool = True,
    leak_prob: float = 0.0,
    leak_kinds: tuple[int, ...] = ALL_KINDS,
    coarse_prob: float = 0.0,
    coarse_kinds: tuple[int, ...] = ALL_KINDS,
    coarse_over: tuple[float, float] = COARSE_OVER,
) -> Sample | None:
    """One random sample from a loaded record; None when it has no region of >= 300 non-void px.

    A region is drawn uniformly. With probability `prior_prob` the sample refines a synthetic
    prior at one of its corrections; when the prior cannot be made (IoU band unreachable, or a
    ValueError such as a region that is void where it matters) or has no correction of >= 100
    px it falls back to creation on a random part. With probability `multi_region_prob` a
    creation sample becomes a multi-region one (dataAug, as in DIG): another disjoint region
    joins the previous mask and the GT. With probability `leak_prob` a synthetic prior also
    takes in another disjoint region of the photo (a wrong object or background selected, as a
    bad first click leaves it; `leak_prior`) and the sample corrects that leak with a REMOVE
    gesture; only samples whose gesture kind is in `leak_kinds` get one (the draw is made only
    for them). With probability `coarse_prob` the prior is a badly wrong one instead
    (`coarse_prior`: a small piece of the region, or the region with a blob of background),
    and the sample corrects its largest error, as a user's second click after a wrong first
    mask does; only samples whose gesture kind is in `coarse_kinds` get one (the draw is made
    only for them); `coarse_over` is the range of background an over-segmenting one takes in,
    as a share of the region's area. `with_distance=False`: no "distance" key (see `make_sample`).
    """
    regions = record_regions(loaded.instances, loaded.instance_ids, void=loaded.void)
    if not regions:
        return None
    entry = regions[int(rng.integers(len(regions)))]
    region = entry.region
    kind = int(kinds[int(rng.integers(len(kinds)))])
    image_id = f"{loaded.source}/{loaded.image_id}"
    sample = None
    if rng.random() < prior_prob:
        coarse = coarse_prob > 0 and kind in coarse_kinds and rng.random() < coarse_prob
        try:
            if coarse:
                prev = coarse_prior(
                    loaded.image, region.mask, rng, void=loaded.void, over=coarse_over
                )
            else:
                prev = synthesize_prior(loaded.image, region.mask, rng, void=loaded.void)
        except (PriorUnreachableError, ValueError):
            prev = None
        leak = None
        if (
            prev is not None and not coarse and leak_prob > 0 and entry.disjoint
            and kind in leak_kinds and rng.random() < leak_prob
        ):  # fmt: skip
            leak = entry.disjoint[int(rng.integers(len(entry.disjoint)))].mask > 0
            prev = leak_prior(prev, leak)
        corrections = [] if prev is None else find_corrections(prev, region.mask, loaded.void)
        if corrections and leak is not None:  # the component that holds the leak
            correction = max(corrections, key=lambda c: int(np.sum((c.mask > 0) & leak)))
        elif corrections and coarse:  # the large error a coarse prior leaves
            correction = max(corrections, key=lambda c: c.area)
        elif corrections:
            correction = corrections[int(rng.integers(len(corrections)))]
        if corrections:
            sample = refinement_sample(
                loaded.image, region, prev, correction, kind, rng, void=loaded.void,
                image_id=image_id, with_distance=with_distance,
            )  # fmt: skip
    if sample is None:
        part = int(rng.integers(region.num_parts))
        sample = creation_sample(
            loaded.image, region, part, kind, rng, void=loaded.void, image_id=image_id,
            with_distance=with_distance,
        )  # fmt: skip
    if not sample["has_prev"] and rng.random() < multi_region_prob:  # creation samples only
        others = entry.disjoint  # a creation sample's prev_mask is empty, its region the mask
        if others:
            sample = join_region(sample, others[int(rng.integers(len(others)))].mask)
    return sample
