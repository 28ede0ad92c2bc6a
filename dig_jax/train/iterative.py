"""Iterative training: the model's own prediction becomes the previous mask, and the next
gesture is aimed at one of its errors (RITM's iterative sampling, made gesture-agnostic).

With probability `config.iterative.prob` a training batch is run through the current model
1..`max_steps` times before the step (no gradient). After each pass every sample whose mask
still has an error component of at least `min_area` crop pixels (against the whole region,
void ignored) gets a new interaction: the predicted mask is its previous mask, a gesture of a
random kind is simulated on one error component (drawn with probability proportional to its
area, so mostly the largest, as the NoG protocol corrects), and its target is the prediction
with exactly that component corrected, every other error void (DIG's refinement target). The
loss of the step is then taken on that last interaction. Samples without such an error keep
their last interaction. Everything happens in the sample's zoom crop, at the working size.

Grown first masks (`grow_prob`): in the loop the runs that never converge start from a first
mask that took in far too much, and the REMOVE clicks after it change little. With probability
`grow_prob` a sample's first-pass mask is instead the `k` x region-area pixels the model ranks
highest (k uniform in `grow_scale`; never less than its own mask, at most 0.9 of the crop): the
model's own over-segmentation, grown along its own confidence, which the next gesture (drawn from
`grow_kinds`) then corrects.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from dig_jax.data.priors import find_corrections, refinement_targets
from dig_jax.gestures import distance_uint8, rasterize, simulate_refinement
from dig_jax.gestures.types import GestureKind

ALL_KINDS = tuple(int(k) for k in GestureKind)


@dataclasses.dataclass(frozen=True)
class IterativeConfig:
    """`prob`: share of batches trained on the model's own masks; `max_steps`: passes before
    the step, drawn uniformly in 1..max_steps; `min_area`: smallest error component (crop
    px) a gesture is aimed at; `kinds`: gesture kinds the corrections are drawn from;
    `grow_prob`: share of samples (in iterative batches) whose first-pass mask is grown to
    `grow_scale` (lo, hi) times the region's area along the model's logits; `grow_kinds`: the
    kinds that correct a grown mask."""

    prob: float = 0.0
    max_steps: int = 3
    min_area: int = 20
    kinds: tuple[int, ...] = ALL_KINDS
    grow_prob: float = 0.0
    grow_scale: tuple[float, float] = (1.5, 4.0)
    grow_kinds: tuple[int, ...] = (int(GestureKind.CLICK),)

    def __post_init__(self) -> None:
        if not 0.0 <= self.prob <= 1.0:
            raise ValueError(f"prob: must be in [0, 1], got {self.prob}")
        if self.max_steps < 1:
            raise ValueError(f"max_steps: must be >= 1, got {self.max_steps}")
        if self.min_area < 1:
            raise ValueError(f"min_area: must be >= 1, got {self.min_area}")
        for name in ("kinds", "grow_kinds"):
            kinds = getattr(self, name)
            if not kinds or any(int(k) not in ALL_KINDS for k in kinds):
                raise ValueError(f"{name}: must be a non-empty subset of 0..4, got {kinds}")
        if not 0.0 <= self.grow_prob <= 1.0:
            raise ValueError(f"grow_prob: must be in [0, 1], got {self.grow_prob}")
        lo, hi = (float(v) for v in self.grow_scale)
        if not (np.isfinite(lo) and np.isfinite(hi) and 1.0 <= lo <= hi):
            raise ValueError(
                f"grow_scale: must be (lo, hi) with 1 <= lo <= hi, got {self.grow_scale}"
            )

    @classmethod
    def from_config(cls, config: Any) -> IterativeConfig:
        """`config.iterative` (absent: iterative training off)."""
        entry = config.get("iterative", None)
        if entry is None:
            return cls()
        values = dict(entry)
        for name in ("kinds", "grow_kinds"):
            if name in values:
                values[name] = tuple(int(k) for k in values[name])
        if "grow_scale" in values:
            values["grow_scale"] = tuple(float(v) for v in values["grow_scale"])
        return cls(**values)


def next_interaction(
    batch: dict[str, np.ndarray],
    predicted: np.ndarray,
    rng: np.random.Generator,
    config: IterativeConfig,
    grown: np.ndarray | None = None,
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """(batch with the next interaction, bool[B] which samples got one).

    `batch`: a training batch in its crops (numpy: image, gesture, distance, prev_mask,
    target, region, local, void, gesture_kind, context, has_prev; [B, S, S] maps);
    `predicted`: the model's masks {0,1}/bool[B, S, S] for that batch; `grown`: bool[B], the
    samples whose mask was grown (their gesture kind is drawn from `config.grow_kinds`). The
    input is not changed.
    """
    predicted = np.asarray(predicted) > 0
    out = {k: np.array(v) for k, v in batch.items()}
    size = predicted.shape[1:3]
    changed = np.zeros(len(predicted), bool)
    for i, pred in enumerate(predicted):
        void = out["void"][i] > 0
        corrections = find_corrections(pred, out["region"][i], void, config.min_area)
        if not corrections:
            continue
        areas = np.array([c.area for c in corrections], np.float64)
        correction = corrections[int(rng.choice(len(corrections), p=areas / areas.sum()))]
        kinds = config.grow_kinds if grown is not None and grown[i] else config.kinds
        kind = int(kinds[int(rng.integers(len(kinds)))])
        gesture = simulate_refinement(kind, correction.mask, correction.context, rng)
        raster = np.asarray(rasterize(gesture, size), np.uint8)
        local, target = refinement_targets(pred, out["region"][i], correction, void)
        out["gesture"][i] = raster
        out["distance"][i] = distance_uint8(raster)
        out["prev_mask"][i] = pred
        out["target"][i] = target
        out["local"][i] = local
        out["gesture_kind"][i] = kind
        out["context"][i] = int(correction.context)
        out["has_prev"][i] = True
        changed[i] = True
    return out, changed


def grow_masks(
    logits: np.ndarray,
    region: np.ndarray,
    void: np.ndarray,
    scale: np.ndarray,
) -> np.ndarray:
    """bool[B, S, S]: each sample's mask grown to `scale[b]` x its region's area (void not
    counted), taking pixels in the order of `logits` (float[B, S, S], highest first; ties by
    position), never below its own mask (logits > 0) and at most 0.9 of the crop."""
    logits = np.asarray(logits, np.float32)
    out = logits > 0
    size = logits.shape[1] * logits.shape[2]
    for i, row in enumerate(logits):
        area = int(((np.asarray(region[i]) > 0) & ~(np.asarray(void[i]) > 0)).sum())
        n = min(round(float(scale[i]) * area), int(0.9 * size))
        if n <= int(out[i].sum()):
            continue
        order = np.argsort(-row.ravel(), kind="stable")[:n]
        flat = out[i].reshape(-1)
        flat[order] = True
    return out


def iterate_batch(
    batch: dict[str, np.ndarray],
    predict: Callable[[dict[str, np.ndarray]], np.ndarray],
    rng: np.random.Generator,
    config: IterativeConfig,
    encode: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]] | None = None,
) -> tuple[dict[str, np.ndarray], int]:
    """(the batch after its interactions, passes run): with probability `config.prob`,
    1..max_steps rounds of `predict` (batch -> mask logits float[B, S, S]; a {0,1} mask does as
    well where `grow_prob` is 0) cut at 0, and `next_interaction`; with `grow_prob`, some masks
    of the first round grown (`grow_masks`). `encode` re-derives model-specific maps (context
    models' click encodings) after each round. Draws from `rng` in a fixed order: same rng
    state, same batch (and with `grow_prob` 0 the same draws as without the field)."""
    if config.prob <= 0 or rng.random() >= config.prob:
        return batch, 0
    steps = int(rng.integers(1, config.max_steps + 1))
    for step in range(steps):
        logits = np.asarray(predict(batch))
        grown = None
        if step == 0 and config.grow_prob > 0:
            n = len(logits)
            grown = rng.random(n) < config.grow_prob
            scale = np.where(grown, rng.uniform(*config.grow_scale, size=n), 0.0)
            masks = grow_masks(logits, batch["region"], batch["void"], scale)
        else:
            masks = logits > 0
        batch, changed = next_interaction(batch, masks, rng, config, grown)
        if encode is not None:
            batch = encode(batch)
        if not changed.any():
            return batch, step + 1
    return batch, steps
