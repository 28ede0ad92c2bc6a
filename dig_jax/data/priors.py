"""Previous segmentations (priors) and the corrections a user would make to them.

`synthesize_prior` corrupts a GT mask by flipping SLIC superpixels (scikit-image's labels,
`dig_jax.data.superpixels`) along its boundary: the ones mostly inside are removed, the ones
mostly outside are added. The superpixels are flipped in a random order and one prefix of that
order whose IoU with the GT lies in the band is chosen, so the result is in [0.75, 0.85] by
construction. A try fails when no prefix lands in the band
(superpixels too coarse or too few); tries then use finer superpixels, at most `max_tries`,
after which `PriorUnreachableError` is raised. Everything is deterministic given the rng.
"""

from __future__ import annotations

import dataclasses

import cv2
import numpy as np

from dig_jax.data.regions import VOID, components
from dig_jax.data.superpixels import slic
from dig_jax.gestures.types import Context
from dig_jax.metrics import iou

IOU_BAND = (0.75, 0.85)
MIN_CORRECTION_AREA = 100  # px, error components under this are not corrections
# Superpixel size as a fraction of the GT area, per try (finer superpixels on later tries).
_SUPERPIXEL_FRACTIONS = (0.04, 0.025, 0.015, 0.008, 0.004, 0.002)
_SLIC_SIDE = 160  # px, longest side SLIC runs at


class PriorUnreachableError(RuntimeError):
    """No previous segmentation with IoU in the band was found within the allowed tries."""


@dataclasses.dataclass(frozen=True, eq=False)
class Correction:
    """One error component of a prior: `mask` uint8[H,W] {0,1}, `context` ADD (missing) or
    REMOVE (extra), `area` px."""

    mask: np.ndarray
    context: Context
    area: int


def _crop_box(gt: np.ndarray, margin: float = 0.25, min_margin: int = 8) -> tuple[slice, slice]:
    rows, cols = np.flatnonzero(gt.any(axis=1)), np.flatnonzero(gt.any(axis=0))
    h, w = gt.shape
    dr = max(int((rows[-1] - rows[0] + 1) * margin), min_margin)
    dc = max(int((cols[-1] - cols[0] + 1) * margin), min_margin)
    return (
        slice(max(rows[0] - dr, 0), min(rows[-1] + dr + 1, h)),
        slice(max(cols[0] - dc, 0), min(cols[-1] + dc + 1, w)),
    )


def _superpixels(image: np.ndarray, n_segments: int) -> np.ndarray:
    """SLIC labels int[H, W]; computed at most `_SLIC_SIDE` px per side, then upsampled
    (nearest) for speed, with as many segments per image area."""
    h, w = image.shape[:2]
    scale = min(1.0, _SLIC_SIDE / max(h, w))
    small = image
    if scale < 1.0:
        size = (max(round(w * scale), 1), max(round(h * scale), 1))
        small = cv2.resize(image, size, interpolation=cv2.INTER_AREA)
    sp = slic(small, n_segments, compactness=10.0)
    if scale < 1.0:
        sp = cv2.resize(sp.astype(np.int32), (w, h), interpolation=cv2.INTER_NEAREST)
    return sp


def _boundary_band(mask: np.ndarray, width: int) -> np.ndarray:
    """bool[H, W]: pixels within `width` cross-steps of the mask's boundary, on either side
    (`ndimage` binary dilation minus erosion, outside the image counted as background)."""
    if mask.size == 0:
        return np.zeros(mask.shape, bool)
    cross = cv2.getStructuringElement(cv2.MORPH_CROSS, (3, 3))
    m = mask.view(np.uint8) if mask.dtype == bool else (mask > 0).astype(np.uint8)
    grown = cv2.dilate(m, cross, iterations=width, borderType=cv2.BORDER_CONSTANT, borderValue=0)
    shrunk = cv2.erode(m, cross, iterations=width, borderType=cv2.BORDER_CONSTANT, borderValue=0)
    return grown > shrunk


def _try_prior(image, gt, valid, fraction, band, rng):
    """One attempt on the cropped arrays; returns (prior crop, iou) or (None, best iou)."""
    area = int((gt & valid).sum())
    n_segments = int(np.clip(gt.size / max(area * fraction, 4.0), 8, 4000))
    sp = _superpixels(image, n_segments)
    n = int(sp.max()) + 1
    inside = np.bincount(sp.ravel(), weights=(gt & valid).ravel(), minlength=n)
    outside = np.bincount(sp.ravel(), weights=(~gt & valid).ravel(), minlength=n)
    band_px = _boundary_band(gt, 2)
    candidates = np.unique(sp[band_px])
    if candidates.size == 0:
        return None, 1.0
    order = rng.permutation(candidates)
    remove = inside[order] >= outside[order]  # mostly inside: flip out; else flip in
    inter = area - np.cumsum(np.where(remove, inside[order], 0.0))
    union = area + np.cumsum(np.where(remove, 0.0, outside[order]))
    ious = inter / np.maximum(union, 1.0)
    ok = np.flatnonzero((ious >= band[0]) & (ious <= band[1]))
    if ok.size == 0:
        return None, float(ious[-1])
    k = int(rng.choice(ok)) + 1
    chosen, flip_out = order[:k], remove[:k]
    clear, fill = np.zeros(n, bool), np.zeros(n, bool)  # per-superpixel lookup tables
    clear[chosen[flip_out]] = True
    fill[chosen[~flip_out]] = True
    return (gt & ~clear[sp]) | fill[sp], float(ious[k - 1])


