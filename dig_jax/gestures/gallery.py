"""Gallery figure: the five gesture kinds on real photos, for creation and ADD / REMOVE refinement.

The previous masks here are a simple local corruption made for the figure only (a disc cut out
of the object, or added next to it); the real prior generator lives in `dig_jax.data.priors`.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from skimage import io, measure

from dig_jax.gestures.raster import rasterize
from dig_jax.gestures.simulate import simulate_creation, simulate_refinement
from dig_jax.gestures.types import Context, GestureKind
from dig_jax.outputs import save_figure
from dig_jax.paths import data_root as default_data_root

GALLERY_STEMS = ("124080", "189080", "209070", "227092", "21077")  # GrabCut photos


def load_grabcut(root: Path, stem: str) -> tuple[np.ndarray, np.ndarray]:
    """(image uint8[H, W, 3], mask uint8[H, W] {0, 1}) of a GrabCut photo; 128 (unsure) is 0."""
    folder = Path(root) / "grabcut"
    images = sorted((folder / "images").glob(f"{stem}.*"))
    if not images:
        raise FileNotFoundError(f"no GrabCut image named {stem} under {folder / 'images'}")
    image = io.imread(images[0])
    if image.ndim == 2:
        image = np.repeat(image[..., None], 3, axis=-1)
    mask = io.imread(folder / "masks" / f"{stem}.bmp")
    if mask.ndim == 3:
        mask = mask[..., 0]
    return image[..., :3].astype(np.uint8), (mask == 255).astype(np.uint8)


def corrupt_mask(
    mask: np.ndarray, context: Context, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(prev uint8, error component uint8) from a disc at a random boundary pixel of `mask`.

    REMOVE: the disc's outside part is added to the previous mask; ADD: its inside part is cut out.
    The error component is the largest 8-connected piece of the difference.
    """
    mask = mask.astype(bool)
    contour = max(measure.find_contours(mask.astype(np.uint8), 0.5), key=len)
    r, c = contour[rng.integers(len(contour))]
    radius = 0.3 * np.sqrt(mask.sum())
    rows, cols = np.ogrid[: mask.shape[0], : mask.shape[1]]
    disc = (rows - r) ** 2 + (cols - c) ** 2 <= radius**2
    if context == Context.ADD:
        prev, diff = mask & ~disc, mask & disc
    else:
        prev, diff = mask | disc, disc & ~mask
    labels = measure.label(diff, connectivity=2)
    largest = np.argmax(np.bincount(labels.ravel())[1:]) + 1
    return prev.astype(np.uint8), (labels == largest).astype(np.uint8)


def _show(ax, image, gesture, shape, prev=None, error=None, target=None, title=""):
    ax.imshow(image)
    overlay = np.zeros((*shape, 4))
    if prev is not None:
        overlay[prev.astype(bool)] = (0.1, 0.4, 1.0, 0.35)
    if error is not None:
        overlay[error.astype(bool)] = (1.0, 0.85, 0.0, 0.5)
    marks = rasterize(gesture, shape).astype(bool)
    overlay[marks] = (1.0, 0.0, 0.6, 0.85)
    ax.imshow(overlay)
    if target is not None:
        for contour in measure.find_contours(target.astype(np.uint8), 0.5):
            ax.plot(contour[:, 1], contour[:, 0], color="lime", lw=0.8)
    pts = gesture.points
    if gesture.closed and len(pts) > 1:
        pts = np.concatenate([pts, pts[:1]])
    ax.plot(pts[:, 0], pts[:, 1], color="white", lw=0.5)
    if len(pts) == 1:
        ax.plot(pts[:, 0], pts[:, 1], "o", ms=7, mfc="none", mec="white", mew=1.2)
    ax.set_title(title, fontsize=9)
    ax.set_axis_off()


def save_gallery(
    path: str | Path, data_root: str | Path | None = None, rng: np.random.Generator | None = None
) -> Path:
    """Draw a 3 x 5 grid (rows: creation, ADD refinement, REMOVE refinement; columns: kinds).

    Creation panels outline the target in green; refinement panels show the previous mask in blue
    and the targeted error component in yellow; the rasterised gesture is magenta. Returns `path`.
    """
    root = Path(data_root) if data_root is not None else default_data_root()
    rng = np.random.default_rng(0) if rng is None else rng
    photos = [load_grabcut(root, stem) for stem in GALLERY_STEMS]
    fig, axes = plt.subplots(3, 5, figsize=(17, 10))
    for col, kind in enumerate(GestureKind):
        image, mask = photos[col]
        gesture = simulate_creation(kind, mask, rng)
        _show(axes[0, col], image, gesture, mask.shape, target=mask, title=f"create: {kind.name}")
        for row, context in ((1, Context.ADD), (2, Context.REMOVE)):
            prev, error = corrupt_mask(mask, context, rng)
            gesture = simulate_refinement(kind, error, context, rng)
            title = f"{context.name}: {kind.name}"
            _show(axes[row, col], image, gesture, mask.shape, prev=prev, error=error, title=title)
    return save_figure(fig, path, dpi=80)
