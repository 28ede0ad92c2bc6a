"""Attack every instance of a dataset → IoU-Tight / Min / Max / Δ on the original photos.

Instances are the evaluation protocol's (`dig_jax.evaluation.protocol.iter_instances`, at the
photo's own resolution; every non-empty instance, as BREPS attacks them). Each is attacked in
the zoom crop that `predict` uses for its tight box (`zoom_instance`), batched at the model's
working size; the step size is BREPS's, in pixels of the original photo (scaled into the
crop), and the brush is 5 photo pixels. The crop stays fixed while the box moves (the gradient
needs a fixed crop). The three boxes of each instance (tight, worst, best) are then scored on
the original photo: their crop logits are pasted back (`dig_jax.prompts.paste_logits`) and
compared with the full-resolution mask, void ignored; Min and Max include the tight box, as
the attack does.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from dig_jax import prompts
from dig_jax.data.sources.record import Record
from dig_jax.gestures.types import BRUSH_RADIUS
from dig_jax.metrics import iou
from dig_jax.metrics.breps import breps_metrics
from dig_jax.robustness.breps.attack import (
    BREPS_LAM,
    BREPS_LR_MULT,
    BREPS_STEPS,
    EncodeBox,
    PredictLogits,
    attack_lr,
    breps_attack_batch,
)
from dig_jax.robustness.breps.prepare import Zoomed, zoom_instance


@functools.lru_cache(maxsize=16)
def _crop_logits_fn(predict_logits: PredictLogits, encode_box: EncodeBox):
    """jit: (boxes f32[N, 4], images f32[N, S, S, 3], radii f32[N]) -> logits f32[N, S, S]."""
    takes_radius = "radius" in inspect.signature(encode_box).parameters

    def encode(box, image, radius):
        return encode_box(box, image, radius=radius) if takes_radius else encode_box(box, image)

    def run(boxes, images, radii):
        return predict_logits(jax.vmap(encode)(boxes, images, radii))

    return jax.jit(run)


def _photo_ious(crop_logits: np.ndarray, zoomed: Zoomed, gt: np.ndarray) -> list[float]:
    """IoU on the photo of each crop logit map f32[K, S, S] of one instance."""
    pasted = [prompts.paste_logits(logits, zoomed.box, zoomed.shape) for logits in crop_logits]
    return [float(iou((p > 0).astype(np.uint8), gt)) for p in pasted]


def attack_dataset(
    predict_logits: PredictLogits,
    encode_box: EncodeBox,
    records: Iterable[Record],
    *,
    size: int = 320,
    batch: int = 4,
    steps: int = BREPS_STEPS,
    lam: float = BREPS_LAM,
    lr_mult: float = BREPS_LR_MULT,
    limit: int | None = None,
    desc: str = "BREPS",
    progress: bool = True,
) -> dict[str, Any]:
    """Min and max attacks on every instance in its zoom crop at `size` (the model's working
    size), `batch` instances at a time; IoUs on the original photos (module docstring).

    Returns dict(metrics=breps_metrics, instances=[{id, iou_tight, iou_min, iou_max, tight,
    box_min, box_max (boxes in original-photo pixels)}], skipped=[reasons]).
    """
    from dig_jax.evaluation.protocol import SkipLog, iter_instances

    if batch < 1 or size < 8:
        raise ValueError(f"batch must be >= 1 and size >= 8, got {batch}, {size}")
    skipped = SkipLog()
    rows: list[dict[str, Any]] = []
    pending: list[tuple[str, Zoomed, np.ndarray]] = []
    rescore = _crop_logits_fn(predict_logits, encode_box)
    bar = tqdm(desc=desc, unit="inst", total=limit, disable=not progress)

    def flush() -> None:
        n = len(pending)
        items = pending + [pending[-1]] * (batch - n)  # fixed batch shape: pad by repetition
        images = np.stack([z.image for _, z, _ in items])
        gts = np.stack([z.gt for _, z, _ in items])
        lr_px = np.array([attack_lr(*z.shape, lr_mult) * z.scale for _, z, _ in items])
        radius = np.array([BRUSH_RADIUS * z.scale for _, z, _ in items], np.float32)
        kw = dict(steps=steps, lam=lam, lr_mult=lr_mult, encode_box=encode_box, lr_px=lr_px,
                  radius=radius, bounds=np.stack([z.bounds for _, z, _ in items]))  # fmt: skip
        lo = breps_attack_batch(predict_logits, images, gts, mode="min", **kw)
        hi = breps_attack_batch(predict_logits, images, gts, mode="max", **kw)
        boxes = np.stack([np.asarray(lo.tight), np.asarray(lo.box), np.asarray(hi.box)], 1)
        logits = np.asarray(
            rescore(
                jnp.asarray(boxes.reshape(-1, 4)),
                jnp.asarray(np.repeat(images, 3, axis=0), jnp.float32),
                jnp.asarray(np.repeat(radius, 3)),
            )
        ).reshape(batch, 3, size, size)
        if not np.isfinite(logits).all():  # NaN would read as background: IoU 0, no warning
            raise FloatingPointError("the segmenter produced NaN/Inf logits during the attack")
        for i, (name, zoomed, gt) in enumerate(pending):
            tight, worst, best = _photo_ious(logits[i], zoomed, gt)
            photo_boxes = zoomed.to_photo(boxes[i]).round(2)
            rows.append(
                {
                    "id": name,
                    "iou_tight": tight,
                    "iou_min": min(tight, worst),
                    "iou_max": max(tight, best),
                    "tight": photo_boxes[0].tolist(),
                    "box_min": photo_boxes[1 if worst < tight else 0].tolist(),
                    "box_max": photo_boxes[2 if best > tight else 0].tolist(),
                }
            )
        bar.update(n)
        pending.clear()

    instances = iter_instances(list(records), skipped=skipped, min_area=1)  # every instance
    for count, instance in enumerate(instances):
        if limit is not None and count >= limit:
            break
        gt = instance.gt
        pending.append((instance.name, zoom_instance(instance.loaded.image, gt, size), gt))
        if len(pending) == batch:
            flush()
    if pending:
        flush()
    bar.close()
    metrics = breps_metrics(
        *(np.array([r[k] for r in rows]) for k in ("iou_tight", "iou_min", "iou_max"))
    )
    return {
        "metrics": metrics,
        "instances": rows,
        "skipped": [f"{name}: {reason}" for name, reason in skipped.items],
    }
