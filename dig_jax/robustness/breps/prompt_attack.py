"""BREPS beyond boxes: the same white-box search for clicks, scribbles and lassos.

A gesture's points p_i (f32[N, 2], (x, y)) move by a smooth displacement field driven by K
control displacements D_k (K = min(controls, N), spread evenly along the polyline, linear
interpolation between them, periodic when closed): p_i' = clip(p_i + Σ_k w_ik D_k) inside the
image. The model sees soft_rasterize(p') and distance_map_jnp(p') (gesture model), or in its
positive channel the soft map (context baseline trained on gesture maps) or soft discs at up to
24 evenly spaced points (context baseline trained on skeleton clicks); see
`dig_jax.prompts.soft.points_encoder`.

Realism prior on the displacement (documented choice, no human data fitted yet): every control
displacement is an isotropic Gaussian D_k ~ N(0, σ² I), σ = sigma_frac · √(area of the GT's
tight box) px, so −log p(D) = Σ_k ‖D_k‖² / (2σ²) + const. A person redrawing the same gesture
moves it by a fraction of the object's size; sigma_frac = 0.1 by default.
Loss = ±Dice(sigmoid(logits), GT) − λ · log p(D); Adam with the BREPS step size; best step
(step 0 = the unperturbed gesture) kept. IoU-Min/Max/Δ per gesture kind via `prompt_robustness`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dig_jax.cpu import train_compiler_options
from dig_jax.gestures.types import Gesture, GestureKind
from dig_jax.metrics import tight_box
from dig_jax.metrics.breps import breps_metrics
from dig_jax.prompts.soft import EncodePoints, encode_points_gesture
from dig_jax.robustness.breps.attack import (
    BREPS_LAM,
    BREPS_LR_MULT,
    BREPS_STEPS,
    PredictLogits,
    attack_lr,
    check_attack_settings,
    soft_dice,
)
from dig_jax.robustness.breps.search import HostSearch, SearchSetup


class PromptAttackResult(NamedTuple):
    """points f32[N, 2] best gesture points (padded rows past `length` unchanged); iou; iou_start
    (unperturbed gesture); best_step; trajectory points f32[S+1, N, 2], ious, losses [S+1]."""

    points: jax.Array
    iou: jax.Array
    iou_start: jax.Array
    best_step: jax.Array
    trajectory: jax.Array
    ious: jax.Array
    losses: jax.Array


def control_weights(length: int, n_max: int, controls: int, closed: bool) -> np.ndarray:
    """f32[n_max, controls]: hat-function weights of the points on K evenly spaced controls
    (rows sum to 1 for the first `length` points, 0 for padding)."""
    if not 1 <= length <= n_max or controls < 1:
        raise ValueError(f"need 1 <= length <= n_max and controls >= 1, got {length}, {n_max}")
    w = np.zeros((n_max, controls), np.float32)
    if controls == 1 or length == 1:
        w[:length, 0] = 1.0
        return w
    span = length if closed else length - 1
    period = controls if closed else controls - 1
    pos = np.arange(length) * period / span  # position in control units
    lo = np.floor(pos).astype(int)
    frac = (pos - lo).astype(np.float32)
    hi = (lo + 1) % controls if closed else np.minimum(lo + 1, controls - 1)
    rows = np.arange(length)
    np.add.at(w, (rows, lo % controls), 1 - frac)
    np.add.at(w, (rows, hi), frac)
    return w


def _prompt_setup(
    image,
    gt,
    points,
    length,
    closed,
    weights,
    sigma,
    lr_mult,
    lam,
    sign,
    *,
    predict_logits,
    encode_points,
) -> SearchSetup:
    """One gesture's search: Adam on the control displacements from zero (see module doc)."""
    image = image.astype(jnp.float32)
    h, w = gt.shape
    hi = jnp.array([w - 1, h - 1], jnp.float32)

    def place(d: jax.Array) -> jax.Array:
        return jnp.clip(points + weights @ d, 0.0, hi)

    def objective(d: jax.Array) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
        moved = place(d)
        logits = predict_logits(encode_points(moved, length, closed, image)[None])[0]
        dice = soft_dice(jax.nn.sigmoid(logits), gt)
        logp = -jnp.sum(jnp.square(d)) / (2 * jnp.square(sigma))
        return sign * dice - lam * logp, (logits, moved)

    d0 = jnp.zeros((weights.shape[1], 2), jnp.float32)
    return SearchSetup(objective, d0, gt, attack_lr(h, w, lr_mult), sign > 0)


def _prompt_result(traj, ious, losses, best) -> PromptAttackResult:
    return PromptAttackResult(traj[best], ious[best], ious[0], best, traj, ious, losses)


