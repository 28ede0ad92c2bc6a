"""The zoom-in: a prompt on a photo of any size into an S×S crop, and the model's logits back
into a full-size mask: RITM's zoom-in, made context- and gesture-kind-free.

A segmenter runs at one working resolution S (its `image_size`). For every prompt a square
`ZoomBox` in image pixels is chosen from the prompt's geometry alone (`zoom_box`):
- with a previous mask: the box of previous mask ∪ gesture, expanded ×`EXPAND` (RITM: 1.4);
- a creation gesture that encloses an area (lasso, rectangle): its box expanded ×`EXPAND`;
- an open stroke (scribble): its box expanded ×`EXPAND_OPEN`, since the object reaches past it;
- a creation click (a dot: it says nothing about extent): the whole image.
Boxes are at least `MIN_SIDE_FRACTION`·S px (at most that much upscaling) and at most the
image's long side; parts outside the image are padded (`PAD_RGB`, no gesture, no mask).
`crop_prompt` warps image / gesture / previous mask into the S×S crop (the distance map is
computed there), `crop_sample` does the same to a training sample (targets: void outside the
image), `paste_logits` maps S×S logits back onto the photo (background outside the box) and
`paste_mask` makes the mask, keeping the previous mask's own pixels where the model kept them.
A creation click may run at a larger working size (`config.predict.click_size`), and a
whole-image creation (a click's) may be followed by a focus pass on the box of its first mask
(`refocus_box`; `config.predict.focus_pass`), and a creation gesture that encloses no area may
be cut at a lower logit (`config.predict.open_threshold`); `Passes` reads them from a
segmenter's config.
Training samples go through the same boxes (`jitter_box` adds scale/shift noise), so training
and use agree. Used by training, `predict`, evaluation, attacks and the demo.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import cv2
import numpy as np
from scipy import ndimage

from dig_jax.gestures.contours import fill_holes
from dig_jax.gestures.raster import distance_uint8
from dig_jax.gestures.scan import tight_box
from dig_jax.gestures.types import BRUSH_RADIUS
from dig_jax.metrics import VOID

EXPAND = 1.4
EXPAND_OPEN = 2.5
MIN_SIDE_FRACTION = 0.5
DOT_EXTENT = 4 * BRUSH_RADIUS  # px: a creation gesture no wider or taller than this is a click
IGNORED_FRACTION = 0.02  # a refinement stroke whose footprint changed at most this much was ignored
MERGE_MODES = ("none", "clicks", "all")  # `Passes.merge`: which refinement prompts merge locally
CLOSED_FILL_RATIO = 1.3  # filled / stroke area above which a gesture encloses a region
PAD_RGB = (124, 116, 104)  # the ImageNet mean colour: zero after the models' normalisation
OUTSIDE_LOGIT = -20.0  # logit pasted outside the zoom box (background)
GESTURE_COVERAGE = 0.2  # a crop pixel is marked when the stroke covers this much of it
# The thinnest brush, in crop pixels, that training shows the models: the 5 px brush on a photo
# of `data.max_side` = 640 px zoomed out to the 224 px working size (5 * 224 / 640).
MIN_CROP_BRUSH = 1.75


@dataclasses.dataclass(frozen=True)
class ZoomBox:
    """A square region of the photo in continuous pixel-edge coordinates: columns
    [x0, x0 + side), rows [y0, y0 + side); it may extend past the image (padding). With
    `height` the region is columns [x0, x0 + side) by rows [y0, y0 + height), stretched onto
    the square crop (the paper mode's whole photo, `paper_box`)."""

    x0: float
    y0: float
    side: float
    height: float | None = None

    def scales(self, size: int) -> tuple[float, float]:
        """(columns, rows) crop pixels per image pixel at working size `size`."""
        return size / self.side, size / (self.side if self.height is None else self.height)

    def scale(self, size: int) -> float:
        """Crop pixels per image pixel at working size `size` (the smaller of the two axes'
        for a stretched box)."""
        return min(self.scales(size))

    def matrix(self, size: int) -> np.ndarray:
        """f64[2, 3] affine map from image pixel centres (x, y) to crop pixel centres (u, v)."""
        sx, sy = self.scales(size)
        return np.array(
            [[sx, 0.0, (0.5 - self.x0) * sx - 0.5], [0.0, sy, (0.5 - self.y0) * sy - 0.5]]
        )


def _binary(mask: Any, name: str, shape: tuple[int, int]) -> np.ndarray:
    """bool[H, W] from a bool / integer / float map (nonzero = marked); ValueError naming
    `name` on a wrong shape or NaN."""
    mask = np.asarray(mask)
    if mask.shape != shape:
        raise ValueError(f"{name} must have the image's shape {shape}, got {mask.shape}")
    if mask.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be a bool or numeric map, got dtype {mask.dtype}")
    if mask.dtype.kind == "f" and not np.isfinite(mask).all():
        raise ValueError(f"{name} holds NaN or Inf values")
    return mask != 0  # nonzero = marked: -1 (int8 255) too


def check_prompt(
    image: Any, gesture_map: Any, prev_mask: Any = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Validated prompt: (image uint8[H, W, 3], gesture bool[H, W], prev bool[H, W] or None).

    image: RGB uint8 [H, W, 3] (gray [H, W] is repeated, an alpha channel dropped); other
    dtypes are refused, since their range is ambiguous. Maps: nonzero = marked, so bool,
    {0, 1} and {0, 255} masks all read as binary. Python lists are accepted everywhere.
    """
    image = np.asarray(image)
    if image.dtype != np.uint8:
        raise ValueError(
            f"image must be uint8 RGB in 0..255, got dtype {image.dtype} "
            "(for floats in [0, 1]: (image * 255).round().astype(np.uint8))"
        )
    if image.ndim == 2:
        image = np.repeat(image[..., None], 3, axis=-1)
    if image.ndim != 3 or image.shape[2] not in (3, 4):
        raise ValueError(f"image must be uint8[H, W, 3], got shape {image.shape}")
    if min(image.shape[:2]) < 1:
        raise ValueError(f"image is empty, shape {image.shape}")
    image = image[..., :3]
    shape = image.shape[:2]
    gesture = _binary(gesture_map, "gesture_map", shape)
    prev = None if prev_mask is None else _binary(prev_mask, "prev_mask", shape)
    return image, gesture, prev


def _bounds(mask: np.ndarray) -> tuple[float, float, float, float] | None:
    """(x1, y1, x2, y2) pixel-edge box of the nonzero pixels, or None when there are none."""
    mask = np.asarray(mask)
    if mask.dtype not in (np.bool_, np.uint8):
        mask = mask != 0
    x1, y1, x2, y2 = (float(v) for v in tight_box(mask))  # any nonzero byte counts
    return None if x1 < 0 else (x1, y1, x2, y2)


def encloses_area(gesture_map: np.ndarray) -> bool:
    """True when the marked pixels enclose an area (a lasso or rectangle outline): filling the
    holes multiplies the marked area by more than `CLOSED_FILL_RATIO`."""
    bounds = _bounds(gesture_map)
    if bounds is None:
        return False
    x1, y1, x2, y2 = (int(v) for v in bounds)
    marked = gesture_map[y1:y2, x1:x2] > 0
    return fill_holes(marked).sum() > CLOSED_FILL_RATIO * marked.sum()


def whole_image_box(shape: tuple[int, int]) -> ZoomBox:
    """The square that letterboxes the whole image (centred on it)."""
    h, w = shape
    side = float(max(h, w))
    return ZoomBox((w - side) / 2, (h - side) / 2, side)


def paper_box(shape: tuple[int, int]) -> ZoomBox:
    """The DIG paper's input (§16.1, §16.3): the whole photo (H, W) resized to the square
    working size, aspect ratio not kept; no crop, no padding."""
    h, w = shape
    return ZoomBox(0.0, 0.0, float(w), float(h))


def prompt_box(gesture_map: Any, prev_mask: Any, size: int, paper_mode: bool = False) -> ZoomBox:
    """The box a prompt is run in: `paper_box` in paper mode, else `zoom_box`."""
    if paper_mode:
        return paper_box(np.shape(gesture_map)[:2])
    return zoom_box(gesture_map, prev_mask, size)


def fit_box(cx: float, cy: float, side: float, shape: tuple[int, int], size: int) -> ZoomBox:
    """A square of `side` centred at (cx, cy), clamped to [`MIN_SIDE_FRACTION`·size, long
    side] and moved inside the image where it fits (centred on an axis where it does not)."""
    h, w = shape
    side = float(np.clip(side, min(MIN_SIDE_FRACTION * size, max(h, w)), max(h, w)))

    def place(centre: float, extent: int) -> float:
        if side >= extent:
            return (extent - side) / 2
        return float(np.clip(centre - side / 2, 0.0, extent - side))

    return ZoomBox(place(cx, w), place(cy, h), side)


def zoom_box(gesture_map: Any, prev_mask: Any, size: int) -> ZoomBox:
    """The zoom box for a prompt (see the module docstring). `gesture_map` {0,1}[H, W] (may
    be empty: the whole image), `prev_mask` {0,1}[H, W] or None; `size` = working size S."""
    gesture_map = np.asarray(gesture_map) > 0
    shape = gesture_map.shape
    prev = None if prev_mask is None else np.asarray(prev_mask) > 0
    has_prev = prev is not None and bool(prev.any())
    bounds = _bounds(gesture_map | prev if has_prev else gesture_map)
    if bounds is None:
        return whole_image_box(shape)
    x1, y1, x2, y2 = bounds
    extent = max(x2 - x1, y2 - y1)
    if has_prev:
        expand = EXPAND
    elif extent <= DOT_EXTENT:
        return whole_image_box(shape)
    else:
        expand = EXPAND if encloses_area(gesture_map) else EXPAND_OPEN
    return fit_box((x1 + x2) / 2, (y1 + y2) / 2, extent * expand, shape, size)


def jitter_box(
    box: ZoomBox,
    shape: tuple[int, int],
    size: int,
    rng: np.random.Generator,
    scale: tuple[float, float] = (0.85, 1.3),
    shift: float = 0.1,
) -> ZoomBox:
    """Training noise: the box scaled by U(scale) and its centre moved by U(±shift)·side."""
    side = box.side * rng.uniform(*scale)
    cx, cy = box.x0 + box.side / 2, box.y0 + box.side / 2
    dx, dy = rng.uniform(-shift, shift, 2) * box.side
    return fit_box(cx + dx, cy + dy, side, shape, size)


def warp(array: np.ndarray, box: ZoomBox, size: int, *, nearest: bool = False, fill=0) -> Any:
    """`array` [H, W] or [H, W, C] resampled into the S×S crop of `box` (outside: `fill`).

    Shrinking averages the covered pixels (cv2.INTER_AREA on the part of the image inside the
    box, then a bilinear warp for the sub-pixel rest); enlarging is bilinear; `nearest` keeps
    label values exact (void 255). Float arrays stay float, uint8 stay uint8.
    """
    scale_x, scale_y = box.scales(size)
    matrix = box.matrix(size)
    flags = cv2.INTER_NEAREST if nearest else cv2.INTER_LINEAR
    if min(scale_x, scale_y) < 0.5 and not nearest:
        h, w = array.shape[:2]
        height = box.side if box.height is None else box.height
        x1, y1 = max(int(np.floor(box.x0)) - 1, 0), max(int(np.floor(box.y0)) - 1, 0)
        x2 = min(int(np.ceil(box.x0 + box.side)) + 1, w)
        y2 = min(int(np.ceil(box.y0 + height)) + 1, h)
        if x2 > x1 and y2 > y1:
            part = array[y1:y2, x1:x2]
            small_w = max(1, round((x2 - x1) * min(scale_x, 1.0)))
            small_h = max(1, round((y2 - y1) * min(scale_y, 1.0)))
            small = cv2.resize(part, (small_w, small_h), interpolation=cv2.INTER_AREA)
            sx, sy = small_w / (x2 - x1), small_h / (y2 - y1)
            # small pixel centre u' <- image x = x1 + (u' + 0.5) / sx - 0.5 -> crop u.
            matrix = matrix @ np.array(
                [[1 / sx, 0.0, x1 + 0.5 / sx - 0.5], [0.0, 1 / sy, y1 + 0.5 / sy - 0.5], [0, 0, 1]]
            )
            array = small
    channels = array.shape[2] if array.ndim == 3 else 1
    border = tuple([fill] * channels) if np.isscalar(fill) else tuple(fill)
    out = cv2.warpAffine(
        np.ascontiguousarray(array), matrix, (size, size), flags=flags,
        borderMode=cv2.BORDER_CONSTANT, borderValue=border,
    )  # fmt: skip
    return out


def crop_gesture(gesture_map: np.ndarray, box: ZoomBox, size: int) -> np.ndarray:
    """uint8[S, S] {0,1}: crop pixels covered at least `GESTURE_COVERAGE` by the stroke.

    On a photo far larger than training's, a click covers less than that of every crop pixel
    and would vanish: then its best-covered pixels are marked, widened to the thinnest brush
    the models were trained on (`MIN_CROP_BRUSH`). Any stroke that survives the plain rule is
    left as it is."""
    covered = warp((np.asarray(gesture_map) != 0).astype(np.float32), box, size)
    peak = float(covered.max())
    if peak >= GESTURE_COVERAGE or peak <= 0:
        return (covered >= GESTURE_COVERAGE).astype(np.uint8)
    marked = (covered >= 0.5 * peak).astype(np.uint8)
    widen = max(1, round(MIN_CROP_BRUSH - BRUSH_RADIUS * box.scale(size)))
    disc = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * widen + 1, 2 * widen + 1))
    return cv2.dilate(marked, disc)


def crop_mask(mask: np.ndarray, box: ZoomBox, size: int) -> np.ndarray:
    """uint8[S, S] {0,1}: a {0,1} mask resampled into the crop (area-weighted, ≥ 0.5)."""
    return (warp(np.asarray(mask, np.float32), box, size) >= 0.5).astype(np.uint8)


def crop_prompt(
    image: np.ndarray,
    gesture_map: np.ndarray,
    prev_mask: np.ndarray | None,
    box: ZoomBox,
    size: int,
) -> dict[str, np.ndarray]:
    """Model-side arrays of one prompt in the S×S crop: image uint8[S, S, 3] (padded with
    `PAD_RGB`), gesture uint8 {0,1}, distance uint8 (EDT in crop px, truncated at 255),
    prev_mask uint8 {0,1} (zeros when None)."""
    gesture = crop_gesture(gesture_map, box, size)
    prev = (
        np.zeros((size, size), np.uint8) if prev_mask is None else crop_mask(prev_mask, box, size)
    )
    return {
        "image": warp(np.asarray(image, np.uint8), box, size, fill=PAD_RGB),
        "gesture": gesture,
        "distance": distance_uint8(gesture),
        "prev_mask": prev,
    }


def crop_labels(labels: np.ndarray, box: ZoomBox, size: int, outside: int) -> np.ndarray:
    """uint8[S, S]: a label map ({0,1,255}) resampled by nearest neighbour; `outside` beyond
    the image (VOID for training targets)."""
    return warp(np.asarray(labels, np.uint8), box, size, nearest=True, fill=outside)


def crop_sample(sample: dict[str, Any], box: ZoomBox, size: int) -> dict[str, Any]:
    """A Sample (full-size arrays) in the S×S crop of `box`: the prompt by `crop_prompt`, the
    targets by nearest neighbour (void outside the image for `target` — and 1 in `void` —,
    0 for `region` and `local`). Scalars and ids are kept; `zoom_box` f32[3] = (x0, y0, side)
    is added."""
    out = dict(sample)
    prev = sample["prev_mask"] if bool(sample.get("has_prev", True)) else None
    out.update(crop_prompt(sample["image"], sample["gesture"], prev, box, size))
    out["target"] = crop_labels(sample["target"], box, size, VOID)
    for key, outside in (("region", 0), ("local", 0), ("void", 1)):
        if key in sample:
            out[key] = crop_labels(sample[key], box, size, outside)
    out["zoom_box"] = np.array([box.x0, box.y0, box.side], np.float32)
    return out


def paste_logits(logits: np.ndarray, box: ZoomBox, shape: tuple[int, int]) -> np.ndarray:
    """f32[H, W] logits on the photo from the S×S crop logits (bilinear; `OUTSIDE_LOGIT`
    outside the box)."""
    size = logits.shape[0]
    h, w = shape
    return cv2.warpAffine(
        np.asarray(logits, np.float32), box.matrix(size), (w, h),
        flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
        borderMode=cv2.BORDER_CONSTANT, borderValue=OUTSIDE_LOGIT,
    )  # fmt: skip


def paste_mask(
    logits: np.ndarray,
    box: ZoomBox,
    shape: tuple[int, int],
    prev: np.ndarray | None = None,
    prev_crop: np.ndarray | None = None,
    threshold: float = 0.0,
) -> np.ndarray:
    """uint8[H, W] mask on the photo from S×S crop logits: the pixels whose logit exceeds
    `threshold` (0: probability 0.5). With a previous mask (`prev` on the photo, `prev_crop` as
    the model saw it), the photo keeps `prev`'s own pixels wherever the model left the crop
    unchanged (its mask equals `prev_crop`, one crop pixel of margin): the model decides what
    changes, and resampling never blurs the rest of the user's mask."""
    mask = (paste_logits(logits, box, shape) > threshold).astype(np.uint8)
    if prev is None or prev_crop is None:
        return mask
    changed = (np.asarray(logits) > threshold) != (np.asarray(prev_crop) > 0)
    changed = ndimage.binary_dilation(changed, iterations=1).astype(np.uint8)
    h, w = shape
    changed = cv2.warpAffine(
        changed, box.matrix(logits.shape[0]), (w, h),
        flags=cv2.INTER_NEAREST | cv2.WARP_INVERSE_MAP, borderMode=cv2.BORDER_CONSTANT,
        borderValue=0,
    )  # fmt: skip
    return np.where(changed > 0, mask, np.asarray(prev) > 0).astype(np.uint8)


def focus_box(gesture_map: Any, mask: Any, size: int) -> ZoomBox | None:
    """The focus pass's box: mask ∪ gesture expanded ×`EXPAND` (None for an empty mask), where
    a second run sees an object found on a guessed box (a creation click) up close."""
    mask = np.asarray(mask) > 0
    bounds = _bounds(mask | (np.asarray(gesture_map) > 0)) if mask.any() else None
    if bounds is None:
        return None
    x1, y1, x2, y2 = bounds
    side = max(x2 - x1, y2 - y1) * EXPAND
    return fit_box((x1 + x2) / 2, (y1 + y2) / 2, side, mask.shape, size)


def whole_image_creation(prev_mask: Any, box: ZoomBox, shape: tuple[int, int]) -> bool:
    """True for a creation prompt (no previous mask) whose zoom box is the whole photo (H, W):
    a click, which says nothing about extent, or a stroke whose guessed box covers the photo."""
    return prev_mask is None and box == whole_image_box(shape)


def refocus_box(
    gesture_map: Any,
    prev_mask: Any,
    box: ZoomBox,
    logits: np.ndarray,
    shape: tuple[int, int],
    size: int | None = None,
) -> ZoomBox | None:
    """The focus pass (FocalClick's idea, with the same network): a creation prompt whose zoom
    box was the whole image (`whole_image_creation`) is run a second time on `focus_box` of the
    first run's mask, when that box is smaller than the first. None when no second run is due.
    `logits`: the first run's crop logits (any square size); `shape`: the photo's (H, W);
    `size`: the second run's working size (default: the logits' size)."""
    if not whole_image_creation(prev_mask, box, shape):
        return None
    size = logits.shape[0] if size is None else size
    mask = paste_logits(logits, box, shape) > 0
    focus = focus_box(gesture_map, mask, size)
    return focus if focus is not None and focus.side < 0.9 * box.side else None


def refinement_click(gesture_map: Any, prev_mask: Any) -> tuple[int, int] | None:
    """(row, col) of a refinement click: a gesture on a previous mask that is a dot, no wider or
    taller than `DOT_EXTENT` px (its centre pixel); None for any other prompt."""
    if prev_mask is None:
        return None
    gesture = np.asarray(gesture_map) > 0
    bounds = _bounds(gesture)
    if bounds is None or max(bounds[2] - bounds[0], bounds[3] - bounds[1]) > DOT_EXTENT:
        return None
    rows, cols = np.nonzero(gesture)
    return round(float(rows.mean())), round(float(cols.mean()))


def rescue_box(
    gesture_map: Any,
    prev_mask: Any,
    box: ZoomBox,
    mask: np.ndarray,
    zoom: float,
    size: int,
) -> ZoomBox | None:
    """The click-rescue pass: a refinement click (`refinement_click`) that the first run left
    unobeyed (the clicked pixel of `mask`, the first run's mask on the photo, still has the
    label it had in `prev_mask`: the network ignored the click) runs again on a box `zoom`×
    smaller than the first, centred on the click, where the click and the error around it
    fill more of the view. None when no second run is due (off: `zoom` <= 1)."""
    if zoom <= 1:
        return None
    click = refinement_click(gesture_map, prev_mask)
    if click is None:
        return None
    row, col = click
    if (mask[row, col] > 0) != (np.asarray(prev_mask)[row, col] > 0):
        return None  # obeyed: the click's pixel flipped
    local = fit_box(col + 0.5, row + 0.5, box.side / zoom, mask.shape, size)
    return local if local.side < 0.9 * box.side else None


def obey_click(
    mask: Any,
    logits: np.ndarray,
    box: ZoomBox,
    gesture_map: Any,
    prev_mask: Any,
    max_fraction: float,
) -> np.ndarray:
    """uint8[H, W]: `mask` with a refinement click obeyed (the click pass, after any rescue).
    A click whose pixel still has the label it had in `prev_mask` (the network ignored it)
    flips the connected piece, holding the click, of the pixels inside `box` that the network
    ranks at least as foreground-like (ADD: the click is off the previous mask) or at least as
    background-like (REMOVE) as the clicked pixel: the click read as "your threshold is wrong
    here", the network's own logits (`logits`: its last run's S×S crop logits on `box`) choosing
    how far the change reaches. A piece larger than `max_fraction` of the box's area inside
    the photo is not flipped (a click deep in a confident region would take the whole crop);
    nor is anything for an obeyed click, another gesture, or `max_fraction` <= 0."""
    mask = np.asarray(mask).astype(np.uint8)
    if max_fraction <= 0 or prev_mask is None:
        return mask
    click = refinement_click(gesture_map, prev_mask)
    if click is None:
        return mask
    row, col = click
    add = not np.asarray(prev_mask)[row, col] > 0
    if (mask[row, col] > 0) == add:
        return mask  # obeyed
    h, w = mask.shape
    inside = np.zeros((h, w), bool)
    height = box.side if box.height is None else box.height
    x1, y1 = max(int(np.ceil(box.x0)), 0), max(int(np.ceil(box.y0)), 0)
    x2, y2 = min(int(np.floor(box.x0 + box.side)), w), min(int(np.floor(box.y0 + height)), h)
    inside[y1:y2, x1:x2] = True
    photo = paste_logits(logits, box, (h, w))
    level = photo[row, col]
    candidates = inside & ((photo >= level) if add else (photo <= level))
    candidates &= (mask == 0) if add else (mask > 0)
    labels, _ = ndimage.label(candidates, structure=np.ones((3, 3), bool))
    piece = labels == labels[row, col]
    if labels[row, col] == 0 or piece.sum() > max_fraction * inside.sum():
        return mask
    mask = mask.copy()
    mask[piece] = 1 if add else 0
    return mask


def stroke_rescue_box(
    gesture_map: Any, prev_mask: Any, box: ZoomBox, mask: np.ndarray, size: int
) -> ZoomBox | None:
    """The stroke-rescue pass: a refinement gesture that is not a dot (a scribble, lasso or
    rectangle on a previous mask) that the first run left alone (at most `IGNORED_FRACTION` of
    its footprint, the marked pixels with the area they enclose, changed from `prev_mask` in
    `mask`, the first run's mask on the photo) runs again on the gesture's own box expanded
    ×`EXPAND`, without the rest of the previous mask, where a small error (a sliver along the
    boundary of a large mask) fills more of the view. None when no second run is due."""
    if prev_mask is None or refinement_click(gesture_map, prev_mask) is not None:
        return None
    gesture = np.asarray(gesture_map) > 0
    bounds = _bounds(gesture)
    if bounds is None:
        return None
    footprint = fill_holes(gesture)
    changed = ((np.asarray(mask) > 0) != (np.asarray(prev_mask) > 0)) & footprint
    if changed.sum() > IGNORED_FRACTION * footprint.sum():
        return None
    x1, y1, x2, y2 = bounds
    side = max(x2 - x1, y2 - y1) * EXPAND
    local = fit_box((x1 + x2) / 2, (y1 + y2) / 2, side, gesture.shape, size)
    return local if local.side < 0.9 * box.side else None


def merge_local(mask: Any, prev_mask: Any, gesture_map: Any) -> np.ndarray:
    """uint8[H, W] {0,1}: FocalClick's progressive merge, kind-agnostic. Of the changes a
    refinement run made to `prev_mask` (the 8-connected components of `mask` XOR `prev_mask`),
    keep those that touch the gesture's footprint (its marked pixels with the area they
    enclose); everywhere else the previous mask stays. A gesture then edits only the error it
    was drawn on, and never breaks a part of the mask it did not touch. When no change touches
    the footprint (the network ignored the gesture), `mask` is returned as it is."""
    mask, prev = np.asarray(mask) > 0, np.asarray(prev_mask) > 0
    if mask.shape != prev.shape:
        raise ValueError(f"mask: shape {mask.shape} differs from prev_mask shape {prev.shape}")
    changed = mask != prev
    labels, _ = ndimage.label(changed, structure=np.ones((3, 3), bool))
    touched = np.unique(labels[fill_holes(np.asarray(gesture_map) > 0) & changed])
    if touched.size == 0:
        return mask.astype(np.uint8)
    keep = np.isin(labels, touched)
    return np.where(keep, mask, prev).astype(np.uint8)


def creation_click(gesture_map: Any, prev_mask: Any) -> bool:
    """True for a creation prompt (no previous mask) whose gesture is a dot, no wider or taller
    than `DOT_EXTENT` px: it says nothing about the object's extent (`zoom_box` runs it on the
    whole photo)."""
    if prev_mask is not None:
        return False
    bounds = _bounds(np.asarray(gesture_map))
    return bounds is not None and max(bounds[2] - bounds[0], bounds[3] - bounds[1]) <= DOT_EXTENT


def open_creation(gesture_map: Any, prev_mask: Any) -> bool:
    """True for a creation prompt (no previous mask) whose gesture encloses no area
    (`encloses_area`): a dot or an open stroke, which marks part of the object and leaves its
    extent to the network (`zoom_box` gives them the whole photo or a wider box)."""
    if prev_mask is not None:
        return False
    gesture = np.asarray(gesture_map)
    return _bounds(gesture) is not None and not encloses_area(gesture)


@dataclasses.dataclass(frozen=True)
class Passes:
    """How a segmenter runs a prompt: at working size `size`, except a creation click
    (`creation_click`), whose whole-photo run is at `click_size` (a small object is only a few
    pixels of a `size` px view of the whole photo), then, with `focus`, a whole-image creation
    runs once more at `size` on its first mask's box (`refocus_box`), and, with `rescue_zoom`
    > 1, a refinement click the first run ignored runs once more at `size` on a box that many
    times smaller around the click (`rescue_box`), and with `rescue_strokes` any other
    refinement gesture it ignored runs once more on the gesture's own box
    (`stroke_rescue_box`). With `flip`, every run averages the network's logits on the crop
    and on the crop flipped left-right (`models.interactive.flip_averaged`). `merge` ("none",
    "clicks" or "all") keeps, of a refinement click's (or every refinement prompt's) changes,
    only those connected to the gesture (`merge_local`). With `obey` > 0 a refinement click
    still ignored after those runs flips the piece around it that the network ranks past the
    clicked pixel, at most `obey` of the box (`obey_click`). `from_config` reads them from a
    segmenter config."""

    size: int
    click_size: int
    focus: bool = False
    rescue_zoom: float = 0.0
    flip: bool = False
    rescue_strokes: bool = False
    merge: str = "none"
    obey: float = 0.0
    open_threshold: float = 0.0

    @classmethod
    def from_config(cls, config: Any, paper_mode: bool = False, size: int | None = None) -> Passes:
        """From `config.predict` (`focus_pass`; `click_size`: 0 or absent = the working size;
        `rescue_zoom`: 0 or absent = off; `flip`, `rescue_strokes`: absent = off; `merge`:
        absent = "none"; `obey_clicks`: 0 or absent = off; `open_threshold`: absent = 0) and the
        working size `size` (default `config.image_size`); paper mode runs one pass at the
        working size, unflipped, unmerged, cut at 0. ValueError on a click size that is not a
        positive multiple of 32, a rescue zoom that is neither 0 nor a finite number > 1, a
        flip or rescue_strokes that is not a bool, a merge not in `MERGE_MODES`, an obey_clicks
        outside [0, 1], or an open_threshold outside [-10, 10] (logits)."""
        size = int(config["image_size"] if size is None else size)
        options = config.get("predict", None) or {}
        click = options.get("click_size", 0) or size
        if isinstance(click, bool) or not isinstance(click, int) or click < 32 or click % 32:
            raise ValueError(
                f"predict.click_size must be 0 or a positive multiple of 32 (px), got {click!r}"
            )
        rescue = options.get("rescue_zoom", 0.0) or 0.0
        if (
            isinstance(rescue, bool)
            or not isinstance(rescue, int | float)
            or not (rescue == 0 or 1 < rescue < float("inf"))
        ):
            raise ValueError(f"predict.rescue_zoom must be 0 (off) or a number > 1, got {rescue!r}")
        flip = options.get("flip", False)
        if not isinstance(flip, bool):
            raise ValueError(f"predict.flip must be true or false, got {flip!r}")
        strokes = options.get("rescue_strokes", False)
        if not isinstance(strokes, bool):
            raise ValueError(f"predict.rescue_strokes must be true or false, got {strokes!r}")
        merge = options.get("merge", "none")
        if merge not in MERGE_MODES:
            raise ValueError(f"predict.merge must be one of {MERGE_MODES}, got {merge!r}")
        obey = options.get("obey_clicks", 0.0) or 0.0
        if isinstance(obey, bool) or not isinstance(obey, int | float) or not 0 <= obey <= 1:
            raise ValueError(f"predict.obey_clicks must be a fraction in [0, 1], got {obey!r}")
        cut = options.get("open_threshold", 0.0)
        if isinstance(cut, bool) or not isinstance(cut, int | float) or not -10 <= cut <= 10:
            raise ValueError(f"predict.open_threshold must be a logit in [-10, 10], got {cut!r}")
        if paper_mode:
            return cls(size, size, False)
        focus = bool(options.get("focus_pass", False))
        return cls(
            size, int(click), focus, float(rescue), flip, strokes, merge, float(obey), float(cut)
        )

    @property
    def rescues(self) -> bool:
        """Whether a refinement prompt the first run ignored may run a second time."""
        return self.rescue_zoom > 1 or self.rescue_strokes

    def rescue_due(self, gesture_map: Any, prev_mask: Any) -> bool:
        """Whether this prompt could get a rescue pass (before seeing the first run)."""
        if prev_mask is None:
            return False
        if refinement_click(gesture_map, prev_mask) is not None:
            return self.rescue_zoom > 1
        return self.rescue_strokes

    def rescue(
        self, gesture_map: Any, prev_mask: Any, box: ZoomBox, mask: np.ndarray
    ) -> ZoomBox | None:
        """The rescue pass's box for a refinement prompt the first run ignored (`mask`: its
        mask on the photo): `rescue_box` for a click, `stroke_rescue_box` for any other
        gesture, each when on; None when no second run is due."""
        if prev_mask is None:
            return None
        if refinement_click(gesture_map, prev_mask) is not None:
            return rescue_box(gesture_map, prev_mask, box, mask, self.rescue_zoom, self.size)
        if not self.rescue_strokes:
            return None
        return stroke_rescue_box(gesture_map, prev_mask, box, mask, self.size)

    def obeyed(
        self,
        gesture_map: Any,
        prev_mask: Any,
        mask: np.ndarray,
        logits: np.ndarray,
        box: ZoomBox,
    ) -> np.ndarray:
        """A prompt's mask after the click pass (`obey_click`, when `obey` > 0); `logits`, `box`:
        its last run's crop logits and zoom box."""
        if self.obey <= 0 or prev_mask is None:
            return mask
        return obey_click(mask, logits, box, gesture_map, prev_mask, self.obey)

    def merged(self, gesture_map: Any, prev_mask: Any, mask: np.ndarray) -> np.ndarray:
        """A prompt's final mask on the photo: `mask` after `merge_local` for the refinement
        prompts `merge` names, else `mask` itself."""
        if prev_mask is None or self.merge == "none":
            return mask
        if self.merge == "clicks" and refinement_click(gesture_map, prev_mask) is None:
            return mask
        return merge_local(mask, prev_mask, gesture_map)

    def cut(self, gesture_map: Any, prev_mask: Any) -> float:
        """The logit above which a prompt's pixels are in its mask: `open_threshold` for an
        open creation prompt (`open_creation`), else 0 (probability 0.5)."""
        if self.open_threshold and open_creation(gesture_map, prev_mask):
            return self.open_threshold
        return 0.0

    def first_size(self, gesture_map: Any, prev_mask: Any) -> int:
        """The working size of a prompt's first run."""
        if self.click_size != self.size and creation_click(gesture_map, prev_mask):
            return self.click_size
        return self.size


def zoom_sample(
    sample: dict[str, Any],
    size: int,
    rng: np.random.Generator | None = None,
    focus_prob: float = 0.0,
    paper_mode: bool = False,
) -> dict[str, Any]:
    """The sample in its prompt's zoom crop at `size`² (`dig_jax.prompts`); with `rng`
    (training) the box is jittered and the crop flipped left-right with probability 1/2, and
    a creation click's whole-image box is, with probability `focus_prob`, the focus pass's box
    around its target (`focus_box` of the local GT), as the second run of `predict` sees it."""
    shape = sample["image"].shape[:2]
    prev = sample["prev_mask"] if bool(sample["has_prev"]) else None
    box = prompt_box(sample["gesture"], prev, size, paper_mode)
    if (
        rng is not None
        and not paper_mode
        and focus_prob > 0
        and prev is None
        and box == whole_image_box(shape)
    ):
        if rng.random() < focus_prob:
            box = focus_box(sample["gesture"], sample["local"], size) or box
    if rng is not None and not paper_mode:
        box = jitter_box(box, shape, size, rng)
    out = crop_sample(sample, box, size)
    if rng is not None and rng.random() < 0.5:
        for key, value in out.items():
            if isinstance(value, np.ndarray) and value.shape[:2] == (size, size):
                out[key] = cv2.flip(value, 1)  # left-right, same bytes as value[:, ::-1]
    return out
