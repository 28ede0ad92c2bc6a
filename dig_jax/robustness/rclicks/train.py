"""Train the clickability model on recorded clicks (RClicks `scripts/train_click_model.py`).

Recorded clicks come in the public RClicks CSV layout, one row per click:
`dataset, full_stem, image_stem, object_stem, click_type, x, y, w, h, device` (more columns,
e.g. `model_type`, are ignored); `click_type` ∈ {first, fn, fp}; (x, y) in pixels of an image
of size w × h; rows sharing `full_stem` are the clicks of many people on one (image, object,
previous mask). The target map of one `full_stem` (RClicks `ClickMaps`): a Gaussian per click
with σ = `sigma` · diag(image) / diag(1920×1080) (`sigma` = 5, the paper's CM₅), times the error
mask blurred with σ_e = int(5 · diag / (500 √2)) px, normalised. Loss: KL(target ‖ softmax(logits))
per map, averaged over the batch. Adam with warm-up and cosine decay; horizontal flips as the
only augmentation (as the reference).
"""

from __future__ import annotations

import csv
import dataclasses
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import cv2
import jax
import jax.numpy as jnp
import numpy as np
import optax
from scipy import ndimage
from tqdm.auto import tqdm

from dig_jax import cpu
from dig_jax.robustness.rclicks.maps import as_mask, normalize
from dig_jax.robustness.rclicks.model import (
    DEFAULT_FEATURES,
    ClickabilityModel,
    ClickabilityNet,
    init_clickability,
    model_input,
)

CSV_COLUMNS = ("dataset", "full_stem", "image_stem", "object_stem", "click_type",
               "x", "y", "w", "h", "device")  # fmt: skip
CLICK_TYPES = ("first", "fn", "fp")
CM_SIGMA = 5.0  # px at 1920×1080: the paper's best clickability model (CM₅)


@dataclasses.dataclass(frozen=True, eq=False)
class RecordedClicks:
    """All recorded clicks of one `full_stem`: xs, ys float32[n] in an image of `width` ×
    `height` px, and the device of each click."""

    dataset: str
    full_stem: str
    image_stem: str
    object_stem: str
    click_type: str
    xs: np.ndarray
    ys: np.ndarray
    width: int
    height: int
    devices: tuple[str, ...]

    def scaled(self, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
        """Click coordinates in an image of `shape` (H, W), clipped into it."""
        h, w = shape
        xs = np.clip(self.xs * (w / self.width), 0, w - 1)
        ys = np.clip(self.ys * (h / self.height), 0, h - 1)
        return xs, ys


def read_clicks_csv(path: str | Path) -> list[RecordedClicks]:
    """Recorded clicks grouped by `full_stem` (in order of first appearance).

    ValueError (naming the file, line and column) on a missing column, an unknown click type,
    a non-numeric coordinate or size, or rows of one full_stem that disagree on the image size.
    """
    path = Path(path)
    groups: dict[str, dict[str, Any]] = {}
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in CSV_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"path {path}: missing column(s) {missing}")
        for line, row in enumerate(reader, start=2):
            where = f"path {path} line {line}"
            if row["click_type"] not in CLICK_TYPES:
                raise ValueError(f"{where}: click_type must be one of {CLICK_TYPES}")
            try:
                x, y = float(row["x"]), float(row["y"])
                w, h = int(float(row["w"])), int(float(row["h"]))
            except ValueError as err:
                raise ValueError(f"{where}: x, y, w, h must be numbers ({err})") from None
            if w < 1 or h < 1 or not (math.isfinite(x) and math.isfinite(y)):
                raise ValueError(f"{where}: w, h must be >= 1 and x, y finite")
            g = groups.setdefault(row["full_stem"], {"row": row, "xs": [], "ys": [], "dev": []})
            if (int(float(g["row"]["w"])), int(float(g["row"]["h"]))) != (w, h):
                raise ValueError(f"{where}: w, h differ from earlier rows of {row['full_stem']}")
            g["xs"].append(x)
            g["ys"].append(y)
            g["dev"].append(row["device"])
    out = []
    for stem, g in groups.items():
        row = g["row"]
        out.append(RecordedClicks(
            row["dataset"], stem, row["image_stem"], row["object_stem"], row["click_type"],
            np.asarray(g["xs"], np.float32), np.asarray(g["ys"], np.float32),
            int(float(row["w"])), int(float(row["h"])), tuple(g["dev"]),
        ))  # fmt: skip
    return out


