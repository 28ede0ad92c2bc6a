"""Boundary levers of a segmenter, compared on held-out photos at equal cost: creation IoU per
gesture kind through the predict path, and the time per prediction as a ratio to the plain run.

    python benchmarks/boundary_levers.py --checkpoint A.digjax [--checkpoint B.digjax ...] \
        --datasets "coco_mval%val,clothing_co_parsing%val,camvid/val,feral_cats/valid" --limit 20
    python benchmarks/boundary_levers.py --quick        # a procedural scene (make bench)

Levers (each on every checkpoint given; all at each photo's own resolution):
- `plain`: one run on the zoom crop at the working size S, logits pasted back;
- `focus`: a creation prompt whose box was the whole photo (a click) runs again on the box of
  its first mask (`dig_jax.prompts.refocus_box`; what `config.predict.focus_pass` turns on);
- `guided`: the pasted probabilities filtered with the photo as guide (OpenCV's guided filter,
  radius one crop pixel in photo pixels), thresholded at 0.5;
- `grabcut`: the probabilities seed OpenCV GrabCut at the photo's resolution (sure fore- and
  background where p > 0.95 / p < 0.05, probable elsewhere; 3 iterations);
- `size N` (`--sizes`): the network run at working size N instead of S (no retraining; a
  checkpoint fine-tuned at N is the equal-training-time version of this lever).
The datasets must not be the benchmarks (GrabCut, Berkeley): levers are chosen on held-out
slices only. Times are medians per prediction in this process, the plain run of the first
checkpoint as 1.00.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import cv2
import jax.numpy as jnp
import numpy as np
from tqdm import tqdm

from dig_jax import prompts
from dig_jax.evaluation.protocol import evaluation_samples, load_dataset
from dig_jax.export import load_segmenter
from dig_jax.gestures.types import GestureKind
from dig_jax.metrics import iou
from dig_jax.paths import checkpoint_name

KINDS = [k.name.lower() for k in GestureKind]
BENCHMARKS = ("grabcut", "berkeley")


def _logits(seg, crop: dict) -> np.ndarray:
    return np.asarray(seg._logits(jnp.asarray(seg.crop_input(crop)[None])))[0]


def _probabilities(logits: np.ndarray) -> np.ndarray:
    return (1.0 / (1.0 + np.exp(-np.clip(logits, -30, 30)))).astype(np.float32)


def guided(image: np.ndarray, logits: np.ndarray, box: prompts.ZoomBox, size: int) -> np.ndarray:
    radius = max(1, round(box.side / size))  # one crop pixel, in photo pixels
    smooth = cv2.ximgproc.guidedFilter(image, _probabilities(logits), radius, (0.1 * 255) ** 2)
    return (smooth > 0.5).astype(np.uint8)


def grabcut(image: np.ndarray, logits: np.ndarray, iterations: int = 3) -> np.ndarray:
    p = _probabilities(logits)
    seeds = np.where(p > 0.5, cv2.GC_PR_FGD, cv2.GC_PR_BGD).astype(np.uint8)
    seeds[p > 0.95], seeds[p < 0.05] = cv2.GC_FGD, cv2.GC_BGD
    foreground = (seeds == cv2.GC_FGD) | (seeds == cv2.GC_PR_FGD)
    if foreground.all() or not foreground.any():
        return foreground.astype(np.uint8)
    bgd, fgd = np.zeros((1, 65)), np.zeros((1, 65))
    try:
        cv2.grabCut(image[..., ::-1].copy(), seeds, None, bgd, fgd, iterations,
                    cv2.GC_INIT_WITH_MASK)  # fmt: skip
    except cv2.error:
        return foreground.astype(np.uint8)
    return np.isin(seeds, (cv2.GC_FGD, cv2.GC_PR_FGD)).astype(np.uint8)


def levers(seg, sample: dict, sizes: tuple[int, ...]) -> dict[str, tuple[np.ndarray, float]]:
    """{lever: (mask, seconds)} for one creation sample."""
    image, gesture = sample["image"], sample["gesture"]
    shape, size = image.shape[:2], seg.size
    out = {}
    start = time.perf_counter()
    box = prompts.zoom_box(gesture, None, size)
    crop_logits = _logits(seg, prompts.crop_prompt(image, gesture, None, box, size))
    logits = prompts.paste_logits(crop_logits, box, shape)
    plain_s = time.perf_counter() - start
    out["plain"] = ((logits > 0).astype(np.uint8), plain_s)
    start = time.perf_counter()
    focus = prompts.refocus_box(gesture, None, box, crop_logits, shape)
    focused = logits
    if focus is not None:
        again = _logits(seg, prompts.crop_prompt(image, gesture, None, focus, size))
        focused = prompts.paste_logits(again, focus, shape)
    out["focus"] = ((focused > 0).astype(np.uint8), plain_s + time.perf_counter() - start)
    start = time.perf_counter()
    out["guided"] = (guided(image, logits, box, size), plain_s + time.perf_counter() - start)
    start = time.perf_counter()
    out["grabcut"] = (grabcut(image, logits), plain_s + time.perf_counter() - start)
    for other in sizes:
        start = time.perf_counter()
        big = prompts.zoom_box(gesture, None, other)
        other_logits = _logits(seg, prompts.crop_prompt(image, gesture, None, big, other))
        mask = (prompts.paste_logits(other_logits, big, shape) > 0).astype(np.uint8)
        out[f"size {other}"] = (mask, time.perf_counter() - start)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", action="append", default=[])
    parser.add_argument("--datasets", default="coco_mval%val")
    parser.add_argument("--limit", type=int, default=20, help="records per dataset")
    parser.add_argument("--sizes", default="320", help="other working sizes, comma-separated")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=None, help="also write the table here")
    args = parser.parse_args(argv)
    specs = ["procedural:2:5"] if args.quick else args.datasets.split(",")
    if any(spec.split("%")[0].split("[")[0] in BENCHMARKS for spec in specs):
        parser.error("--datasets: levers are chosen on held-out slices, not on GrabCut/Berkeley")
    if args.quick and not args.checkpoint:
        from dig_jax.paths import shipped_checkpoint

        shipped = shipped_checkpoint()
        if shipped is None:
            print("boundary_levers: no shipped checkpoint here, skipping")
            return 0
        args.checkpoint = [str(shipped)]
    sizes = tuple(int(s) for s in args.sizes.split(",") if s)
    samples = [
        s
        for spec in specs
        for s in evaluation_samples(load_dataset(spec)[: args.limit], modes=("creation",))
    ]
    rows, base_time = [], None
    for path in args.checkpoint:
        seg = load_segmenter(path)
        scores: dict[str, dict[int, list[float]]] = {}
        times: dict[str, list[float]] = {}
        for sample in tqdm(samples, desc=checkpoint_name(path), unit="sample"):
            target, kind = sample["target"], int(sample["gesture_kind"])
            for lever, (mask, seconds) in levers(seg, sample, sizes).items():
                scores.setdefault(lever, {}).setdefault(kind, []).append(iou(mask, target))
                times.setdefault(lever, []).append(seconds)
        for lever, per_kind in scores.items():
            means = [float(np.mean(per_kind.get(k, [np.nan]))) for k in range(len(KINDS))]
            seconds = float(np.median(times[lever]))
            base_time = base_time or seconds
            rows.append((checkpoint_name(path), lever, means, seconds / base_time))
    n = len(samples) // len(KINDS)
    lines = [
        f"Creation IoU on {', '.join(specs)} ({n} instances per kind), time per prediction "
        "relative to the first checkpoint's plain run",
        "",
        "| checkpoint | lever | " + " | ".join(KINDS) + " | mean | time |",
        "|---|---|" + "---:|" * (len(KINDS) + 2),
    ]
    for name, lever, means, ratio in rows:
        cells = " | ".join(f"{m:.3f}" for m in means)
        lines.append(f"| {name} | {lever} | {cells} | {np.nanmean(means):.3f} | {ratio:.2f}x |")
    table = "\n".join(lines)
    print(table)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(table + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
