"""Attack every instance of a dataset (fixed-size letterboxed batches) → IoU-Tight/Min/Max/Δ."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from dig_jax.data.sources.record import Record
from dig_jax.metrics.breps import breps_metrics
from dig_jax.robustness.breps.attack import EncodeBox, PredictLogits, breps_attack_batch
from dig_jax.robustness.breps.prepare import letterbox


def iter_instances(
    records: Iterable[Record], size: int, skipped: list[str]
) -> Iterator[tuple[str, Any]]:
    """(instance id, Letterboxed) for every non-empty instance; bad items go to `skipped`."""
    for rec in records:
        try:
            loaded = rec.load()
        except ValueError as err:
            skipped.append(f"{rec.source}:{rec.image_id}: {err}")
            continue
        for k, inst_id in enumerate(loaded.instance_ids):
            gt = loaded.instances[k].copy()
            gt[loaded.void > 0] = 255
            name = f"{loaded.image_id}#{inst_id}"
            if not (gt == 1).any():
                skipped.append(f"{rec.source}:{name}: empty mask")
                continue
            yield name, letterbox(loaded.image, gt, size)


def attack_dataset(
    predict_logits: PredictLogits,
    encode_box: EncodeBox,
    records: Iterable[Record],
    *,
    size: int = 320,
    batch: int = 4,
    steps: int = 50,
    lam: float = 0.1,
    lr_mult: float = 9.0,
    limit: int | None = None,
    desc: str = "BREPS",
    progress: bool = True,
) -> dict[str, Any]:
    """Min and max attacks on every instance, letterboxed to size x size, `batch` at a time.

    Returns dict(metrics=breps_metrics, instances=[{id, iou_tight, iou_min, iou_max, tight,
    box_min, box_max (boxes in original-image pixels)}], skipped=[reasons]).
    """
    if batch < 1 or size < 8:
        raise ValueError(f"batch must be >= 1 and size >= 8, got {batch}, {size}")
    skipped: list[str] = []
    rows: list[dict[str, Any]] = []
    pending: list[tuple[str, Any]] = []
    bar = tqdm(desc=desc, unit="inst", total=limit, disable=not progress)

    def flush() -> None:
        n = len(pending)
        items = pending + [pending[-1]] * (batch - n)  # fixed batch shape: pad by repetition
        images = np.stack([lb.image for _, lb in items])
        gts = np.stack([lb.gt for _, lb in items])
        bounds = np.stack([lb.bounds for _, lb in items])
        kw = dict(steps=steps, lam=lam, lr_mult=lr_mult, encode_box=encode_box, bounds=bounds)
        lo = breps_attack_batch(predict_logits, images, gts, mode="min", **kw)
        hi = breps_attack_batch(predict_logits, images, gts, mode="max", **kw)
        for i, (name, lb) in enumerate(pending):
            unscale = np.tile(lb.scale, 2)
            rows.append(
                {
                    "id": name,
                    "iou_tight": float(lo.iou_tight[i]),
                    "iou_min": float(lo.iou[i]),
                    "iou_max": float(hi.iou[i]),
                    "tight": (np.asarray(lo.tight[i], np.float64) / unscale).round(2).tolist(),
                    "box_min": (np.asarray(lo.box[i], np.float64) / unscale).round(2).tolist(),
                    "box_max": (np.asarray(hi.box[i], np.float64) / unscale).round(2).tolist(),
                }
            )
        bar.update(n)
        pending.clear()

    for count, item in enumerate(iter_instances(records, size, skipped)):
        if limit is not None and count >= limit:
            break
        pending.append(item)
        if len(pending) == batch:
            flush()
    if pending:
        flush()
    bar.close()
    metrics = breps_metrics(
        *(np.array([r[k] for r in rows]) for k in ("iou_tight", "iou_min", "iou_max"))
    )
    return {"metrics": metrics, "instances": rows, "skipped": skipped}