def click_sigma(shape: tuple[int, int], sigma: float = CM_SIGMA) -> float:
    """σ in px of the per-click Gaussian on an image of `shape`: `sigma` at 1920×1080."""
    return float(sigma) * math.hypot(*shape) / math.hypot(1920, 1080)


def error_sigma(shape: tuple[int, int]) -> int:
    """σ_e in px of the error-mask blur (RClicks: int(5 · diag / (500 √2)))."""
    return int(5 * math.hypot(*shape) / (500 * math.sqrt(2)))


def target_map(xs: Any, ys: Any, error: Any, sigma: float = CM_SIGMA) -> np.ndarray:
    """float32[H, W] target of a KL loss: Gaussians at the clicks (σ = `click_sigma`) times the
    blurred `error` bool[H, W], normalised to sum 1 (all zeros if that leaves no mass)."""
    error = as_mask(error, "error")
    xs, ys = np.asarray(xs, np.float64), np.asarray(ys, np.float64)
    if xs.shape != ys.shape or xs.ndim != 1:
        raise ValueError(f"xs and ys must be 1-D of one length, got {xs.shape}, {ys.shape}")
    if not (np.isfinite(xs).all() and np.isfinite(ys).all()):
        raise ValueError("xs, ys contain NaN or inf")
    h, w = error.shape
    counts = np.zeros((h, w), np.float64)
    rows = np.clip(np.rint(ys), 0, h - 1).astype(int)
    cols = np.clip(np.rint(xs), 0, w - 1).astype(int)
    np.add.at(counts, (rows, cols), 1.0)
    gauss = ndimage.gaussian_filter(counts, click_sigma((h, w), sigma), mode="constant")
    s_e = error_sigma((h, w))
    err = error.astype(np.float64)
    blurred = ndimage.gaussian_filter(err, s_e, mode="constant") if s_e > 0 else err
    return normalize(gauss * blurred)


def kl_divergence(logits: jax.Array, target: jax.Array) -> jax.Array:
    """Mean over the batch of KL(target ‖ softmax(logits)) over pixels; logits, target
    f32[B, S, S], target rows renormalised (an all-zero target contributes 0)."""
    b = logits.shape[0]
    logp = jax.nn.log_softmax(logits.reshape(b, -1), axis=-1)
    t = target.reshape(b, -1)
    t = t / jnp.maximum(t.sum(-1, keepdims=True), 1e-12)
    kl = jnp.sum(jnp.where(t > 0, t * (jnp.log(jnp.maximum(t, 1e-30)) - logp), 0.0), axis=-1)
    return kl.mean()


@dataclasses.dataclass(frozen=True, eq=False)
class TrainingExample:
    """One map to learn: photo uint8[H, W, 3], target mask and error bool[H, W], and the
    target map float32[H, W] (e.g. `target_map` of recorded clicks)."""

    image: np.ndarray
    gt: np.ndarray
    error: np.ndarray
    target: np.ndarray


def examples_from_clicks(
    recorded: Sequence[RecordedClicks],
    lookup: Callable[[RecordedClicks], tuple[np.ndarray, np.ndarray] | None],
    prev_mask_dir: str | Path | None = None,
    sigma: float = CM_SIGMA,
) -> tuple[list[TrainingExample], list[tuple[str, str]]]:
    """Training examples of recorded clicks and the (full_stem, reason) of those skipped.

    `lookup(rec)` returns (image uint8[H,W,3], object mask [H,W]) of the photo and object the
    clicks were recorded on, or None. `first` clicks target the whole object; `fn` / `fp` need
    the previous mask `prev_mask_dir/<full_stem>.png` (the RClicks SUBSEC_MASKS layout) and
    target its missing / extra pixels.
    """
    examples, skipped = [], []
    for rec in recorded:
        found = lookup(rec)
        if found is None:
            skipped.append((rec.full_stem, "image or object not found"))
            continue
        image, gt = found
        gt = np.asarray(gt) == 1
        if rec.click_type == "first":
            error = gt
        else:
            path = None if prev_mask_dir is None else Path(prev_mask_dir) / f"{rec.full_stem}.png"
            prev = None if path is None or not path.is_file() else cv2.imread(str(path), 0)
            if prev is None or prev.shape != gt.shape:
                skipped.append((rec.full_stem, "previous mask missing or of another size"))
                continue
            prev = prev > 127
            error = gt & ~prev if rec.click_type == "fn" else prev & ~gt
        if not error.any():
            skipped.append((rec.full_stem, "empty error mask"))
            continue
        xs, ys = rec.scaled(gt.shape)
        examples.append(TrainingExample(image, gt, error, target_map(xs, ys, error, sigma)))
    return examples, skipped


