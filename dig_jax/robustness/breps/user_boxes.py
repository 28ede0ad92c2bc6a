"""Real-user boxes in the public BREPS layout: `images/<stem>.*`, `masks/<stem>.png` (GT; > 128
object, 128 void as in GrabCut), `user_masks/<stem>_1_*.png` (one binary mask per user whose
extent is that user's box; `<user>` identifies the user across images). Evaluates a model on
every user box: mean IoU ± std over users (each user's mean IoU over the objects they boxed)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from dig_jax.data.sources.benchmark_folder import object_pixels
from dig_jax.data.sources.record import read_gray, read_image
from dig_jax.metrics import tight_box
from dig_jax.robustness.breps.attack import EncodeBox, PredictLogits
from dig_jax.robustness.breps.heatmap import boxes_iou
from dig_jax.robustness.breps.prepare import letterbox

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp")
GT_VOID = 128


@dataclasses.dataclass(frozen=True)
class UserBoxInstance:
    """One object: paths, user boxes f32[U, 4] (pixel edges, one row per readable user mask)
    and the users' ids (the `<user>` of `<stem>_1_<user>.png`), one per row of `boxes`."""

    stem: str
    image: Path
    mask: Path
    user_masks: tuple[Path, ...]
    boxes: np.ndarray
    user_ids: tuple[str, ...] = ()


def read_gt(path: Path) -> np.ndarray:
    """GT mask uint8[H, W] {0, 1, 255}: > 128 object, exactly 128 void, else background (a
    mask saved as {0, 1}: 1 object)."""
    raw = read_gray(path)
    gt = object_pixels(raw)
    gt[raw == GT_VOID] = 255
    return gt


def user_box(path: Path) -> np.ndarray:
    """Box f32[4] = extent of the non-zero pixels of a user mask; ValueError if it is empty."""
    mask = (read_gray(path) > 0).astype(np.uint8)
    if not mask.any():
        raise ValueError(f"user mask {path} is empty")
    return tight_box(mask)


def scan_user_boxes(root: str | Path) -> tuple[list[UserBoxInstance], list[str]]:
    """Instances of a BREPS-layout folder and a list of problems (skipped items, with reasons)."""
    root = Path(root)
    dirs = {d: root / d for d in ("images", "masks", "user_masks")}
    missing = [d for d, p in dirs.items() if not p.is_dir()]
    if missing:
        raise ValueError(f"root: {root} lacks folder(s) {', '.join(missing)}")
    images = {p.stem: p for p in dirs["images"].iterdir() if p.suffix.lower() in IMAGE_SUFFIXES}
    instances, problems = [], []
    for mask in sorted(dirs["masks"].glob("*.png")):
        stem = mask.stem
        image = images.get(stem) or images.get(re.sub(r"[a-z]$", "", stem))
        users = tuple(sorted(dirs["user_masks"].glob(f"{glob_escape(stem)}_1_*.png")))
        if image is None:
            problems.append(f"{stem}: no image in {dirs['images']}")
            continue
        if not users:
            problems.append(f"{stem}: no user masks {stem}_1_*.png")
            continue
        boxes, ids = [], []
        for u in users:
            try:
                boxes.append(user_box(u))
            except ValueError as err:
                problems.append(f"{stem}: {err}")
                continue
            ids.append(u.stem[len(stem) + len("_1_") :])
        if boxes:
            instances.append(UserBoxInstance(stem, image, mask, users, np.stack(boxes), tuple(ids)))
    return instances, problems


def glob_escape(text: str) -> str:
    """Escape glob metacharacters in a file stem."""
    return re.sub(r"([*?\[])", r"[\1]", text)


def evaluate_user_boxes(
    predict_logits: PredictLogits,
    encode_box: EncodeBox,
    root: str | Path,
    *,
    size: int | None = None,
    chunk: int = 8,
    progress: bool = True,
) -> dict[str, Any]:
    """IoU of the model's mask from every user box of a BREPS-layout folder.

    `size`: letterbox every image to size x size (one compile); None = native resolution.
    Returns dict(mean_iou, std_iou: mean and std (ddof 0) over users of each user's mean IoU;
    n_users; per_user {user id: mean IoU}; pooled_mean_iou, pooled_std_iou over all user boxes;
    n_boxes, n_instances, per_instance {stem: [IoU per user, in user_ids order]}, skipped
    [reasons]). Bad items are skipped and listed, not fatal.
    """
    instances, skipped = scan_user_boxes(root)
    per_instance: dict[str, list[float]] = {}
    by_user: dict[str, list[float]] = {}
    for inst in tqdm(instances, desc=f"user boxes {Path(root).name}", disable=not progress):
        try:
            image, gt = read_image(inst.image), read_gt(inst.mask)
            if image.shape[:2] != gt.shape:
                raise ValueError(f"image {image.shape[:2]} and mask {gt.shape} sizes differ")
        except ValueError as err:
            skipped.append(f"{inst.stem}: {err}")
            continue
        boxes, bounds = inst.boxes, None
        if size is not None:
            lb = letterbox(image, gt, size)
            image, gt, bounds = lb.image, lb.gt, lb.bounds
            boxes = boxes * np.tile(lb.scale, 2)
        ious = boxes_iou(predict_logits, encode_box, image, gt, boxes, chunk=chunk, bounds=bounds)
        per_instance[inst.stem] = [float(v) for v in ious]
        user_ids = inst.user_ids or tuple(str(k) for k in range(len(ious)))
        for user, value in zip(user_ids, per_instance[inst.stem], strict=True):
            by_user.setdefault(user, []).append(value)
    per_user = {user: float(np.mean(values)) for user, values in sorted(by_user.items())}
    user_means = np.array(list(per_user.values()), np.float64)
    pooled = np.array([v for vs in per_instance.values() for v in vs], np.float64)
    nan = float("nan")
    return {
        "mean_iou": float(user_means.mean()) if user_means.size else nan,
        "std_iou": float(user_means.std()) if user_means.size else nan,
        "n_users": len(per_user),
        "per_user": per_user,
        "pooled_mean_iou": float(pooled.mean()) if pooled.size else nan,
        "pooled_std_iou": float(pooled.std()) if pooled.size else nan,
        "n_boxes": int(pooled.size),
        "n_instances": len(per_instance),
        "per_instance": per_instance,
        "skipped": skipped,
    }