def synthesize_prior(
    image: np.ndarray,
    gt: np.ndarray,
    rng: np.random.Generator,
    *,
    void: np.ndarray | None = None,
    band: tuple[float, float] = IOU_BAND,
    max_tries: int = len(_SUPERPIXEL_FRACTIONS),
) -> np.ndarray:
    """A previous segmentation uint8[H,W] {0,1} of `gt` with IoU(prior, gt) in `band`.

    Args:
      image: RGB uint8[H, W, 3] (superpixels follow its edges).
      gt: bool or uint8[H, W] with values {0, 1, 255}: 1 object, 0 background, 255 void
        (joined to `void`); at least one non-void object pixel.
      rng: numpy Generator; the same state gives the same prior.
      void: optional {0,1}/bool[H, W] pixels ignored by the IoU.
      band: inclusive IoU interval.
      max_tries: attempts (each with finer superpixels) before giving up.
    Raises:
      ValueError on bad input; PriorUnreachableError when no attempt lands in the band.
    """
    image, gt = np.asarray(image), np.asarray(gt)
    if image.ndim != 3 or image.shape[-1] != 3:
        raise ValueError(f"image: expected RGB [H, W, 3], got shape {image.shape}")
    if image.dtype != np.uint8:
        raise ValueError(f"image: expected uint8, got {image.dtype}")
    if gt.shape != image.shape[:2]:
        raise ValueError(f"gt: shape {gt.shape} differs from image shape {image.shape[:2]}")
    if gt.dtype != bool and ((gt != 0) & (gt != 1) & (gt != VOID)).any():  # 30x faster than unique
        bad = np.setdiff1d(np.unique(gt), [0, 1, VOID])
        if bad.size:
            raise ValueError(f"gt: values must be in {{0, 1, 255}}, got {bad[:5].tolist()}")
    valid = gt != VOID
    if void is not None:
        void = np.asarray(void)
        if void.shape != gt.shape:
            raise ValueError(f"void: shape {void.shape} differs from gt shape {gt.shape}")
        valid &= ~(void > 0)
    gt = gt == 1
    if not (gt & valid).any():
        raise ValueError("gt: empty mask (no non-void foreground pixel)")
    if not 0.0 < band[0] <= band[1] < 1.0:
        raise ValueError(f"band: expected 0 < lo <= hi < 1, got {band}")
    box = _crop_box(gt)
    for attempt in range(max_tries):
        fraction = _SUPERPIXEL_FRACTIONS[min(attempt, len(_SUPERPIXEL_FRACTIONS) - 1)]
        crop, _ = _try_prior(image[box], gt[box], valid[box], fraction, band, rng)
        if crop is not None:
            prior = gt.copy()
            prior[box] = crop
            prior = prior.astype(np.uint8)
            # {0, 1} where valid, VOID elsewhere (np.where with a scalar VOID: 15x slower)
            target = gt.view(np.uint8) | ((~valid).view(np.uint8) * np.uint8(VOID))
            measured = float(iou(prior, target))
            if band[0] <= measured <= band[1]:
                return prior
    raise PriorUnreachableError(
        f"no prior with IoU in {band} after {max_tries} tries (GT area {int(gt.sum())} px)"
    )


COARSE_UNDER = (0.05, 0.5)  # share of the GT a coarse under-segmentation keeps
COARSE_OVER = (0.3, 1.5)  # background a coarse over-segmentation takes in, as a share of the GT