def _resized_target(target: np.ndarray, size: int) -> np.ndarray:
    t = cv2.resize(np.asarray(target, np.float32), (size, size), interpolation=cv2.INTER_AREA)
    return normalize(np.clip(t, 0, None))


def clickability_step(
    features: tuple[int, ...], steps: int, batch_size: int, lr: float, flip: bool
) -> tuple[Callable[..., Any], optax.GradientTransformation]:
    """(step(xs, ts, (params, opt_state), key) -> (new carry, KL loss), the optimizer) of
    `train_clickability`: a batch drawn with replacement from xs f32[N, S, S, 5] and targets
    ts f32[N, S, S], flipped left-right at random when `flip`, one Adam step (warm-up cosine)."""
    warmup = max(1, steps // 10)
    schedule = optax.warmup_cosine_decay_schedule(0.0, lr, warmup, max(steps, warmup + 1))
    tx = optax.adam(schedule)
    net = ClickabilityNet(features)

    def loss_fn(params, x, t):
        return kl_divergence(net.apply(params, x), t)

    def step_fn(xs, ts, carry, k):
        params, opt_state = carry
        k_idx, k_flip = jax.random.split(k)
        idx = jax.random.randint(k_idx, (batch_size,), 0, xs.shape[0])
        x, t = xs[idx], ts[idx]
        if flip:
            f = jax.random.bernoulli(k_flip, 0.5, (batch_size,))
            x = jnp.where(f[:, None, None, None], x[:, :, ::-1], x)
            t = jnp.where(f[:, None, None], t[:, :, ::-1], t)
        with cpu.reverse_mode_only():
            loss, grads = jax.value_and_grad(loss_fn)(params, x, t)
        updates, opt_state = tx.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), loss

    return step_fn, tx


def train_clickability(
    examples: Sequence[TrainingExample],
    key: jax.Array,
    *,
    steps: int = 2000,
    batch_size: int = 16,
    lr: float = 3e-3,
    size: int = 64,
    features: tuple[int, ...] = DEFAULT_FEATURES,
    flip: bool = True,
) -> tuple[ClickabilityModel, np.ndarray]:
    """Fit a `ClickabilityModel` to `examples` with the KL loss; returns (model, loss per
    step float32[steps]). Batches are drawn with replacement from `key` (same key, same
    model)."""
    if not examples:
        raise ValueError("examples is empty")
    if steps < 1 or batch_size < 1 or not lr > 0:
        raise ValueError(
            f"steps, batch_size must be >= 1 and lr > 0, got {steps}, {batch_size}, {lr}"
        )
    init_key, data_key = jax.random.split(key)
    model = init_clickability(init_key, size, features)
    x_all = jnp.asarray(np.stack([model_input(e.image, e.gt, e.error, size) for e in examples]))
    t_all = jnp.asarray(np.stack([_resized_target(e.target, size) for e in examples]))
    step_fn, tx = clickability_step(model.features, steps, batch_size, lr, flip)
    # One compiled step per call from the host, not lax.scan: on CPU XLA lowers convolutions
    # inside a loop body to its generic convolution, 20x slower here (`benchmarks/rclicks.py`).
    # Step i takes keys[i] inside the jit: iterating over the key array would compile an
    # `unstack` into `steps` outputs (seconds on CPU) before the first step.
    step = jax.jit(lambda carry, xs, ts, keys, i: step_fn(xs, ts, carry, keys[i]),
                   donate_argnums=0)  # fmt: skip
    keys = jax.random.split(data_key, steps)
    carry = (model.params, tx.init(model.params))
    losses = []
    for i in tqdm(range(steps), desc="clickability"):
        carry, loss = step(carry, x_all, t_all, keys, np.int32(i))
        losses.append(loss)
    losses = np.array(jax.device_get(losses), np.float32)  # no compiled `stack` of `steps`
    return ClickabilityModel(size, model.features, carry[0]), losses
