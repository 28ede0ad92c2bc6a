"""The BREPS white-box box attack: Adam on the box coordinates through the model (jax.grad).

For one instance (image, GT) the box starts at the tight box of the GT and takes `steps` Adam
steps on  loss(box) = s · Dice(sigmoid(logits(box)), GT) − λ · log p(CIoU(box, tight)),
s = +1 to find the worst plausible box (mode "min") and −1 for the best (mode "max"); the prior
term is skipped where CIoU = 0. The learning rate is lr_mult · √(H² + W²) / (1024 · √2) px of
the original photo (`attack_lr`; pass `lr_px` per instance when the attack runs in a zoom crop,
as `dig_jax.robustness.breps.evaluate` does), the box is projected back to a valid box
(x1 + min_size <= x2 inside the photo's `bounds`, same for y) after every step so the model
never sees an invalid box, and the best step (step 0 included, judged by the hard IoU of
logits > 0) is kept. `HostSearch` runs the steps (one compiled step per call from the host:
faster on CPU than `lax.scan`, see `search.py`), `vmap` the instances.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dig_jax.cpu import train_compiler_options
from dig_jax.metrics import VOID, tight_box
from dig_jax.robustness.breps.prior import BREPS_GAMMA, GammaParams, realism_logpdf
from dig_jax.robustness.breps.search import HostSearch, SearchSetup, adam_search

PredictLogits = Callable[[jax.Array], jax.Array]  # x f32[B, H, W, C] -> logits f32[B, H, W]
EncodeBox = Callable[..., jax.Array]  # (box f32[4], image f32[H,W,3][, radius]) -> x f32[H,W,C]
DICE_SMOOTH = 1.0
# BREPS's attack settings: Adam steps, step-size multiplier (`attack_lr`), prior weight λ.
BREPS_STEPS, BREPS_LR_MULT, BREPS_LAM = 50, 9.0, 0.1


class AttackResult(NamedTuple):
    """Outcome of one attack (batched versions add a leading instance axis to every field).

    box f32[4]: the best box found; iou: its mask IoU; iou_tight: IoU at step 0 (tight box);
    best_step i32 (0 = the tight box); boxes f32[S+1, 4], ious f32[S+1], losses f32[S+1]: the
    whole trajectory, step 0 first; tight f32[4]: the starting (tight) box.
    """

    box: jax.Array
    iou: jax.Array
    iou_tight: jax.Array
    best_step: jax.Array
    boxes: jax.Array
    ious: jax.Array
    losses: jax.Array
    tight: jax.Array


def attack_lr(height: Any, width: Any, lr_mult: float = BREPS_LR_MULT) -> Any:
    """BREPS step size in px: lr_mult · √(H² + W²) / (1024 · √2)."""
    return lr_mult * jnp.sqrt(jnp.square(height) + jnp.square(width)) / (1024.0 * math.sqrt(2.0))


def full_bounds(bounds: jax.Array) -> jax.Array:
    """Bounds as (x_lo, y_lo, x_hi, y_hi): (W, H) means (0, 0, W, H)."""
    if bounds.shape[-1] == 4:
        return bounds
    zeros = jnp.zeros_like(bounds[..., :1])
    return jnp.concatenate([zeros, zeros, bounds], axis=-1)


def project_box(box: jax.Array, bounds: jax.Array, min_size: float = 1.0) -> jax.Array:
    """Nearest valid box: x1 + min_size <= x2 within the bounds, y likewise; `bounds` = (W, H)
    (the image [0, W] × [0, H]) or (x_lo, y_lo, x_hi, y_hi) (the photo inside a zoom crop).

    Too small (or inverted) boxes grow symmetrically about their centre; boxes sticking out of
    the bounds are cropped. Requires the bounds to be at least min_size wide and high.
    """
    b = full_bounds(bounds)

    def axis(lo, hi, n_lo, n_hi) -> tuple[jax.Array, jax.Array]:
        half = jnp.maximum((hi - lo) / 2, min_size / 2)
        centre = jnp.clip((lo + hi) / 2, n_lo + min_size / 2, n_hi - min_size / 2)
        return jnp.maximum(centre - half, n_lo), jnp.minimum(centre + half, n_hi)

    x1, x2 = axis(box[..., 0], box[..., 2], b[..., 0], b[..., 2])
    y1, y2 = axis(box[..., 1], box[..., 3], b[..., 1], b[..., 3])
    return jnp.stack([x1, y1, x2, y2], axis=-1)


def soft_dice(prob: jax.Array, gt: jax.Array, void: int = VOID) -> jax.Array:
    """Smoothed Dice (2Σpg + 1) / (Σp + Σg + 1) over `[..., H, W]`, ignoring void GT pixels."""
    valid = (gt != void).astype(prob.dtype)
    g = (gt == 1).astype(prob.dtype)
    p = prob * valid
    inter = jnp.sum(p * g, axis=(-2, -1))
    return (2 * inter + DICE_SMOOTH) / (jnp.sum(p, (-2, -1)) + jnp.sum(g, (-2, -1)) + DICE_SMOOTH)


def start_box(gt: jax.Array, bounds: jax.Array, min_size: float = 1.0) -> jax.Array:
    """Tight box of the GT pixels equal to 1 (whole valid image if there are none), made valid."""
    tight = tight_box(gt)
    full = full_bounds(bounds).astype(jnp.float32)
    empty = jnp.all(tight == 0)
    return project_box(jnp.where(empty, full, tight), bounds, min_size)


def _attack_setup(
    image: jax.Array,
    gt: jax.Array,
    bounds: jax.Array,
    lr_px: jax.Array,
    radius: jax.Array,
    lam: jax.Array,
    sign: jax.Array,
    *,
    predict_logits: PredictLogits,
    encode_box: EncodeBox,
    min_size: float,
    prior: GammaParams,
) -> SearchSetup:
    """One instance's search: Adam on the box from the GT's tight box (see module doc)."""
    image = image.astype(jnp.float32)
    tight = start_box(gt, bounds, min_size)
    takes_radius = "radius" in inspect.signature(encode_box).parameters

    def objective(box: jax.Array) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
        x = encode_box(box, image, radius=radius) if takes_radius else encode_box(box, image)
        logits = predict_logits(x[None])[0]
        dice = soft_dice(jax.nn.sigmoid(logits), gt)
        logp = realism_logpdf(box, tight, prior, skip_exact=True)
        return sign * dice - lam * logp, (logits, box)

    project = functools.partial(project_box, bounds=bounds, min_size=min_size)
    return SearchSetup(objective, tight, gt, lr_px, sign > 0, project)


def _attack_result(boxes, ious, losses, best) -> AttackResult:
    # Step 0 shows the starting params: boxes[0] is the tight box.
    return AttackResult(boxes[best], ious[best], ious[0], best, boxes, ious, losses, boxes[0])


def _attack_one(*args: jax.Array, steps: int, **settings: Any) -> AttackResult:
    """The attack of one instance with `lax.scan` (for use inside a caller's jit)."""
    setup = _attack_setup(*args, **settings)
    return _attack_result(*adam_search(*setup[:2], setup.gt, lr=setup.lr, steps=steps,
                                       find_min=setup.find_min, project=setup.project))  # fmt: skip


@functools.lru_cache(maxsize=64)
def _compiled(
    predict_logits: PredictLogits,
    encode_box: EncodeBox,
    steps: int,
    min_size: float,
    prior: GammaParams,
    batched: bool,
) -> HostSearch:
    setup = functools.partial(
        _attack_setup,
        predict_logits=predict_logits,
        encode_box=encode_box,
        min_size=min_size,
        prior=prior,
    )
    return HostSearch(setup, steps, batched, in_axes=(0, 0, 0, 0, 0, None, None),
                      step_options=train_compiler_options(), result=_attack_result)  # fmt: skip


def check_attack_settings(
    mode: str, steps: int, lr_mult: float, lam: float, min_size: float = 1.0
) -> None:
    """ValueError naming the first bad attack setting (mode, steps, lr_mult, lam, min_size)."""
    if mode not in ("min", "max"):
        raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
    if int(steps) < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    if not float(lr_mult) > 0:
        raise ValueError(f"lr_mult must be > 0, got {lr_mult}")
    if not float(lam) >= 0:
        raise ValueError(f"lam must be >= 0, got {lam}")
    if not float(min_size) > 0:
        raise ValueError(f"min_size must be > 0, got {min_size}")


def _check(image: Any, gt: Any, lead: int, min_size: float) -> None:
    if image.ndim != lead + 3 or image.shape[-1] != 3:
        raise ValueError(
            f"image must have shape {'[B, ' if lead else '['}H, W, 3], got {image.shape}"
        )
    if gt.shape != image.shape[:-1]:
        raise ValueError(f"gt must have shape {image.shape[:-1]} (image's), got {gt.shape}")
    if min(image.shape[-3:-1]) < min_size:
        raise ValueError(f"image is smaller than min_size={min_size} px: {image.shape}")


def _check_bounds(bounds: Any, image: jax.Array, lead: int, min_size: float) -> np.ndarray:
    """Bounds as f32[..., 4] (x_lo, y_lo, x_hi, y_hi); (W, H) is accepted for (0, 0, W, H)."""
    h, w = image.shape[-3], image.shape[-2]
    if bounds is None:
        return np.tile(np.array([0, 0, w, h], np.float32), (*image.shape[:lead], 1))
    arr = np.asarray(bounds, np.float32)
    if arr.shape == (*image.shape[:lead], 2):
        arr = np.concatenate([np.zeros_like(arr), arr], axis=-1)
    if arr.shape != (*image.shape[:lead], 4):
        raise ValueError(
            f"bounds must have shape {(*image.shape[:lead], 2)} (W, H) or "
            f"{(*image.shape[:lead], 4)} (x_lo, y_lo, x_hi, y_hi), got {arr.shape}"
        )
    if (
        not np.isfinite(arr).all()
        or (arr[..., :2] < 0).any()
        or (arr[..., 2] > w).any()
        or (arr[..., 3] > h).any()
        or (arr[..., 2:] - arr[..., :2] < min_size).any()
    ):
        raise ValueError(
            f"bounds must lie inside the image ({w}, {h}) and be >= min_size={min_size} wide"
        )
    return arr


def _sign(mode: str) -> jax.Array:
    return jnp.float32(1.0 if mode == "min" else -1.0)


def _default_encoder() -> EncodeBox:
    from dig_jax.prompts.soft import encode_box_gesture

    return encode_box_gesture


def breps_attack(
    predict_logits: PredictLogits,
    image: Any,
    gt: Any,
    *,
    mode: str = "min",
    steps: int = BREPS_STEPS,
    lr_mult: float = BREPS_LR_MULT,
    lam: float = BREPS_LAM,
    encode_box: EncodeBox | None = None,
    bounds: Any = None,
    min_size: float = 1.0,
    prior: GammaParams = BREPS_GAMMA,
    lr_px: Any = None,
    radius: Any = None,
) -> AttackResult:
    """Attack one instance: image uint8/float [H, W, 3] (0..255), gt uint8 [H, W] {0, 1, 255}.

    `predict_logits`: x f32[B, H, W, C] -> logits f32[B, H, W]; `encode_box(box, image[,
    radius])` builds the model input f32[H, W, C] from a box (default: the gesture-agnostic
    encoding). `bounds` (W, H) or (x_lo, y_lo, x_hi, y_hi) limits boxes to the photo (e.g. its
    unpadded part); default the image. `lr_px`: the step size in this image's pixels (default
    `attack_lr` of the bounds' size); `radius`: the brush in this image's pixels (default 5).
    Compiled once per (callables, steps, min_size, prior) and input shape; both modes share it.
    """
    return _run(
        False, predict_logits, image, gt, mode, steps, lr_mult, lam, encode_box, bounds,
        min_size, prior, lr_px, radius,
    )  # fmt: skip


def breps_attack_batch(
    predict_logits: PredictLogits, images: Any, gts: Any, **settings: Any
) -> AttackResult:
    """`breps_attack` vmapped over instances, with its keywords and defaults: images
    [B, H, W, 3], gts [B, H, W], bounds [B, 2] or [B, 4], lr_px and radius [B] (or None)."""
    call = inspect.signature(breps_attack).bind(predict_logits, images, gts, **settings)
    call.apply_defaults()
    return _run(True, *call.arguments.values())


def _per_instance(value: Any, default: np.ndarray, name: str) -> jax.Array:
    if value is None:
        return jnp.asarray(default, jnp.float32)
    arr = np.broadcast_to(np.asarray(value, np.float32), default.shape)
    if not (np.isfinite(arr).all() and (arr > 0).all()):
        raise ValueError(f"{name} must be finite and > 0, got {value!r}")
    return jnp.asarray(arr)


def _run(batched, predict_logits, image, gt, mode, steps, lr_mult, lam, encode_box, bounds,
         min_size, prior, lr_px, radius) -> AttackResult:  # fmt: skip
    """Shared checks and the compiled attack for one instance or a vmapped batch."""
    from dig_jax.gestures.types import BRUSH_RADIUS

    image, gt = jnp.asarray(image), jnp.asarray(gt)
    check_attack_settings(mode, steps, lr_mult, lam, min_size)
    _check(image, gt, int(batched), min_size)
    bounds = _check_bounds(bounds, image, int(batched), min_size)
    size = bounds[..., 2:] - bounds[..., :2]
    default_lr = np.asarray(attack_lr(size[..., 1], size[..., 0], lr_mult), np.float32)
    lr_px = _per_instance(lr_px, default_lr, "lr_px")
    radius = _per_instance(radius, np.full(default_lr.shape, BRUSH_RADIUS, np.float32), "radius")
    fn = _compiled(
        predict_logits,
        encode_box or _default_encoder(),
        int(steps),
        float(min_size),
        GammaParams(*prior),
        batched,
    )
    return fn(
        image,
        gt,
        jnp.asarray(bounds, jnp.float32),
        lr_px,
        radius,
        jnp.float32(lam),
        _sign(mode),
    )