@functools.lru_cache(maxsize=32)
def _compiled(predict_logits: PredictLogits, encode_points: EncodePoints, steps: int):
    setup = functools.partial(
        _prompt_setup, predict_logits=predict_logits, encode_points=encode_points
    )
    return HostSearch(setup, steps, batched=True, in_axes=(0, 0, 0, 0, 0, 0, 0, None, None, None),
                      step_options=train_compiler_options(), result=_prompt_result)  # fmt: skip


def prompt_attack_batch(
    predict_logits: PredictLogits,
    images: Any,
    gts: Any,
    gestures: Sequence[Gesture],
    *,
    mode: str = "min",
    steps: int = BREPS_STEPS,
    lr_mult: float = BREPS_LR_MULT,
    lam: float = BREPS_LAM,
    sigma_frac: float = 0.1,
    controls: int = 8,
    n_max: int | None = None,
    encode_points: EncodePoints | None = None,
) -> PromptAttackResult:
    """Attack B gestures: images [B, H, W, 3], gts [B, H, W] {0, 1, 255}, one Gesture each.

    Points are padded to `n_max` (default: the longest gesture) so one compile serves the batch.
    """
    images, gts = np.asarray(images), np.asarray(gts)
    check_attack_settings(mode, steps, lr_mult, lam)
    if images.ndim != 4 or gts.shape != images.shape[:3] or len(gestures) != len(images):
        raise ValueError(
            f"need images [B,H,W,3], gts [B,H,W], B gestures; got {images.shape}, "
            f"{gts.shape}, {len(gestures)}"
        )
    if not gestures:
        raise ValueError("gestures must hold at least one gesture, got none")
    if not sigma_frac > 0:
        raise ValueError(f"sigma_frac must be > 0, got {sigma_frac}")
    if controls < 1:
        raise ValueError(f"controls must be >= 1, got {controls}")
    for i, g in enumerate(gestures):
        shape = np.shape(g.points)
        if len(shape) != 2 or shape[1] != 2 or shape[0] == 0:
            raise ValueError(f"gestures[{i}] must have points f32[N >= 1, 2], got shape {shape}")
    n_max = n_max or max(len(g.points) for g in gestures)
    points = np.zeros((len(gestures), n_max, 2), np.float32)
    weights = np.zeros((len(gestures), n_max, controls), np.float32)
    sigma = np.zeros(len(gestures), np.float32)
    for i, g in enumerate(gestures):
        n = len(g.points)
        if n > n_max:
            raise ValueError(f"gestures[{i}] has {n} points > n_max={n_max}")
        points[i, :n], points[i, n:] = g.points, g.points[-1]
        weights[i] = np.pad(
            control_weights(n, n_max, min(controls, n), g.closed),
            ((0, 0), (0, controls - min(controls, n))),
        )
        fg = (gts[i] == 1).astype(np.uint8)
        area = np.prod(np.diff(tight_box(fg).reshape(2, 2), axis=0)) if fg.any() else gts[i].size
        sigma[i] = sigma_frac * np.sqrt(max(float(area), 1.0))
    lengths = np.array([len(g.points) for g in gestures], np.int32)
    closed = np.array([g.closed for g in gestures], bool)
    fn = _compiled(predict_logits, encode_points or encode_points_gesture, int(steps))
    sign = jnp.float32(1.0 if mode == "min" else -1.0)
    return fn(
        jnp.asarray(images),
        jnp.asarray(gts),
        points,
        lengths,
        closed,
        weights,
        sigma,
        jnp.float32(lr_mult),
        jnp.float32(lam),
        sign,
    )


def prompt_robustness(
    predict_logits: PredictLogits,
    images: Any,
    gts: Any,
    rng: np.random.Generator,
    *,
    kinds: Sequence[GestureKind] = (
        GestureKind.CLICK,
        GestureKind.SCRIBBLE,
        GestureKind.LOOSE_LASSO,
        GestureKind.TIGHT_LASSO,
    ),
    **attack_kwargs: Any,
) -> dict[str, dict[str, float]]:
    """Simulate one creation gesture per instance and kind (`simulate_creation`, `rng`), attack
    it both ways, and return {kind name: breps_metrics} with iou_tight = the unperturbed IoU."""
    from dig_jax.gestures import simulate_creation

    images, gts = np.asarray(images), np.asarray(gts)
    out = {}
    for kind in kinds:
        gestures = [simulate_creation(kind, (gt == 1).astype(np.uint8), rng) for gt in gts]
        lo = prompt_attack_batch(predict_logits, images, gts, gestures, mode="min", **attack_kwargs)
        hi = prompt_attack_batch(predict_logits, images, gts, gestures, mode="max", **attack_kwargs)
        out[GestureKind(kind).name.lower()] = breps_metrics(lo.iou_start, lo.iou, hi.iou)
    return out