def coarse_prior(
    image: np.ndarray,
    gt: np.ndarray,
    rng: np.random.Generator,
    *,
    void: np.ndarray | None = None,
    over: tuple[float, float] = COARSE_OVER,
) -> np.ndarray:
    """A badly wrong previous segmentation uint8[H, W] {0,1} of `gt`, as a first click leaves
    it: with probability 1/2 an under-segmentation (the SLIC superpixels mostly inside the GT
    nearest a random GT pixel, until they hold U`COARSE_UNDER` of its area), else an
    over-segmentation (the GT with the superpixels mostly outside it nearest a random point of
    its boundary, until they add U`over` of its area; the under kind where the photo holds no
    such background). The superpixels come from a crop of the GT's box with a margin of half
    its size per side, more where `over` asks for more background than that crop holds (a
    margin of (sqrt(1 + over[1]) - 1) / 2). `synthesize_prior`'s priors only err along the
    boundary (IoU 0.75-0.85); these leave one large error, a whole part to add or a blob to
    remove. Other arguments as `synthesize_prior`; ValueError on an empty GT or a bad `over`."""
    image, gt = np.asarray(image), np.asarray(gt)
    if gt.shape != image.shape[:2]:
        raise ValueError(f"gt: shape {gt.shape} differs from image shape {image.shape[:2]}")
    valid = gt != VOID
    if void is not None:
        valid &= ~(np.asarray(void) > 0)
    obj = (gt == 1) & valid
    area = int(obj.sum())
    if area == 0:
        raise ValueError("gt: empty mask (no non-void foreground pixel)")
    if not 0.0 <= over[0] <= over[1] or not np.isfinite(over[1]):
        raise ValueError(f"over: expected finite 0 <= low <= high, got {tuple(over)}")
    box = _crop_box(obj, margin=max(0.5, (np.sqrt(1.0 + over[1]) - 1.0) / 2.0))
    crop_obj, crop_valid = obj[box], valid[box]
    n_segments = int(np.clip(crop_obj.size / max(area * 0.03, 4.0), 8, 4000))
    sp = _superpixels(image[box], n_segments)
    n = int(sp.max()) + 1
    inside = np.bincount(sp.ravel(), weights=crop_obj.ravel(), minlength=n)
    outside = np.bincount(sp.ravel(), weights=(~crop_obj & crop_valid).ravel(), minlength=n)
    rows, cols = np.indices(sp.shape)
    count = np.maximum(np.bincount(sp.ravel(), minlength=n), 1)
    centre_r = np.bincount(sp.ravel(), weights=rows.ravel(), minlength=n) / count
    centre_c = np.bincount(sp.ravel(), weights=cols.ravel(), minlength=n) / count
    background = np.flatnonzero((outside > inside) & (outside > 0))
    grow = rng.random() < 0.5 and background.size > 0
    if grow:
        edge = np.argwhere(_boundary_band(crop_obj, 1) & crop_obj)
        seed = edge[int(rng.integers(len(edge)))]
        pool, gain, goal = background, outside, rng.uniform(*over) * area
    else:
        pixels = np.argwhere(crop_obj)
        seed = pixels[int(rng.integers(len(pixels)))]
        pool, gain, goal = np.flatnonzero(inside >= outside), inside, rng.uniform(*COARSE_UNDER)
        goal *= area
    order = pool[np.argsort(np.hypot(centre_r[pool] - seed[0], centre_c[pool] - seed[1]))]
    k = int(np.searchsorted(np.cumsum(gain[order]), goal)) + 1
    chosen = np.zeros(n, bool)
    chosen[order[:k]] = True
    crop = chosen[sp] | crop_obj if grow else chosen[sp]
    prior = np.zeros(gt.shape, np.uint8)
    prior[box] = crop
    return prior


def find_corrections(
    prev: np.ndarray,
    gt: np.ndarray,
    void: np.ndarray | None = None,
    min_area: int = MIN_CORRECTION_AREA,
) -> list[Correction]:
    """Error components of `prev` w.r.t. `gt` with >= `min_area` px, ignoring `void`.

    Missing pixels (gt=1, prev=0) give ADD corrections, extra pixels REMOVE ones; the list has
    the ADD components first, each group in raster order of their first pixel.
    """
    prev, gt = np.asarray(prev) > 0, np.asarray(gt) == 1
    if prev.shape != gt.shape:
        raise ValueError(f"prev: shape {prev.shape} differs from gt shape {gt.shape}")
    valid = np.ones_like(gt) if void is None else ~(np.asarray(void) > 0)
    out = []
    for context, error in ((Context.ADD, gt & ~prev & valid), (Context.REMOVE, prev & ~gt & valid)):
        for comp in components(error, min_area):
            out.append(Correction(comp, context, int(comp.sum())))
    return out


def refinement_targets(
    prev: np.ndarray, gt: np.ndarray, correction: Correction, void: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(local GT uint8 {0,1}, training target uint8 {0,1,255}) for fixing one correction.

    Local GT: `prev` with exactly the correction's component added or removed. Target: the
    local GT with every other error pixel (w.r.t. `gt`) and `void` set to 255.
    """
    prev, gt = np.asarray(prev) > 0, np.asarray(gt) == 1
    comp = correction.mask > 0
    local = (prev | comp) if correction.context == Context.ADD else (prev & ~comp)
    target = local.astype(np.uint8)
    target[(prev != gt) & ~comp] = VOID
    if void is not None:
        target[np.asarray(void) > 0] = VOID
    return local.astype(np.uint8), target


def refinement_local(
    target: np.ndarray,
    prior: np.ndarray,
    region: np.ndarray | None = None,
    void: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(local GT bool[H, W], the photo's own void bool[H, W]) of a refinement training
    target {0,1,255} on `prior` {0,1}[H, W] (DIG eq. 6): the prior with the targeted error
    corrected, every other error as it was. The target's void pixels are the untargeted errors
    (they keep the prior's value) and the photo's own void: `void` when known, else those where
    the prior equals the `region` (no error), else none."""
    marked, prior = target == VOID, np.asarray(prior) > 0
    if void is None:
        void = np.zeros_like(marked) if region is None else marked & (prior == region)
    errors = marked & ~void
    return np.where(errors, prior, target == 1), void
