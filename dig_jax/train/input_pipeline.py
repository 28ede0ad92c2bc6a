"""Input for the training loop: grain iterators of batched Sample dicts (numpy, per process).

Source spec "synthetic:N" is a small deterministic in-memory grain dataset (one shape per image,
click or rectangle gestures, creation and refinement samples) used by tests and benchmarks;
every other spec goes through `dig_jax.data.pipeline` (procedural scenes, real photos, DIG).
"""

from __future__ import annotations

from typing import Any

import grain
import numpy as np
from scipy import ndimage

from dig_jax.data.samples import SAMPLE_KEYS
from dig_jax.gestures.types import BRUSH_RADIUS, Context, GestureKind
from dig_jax.prompts.encode import encode_context_clicks

# Keys moved to the devices: the sample's arrays and the context encodings (ids stay behind).
DEVICE_KEYS = (
    *(k for k in SAMPLE_KEYS if k not in ("image_id", "instance_id")),
    "has_region",  # DIG JSON without obj_gt: global GT unknown (left out of RICE_global)
    "positive",
    "negative",
    "box",
)


def _disc(size: int, x: float, y: float, radius: float) -> np.ndarray:
    yy, xx = np.mgrid[0:size, 0:size]
    return ((xx - x) ** 2 + (yy - y) ** 2 <= radius**2).astype(np.uint8)


def _distance(gesture: np.ndarray) -> np.ndarray:
    """EDT (px) to the marked pixels, truncated at 255, uint8."""
    if not gesture.any():
        return np.full(gesture.shape, 255, np.uint8)
    return np.minimum(ndimage.distance_transform_edt(gesture == 0), 255).astype(np.uint8)


