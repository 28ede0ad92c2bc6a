"""Clickability maps: for every pixel, the probability that a person clicks there, given the
image, the target and the current error region (uint8/bool masks [H, W]).

Three weight-free maps, each float32[H, W], zero outside the error and summing to 1 (all zeros
when the error has no pixels — never NaN):
- UD: uniform over the error (RClicks `uniform_model`);
- DT: proportional to the Euclidean distance transform of the error (RClicks
  `distance_transform_model`). Choice: the error is padded by one zero pixel before the EDT, as
  the baseline clicker does, so an error touching the image border peaks inside it rather than
  on the border (the reference's cv2 call treats the outside as far away);
- SM: saliency restricted to the error. The reference runs TranSalNet on the error's box
  enlarged ×1.4 with the non-error pixels greyed out (`SaliencyModel`); here the same crop goes
  through spectral-residual saliency (Hou & Zhang 2007) in `jnp` at 64×64 — no downloaded weights.
  If the saliency inside the error is all zero the map falls back to UD, as the reference does.
The learned map (CM) is `dig_jax.robustness.rclicks.model`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import cv2
import jax
import jax.numpy as jnp
import numpy as np
from scipy import ndimage

from dig_jax.data.regions import VOID

MAP_KINDS = ("ud", "dt", "sm")
SALIENCY_SIZE = 64  # px: side of the spectral-residual working image
SALIENCY_EXPAND = 1.4  # the reference's crop around the error (`bbox_rsize`)
SALIENCY_BLUR = 1.5  # px at SALIENCY_SIZE (OpenCV: a 5×5 Gaussian of σ 8, near a box)
MapFn = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def as_mask(value: Any, name: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """bool[H, W] from a bool or {0, 1} integer array; ValueError naming `name` otherwise."""
    arr = np.asarray(value)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D mask [H, W], got shape {arr.shape}")
    if shape is not None and arr.shape != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {arr.shape}")
    if arr.dtype != bool:
        if not np.issubdtype(arr.dtype, np.integer):
            raise ValueError(f"{name} must be bool or integer {{0, 1}}, got dtype {arr.dtype}")
        if arr.size and (arr.min() < 0 or arr.max() > 1):
            raise ValueError(f"{name} must hold only 0 and 1")
    return arr.astype(bool)


def check_map(prob_map: Any, name: str = "prob_map", ndim: int | None = 2) -> np.ndarray:
    """float64 copy of a map after checking it: finite, non-negative, `ndim` axes (None: any)."""
    arr = np.asarray(prob_map)
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} axes, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty (shape {arr.shape})")
    if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise ValueError(f"{name} must be numeric, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or inf")
    if (arr < 0).any():
        raise ValueError(f"{name} has negative values")
    return arr


def check_image(image: Any, name: str = "image") -> np.ndarray:
    """uint8[H, W, 3] or ValueError naming `name`."""
    arr = np.asarray(image)
    if arr.ndim != 3 or arr.shape[-1] != 3 or arr.dtype != np.uint8:
        raise ValueError(f"{name} must be uint8 RGB [H, W, 3], got {arr.dtype} {arr.shape}")
    return arr


def normalize(weights: np.ndarray) -> np.ndarray:
    """float32 weights / their sum; all zeros when the sum is 0."""
    weights = np.asarray(weights, np.float64)
    total = weights.sum()
    return (weights / total if total > 0 else np.zeros_like(weights)).astype(np.float32)


def error_masks(pred: Any, gt: Any) -> tuple[np.ndarray, np.ndarray]:
    """(false negatives, false positives) bool[H, W] of `pred` {0,1} against `gt` {0,1,255};
    void pixels are in neither."""
    gt = np.asarray(gt)
    if gt.ndim != 2:
        raise ValueError(f"gt must be a 2-D mask [H, W], got shape {gt.shape}")
    pred = as_mask(pred, "pred", gt.shape)
    valid = gt != VOID
    return (gt == 1) & ~pred & valid, (gt == 0) & pred & valid


def padded_edt(mask: Any) -> np.ndarray:
    """float32[H, W]: Euclidean distance (px) of each mask pixel to the nearest non-mask pixel,
    the image outside counting as non-mask (one pixel of zero padding); 0 off the mask.

    Computed on the mask's box plus a one-pixel zero ring, which is exact: a zero pixel beyond
    the ring is never nearer than its projection onto the ring.
    """
    mask = as_mask(mask, "mask")
    out = np.zeros(mask.shape, np.float32)
    rows, cols = np.flatnonzero(mask.any(1)), np.flatnonzero(mask.any(0))
    if rows.size == 0:
        return out
    r0, r1, c0, c1 = rows[0], rows[-1] + 1, cols[0], cols[-1] + 1
    crop = np.pad(mask[r0:r1, c0:c1], 1)
    out[r0:r1, c0:c1] = ndimage.distance_transform_edt(crop)[1:-1, 1:-1]
    return out


def uniform_map(error: Any) -> np.ndarray:
    """UD: float32[H, W], 1 / |error| on the error, 0 elsewhere."""
    return normalize(as_mask(error, "error"))


def dt_map(error: Any) -> np.ndarray:
    """DT: float32[H, W] proportional to `padded_edt(error)`."""
    return normalize(padded_edt(error))


def _gaussian_kernel(sigma: float) -> np.ndarray:
    radius = max(1, int(np.ceil(3 * sigma)))
    x = np.arange(-radius, radius + 1, dtype=np.float32)
    k = np.exp(-0.5 * (x / sigma) ** 2)
    return (k / k.sum()).astype(np.float32)


@jax.jit
def spectral_residual(gray: jax.Array) -> jax.Array:
    """Spectral-residual saliency (Hou & Zhang, CVPR 2007) of a grey image f32[S, S] in [0, 1]:
    the log-amplitude spectrum minus its 3×3 mean keeps the "unexpected" part, transformed back
    with the original phase, squared and smoothed (σ = `SALIENCY_BLUR` px). f32[S, S] in [0, 1]."""
    spectrum = jnp.fft.fft2(gray)
    log_amp = jnp.log(jnp.abs(spectrum) + 1e-8)
    phase = jnp.angle(spectrum)
    padded = jnp.pad(log_amp, 1, mode="wrap")
    mean3 = jax.scipy.signal.convolve2d(padded, jnp.full((3, 3), 1 / 9), mode="valid")
    residual = log_amp - mean3
    sal = jnp.abs(jnp.fft.ifft2(jnp.exp(residual + 1j * phase))) ** 2
    k = jnp.asarray(_gaussian_kernel(SALIENCY_BLUR))
    r = k.shape[0] // 2
    sal = jax.scipy.signal.convolve2d(jnp.pad(sal, ((r, r), (0, 0)), mode="edge"), k[:, None],
                                      mode="valid")  # fmt: skip
    sal = jax.scipy.signal.convolve2d(jnp.pad(sal, ((0, 0), (r, r)), mode="edge"), k[None, :],
                                      mode="valid")  # fmt: skip
    return sal / jnp.maximum(sal.max(), 1e-12)


def error_crop(error: np.ndarray, expand: float = SALIENCY_EXPAND) -> tuple[slice, slice]:
    """Rows and columns of the error's box enlarged `expand`× about its centre, clipped to the
    image (the reference's `get_frame_to_cut`)."""
    rows, cols = np.flatnonzero(error.any(1)), np.flatnonzero(error.any(0))
    h, w = error.shape

    def span(lo: int, hi: int, size: int) -> slice:
        extra = int((int(expand * (hi - lo + 1)) - (hi - lo + 1)) / 2)
        return slice(max(lo - extra, 0), min(hi + extra, size - 1) + 1)

    return span(rows[0], rows[-1], h), span(cols[0], cols[-1], w)


def saliency_map(image: Any, error: Any, size: int = SALIENCY_SIZE) -> np.ndarray:
    """SM: float32[H, W], spectral-residual saliency of the error's enlarged box (non-error
    pixels grey), restricted to the error and normalised; UD where the saliency is all zero."""
    image = check_image(image)
    error = as_mask(error, "error", image.shape[:2])
    if not error.any():
        return np.zeros(error.shape, np.float32)
    rs, cs = error_crop(error)
    crop = image[rs, cs].astype(np.float32) / 255.0
    inside = error[rs, cs]
    crop[~inside] = 0.5
    gray = cv2.resize(crop.mean(-1), (size, size), interpolation=cv2.INTER_AREA)
    sal = np.asarray(spectral_residual(jnp.asarray(gray, jnp.float32)), np.float32)
    sal = cv2.resize(sal, (inside.shape[1], inside.shape[0]), interpolation=cv2.INTER_LINEAR)
    sal = np.clip(sal, 0, None) * inside
    if not sal.sum() > 0:
        sal = inside.astype(np.float32)
    out = np.zeros(error.shape, np.float32)
    out[rs, cs] = sal
    return normalize(out)


def clickability_map(kind: str, image: Any, gt: Any, error: Any) -> np.ndarray:
    """The `kind` map ("ud", "dt" or "sm") for `error` bool[H, W] on `image` uint8[H, W, 3];
    `gt` (the target, unused by these three) is checked for shape. float32[H, W], sum 1 or 0."""
    if kind not in MAP_KINDS:
        raise ValueError(f"kind must be one of {MAP_KINDS}, got {kind!r}")
    image = check_image(image)
    if np.shape(gt) != image.shape[:2]:
        raise ValueError(f"gt must have shape {image.shape[:2]}, got {np.shape(gt)}")
    error = as_mask(error, "error", image.shape[:2])
    if kind == "ud":
        return uniform_map(error)
    if kind == "dt":
        return dt_map(error)
    return saliency_map(image, error)


def map_function(spec: str) -> tuple[str, MapFn]:
    """(name, fn(image, gt, error) -> map) for "ud", "dt", "sm", or a clickability model file
    written by `save_clickability` (given as its path, optionally prefixed "cm:")."""
    if spec in MAP_KINDS:
        return spec, lambda image, gt, error: clickability_map(spec, image, gt, error)
    from pathlib import Path

    from dig_jax.robustness.rclicks.model import load_clickability

    path = Path(spec.removeprefix("cm:"))
    if not path.is_file():
        raise ValueError(
            f"map must be one of {MAP_KINDS} or a clickability model file, got {spec!r}"
        )
    model = load_clickability(path)
    return f"cm:{path.stem}", model.predict_map