def synthetic_sample(seed: int, index: int, size: int) -> dict[str, Any]:
    """Sample `index` of a synthetic set: a textured disc or square on noise.

    Even indices are creations (click at the object's centre, or its tight-box rectangle);
    odd ones refinements (prev = object minus a quadrant, click in the missing part, ADD).
    """
    rng = np.random.default_rng([seed, index])
    image = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
    r = rng.uniform(0.15, 0.3) * size
    cx, cy = rng.uniform(r, size - r, 2)
    region = _disc(size, cx, cy, r) if rng.random() < 0.5 else np.zeros((size, size), np.uint8)
    if not region.any():
        lo_x, lo_y = int(cx - r), int(cy - r)
        region[lo_y : int(cy + r), lo_x : int(cx + r)] = 1
    colour = rng.integers(0, 256, 3, dtype=np.uint8)
    image[region == 1] = (image[region == 1] // 4 + colour // 4 * 3).astype(np.uint8)
    prev = np.zeros_like(region)
    refine = index % 2 == 1
    if refine:
        yy, xx = np.mgrid[0:size, 0:size]
        missing = region & ((xx >= cx) & (yy >= cy)).astype(np.uint8)
        prev = region - missing
        mx, my = cx + r * 0.35, cy + r * 0.35
        gesture, kind = _disc(size, mx, my, BRUSH_RADIUS), GestureKind.CLICK
    elif rng.random() < 0.5:
        gesture, kind = _disc(size, cx, cy, BRUSH_RADIUS), GestureKind.CLICK
    else:
        rows, cols = np.nonzero(region)
        gesture = np.zeros_like(region)
        gesture[rows.min() : rows.max() + 1, cols.min() : cols.max() + 1] = 1
        inner = ndimage.binary_erosion(gesture, iterations=BRUSH_RADIUS)
        gesture = (gesture & ~inner).astype(np.uint8)
        kind = GestureKind.RECTANGLE
    return {
        "image": image,
        "gesture": gesture,
        "distance": _distance(gesture),
        "prev_mask": prev,
        "target": region.copy(),
        "region": region,
        "gesture_kind": np.int32(kind),
        "context": np.int32(Context.ADD),
        "has_prev": np.bool_(refine),
        "image_id": np.int32(index),
        "instance_id": np.int32(0),
        "local": region.copy(),
        "void": np.zeros_like(region),
    }


def synthetic_dataset(num_samples: int, size: int, seed: int) -> grain.MapDataset:
    """Grain MapDataset of `num_samples` synthetic samples (deterministic in `seed`)."""
    if num_samples < 1:
        raise ValueError(f"num_samples must be >= 1, got {num_samples}")
    return grain.MapDataset.range(num_samples).map(lambda i: synthetic_sample(seed, int(i), size))


HOLDOUT_EVERY = 10  # "%val" keeps records i % 10 == 0, "%train" the others


def _synthetic_count(spec: str) -> int | None:
    kind, _, rest = spec.partition(":")
    if kind != "synthetic":
        return None
    if not rest.isdigit():
        raise ValueError(f"data source {spec!r} must be synthetic:N")
    return int(rest)


def resolve_records(spec: str, image_size: int) -> list:
    """Records of a pipeline source spec, with an optional "%train" / "%val" held-out split."""
    from dig_jax.data.pipeline import resolve_source

    base, _, part = spec.partition("%")
    records = resolve_source(base, image_size=(image_size, image_size))
    if part == "val":
        return records[::HOLDOUT_EVERY]
    if part == "train":
        return [r for i, r in enumerate(records) if i % HOLDOUT_EVERY]
    if part:
        raise ValueError(f"data source {spec!r}: the suffix must be %train or %val")
    return records


def _dataset(config: Any, split: str, batch_size: int, process_index: int, process_count: int):
    """Batched grain IterDataset of this process's share of `split` ('train' | 'val')."""
    from dig_jax.data.pipeline import PipelineConfig, make_dataset

    cfg = PipelineConfig.from_config(config, split, batch_size=batch_size)
    size, seed, specs = config.image_size, cfg.seed, list(cfg.sources)
    counts = [_synthetic_count(s) for s in specs]
    if all(n is not None for n in counts):
        ds = synthetic_dataset(sum(counts), size, seed)
        ds = ds[process_index::process_count] if process_count > 1 else ds
        if split == "train":
            ds = ds.shuffle(seed=seed).repeat()
        return ds.to_iter_dataset().batch(batch_size, drop_remainder=split == "train")
    if any(n is not None for n in counts):
        raise ValueError(f"config.data: synthetic sources cannot be mixed with others: {specs}")
    records = [r for spec in specs for r in resolve_records(spec, size)]
    # Workers are added after the model-specific encoding (`_with_encoding_and_workers`).
    return make_dataset(
        cfg, split, sources=(records,), worker_count=0, shard=(process_index, process_count)
    )


def _with_encoding_and_workers(ds, config: Any, workers: int):
    """Context models with skeleton-click encoding get it here (in the grain workers)."""
    if config.model.input_kind == "context" and config.model.context_encoding == "clicks":
        ds = ds.map(encode_context_clicks)
    ds = ds.map(device_batch)
    if workers > 0:
        from absl import flags

        if not flags.FLAGS.is_parsed():  # grain's worker start-up reads absl flags
            flags.FLAGS.mark_as_parsed()
        ds = ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=workers))
    return ds


def make_train_iterator(config: Any, process_index: int = 0, process_count: int = 1):
    """Endless, shuffled, batched iterator with `get_state` / `set_state` (grain).

    Each process reads its own 1/process_count of the records and yields batches of
    batch_size / process_count samples.
    """
    local_batch = config.batch_size // process_count
    ds = _dataset(config, "train", local_batch, process_index, process_count)
    return iter(_with_encoding_and_workers(ds, config, config.data.worker_count))


def make_eval_batches(
    config: Any, process_index: int = 0, process_count: int = 1
) -> list[dict[str, np.ndarray]]:
    """The validation split as a list of per-process batches (a last partial batch dropped)."""
    if not config.data.val_sources:
        return []
    local_batch = config.eval.batch_size // process_count
    ds = _dataset(config, "val", local_batch, process_index, process_count)
    return [b for b in _with_encoding_and_workers(ds, config, 0) if len(b["image"]) == local_batch]


def device_batch(batch: dict[str, Any]) -> dict[str, np.ndarray]:
    """The numeric fields the model and losses need (drops ids, which may be strings)."""
    return {k: np.asarray(v) for k, v in batch.items() if k in DEVICE_KEYS}
