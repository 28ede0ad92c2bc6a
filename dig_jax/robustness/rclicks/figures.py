"""Figures: a clickability map and its ten clicking groups on a photo (matplotlib)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from dig_jax.metrics.rclicks import N_GROUPS
from dig_jax.robustness.rclicks.maps import check_image, check_map
from dig_jax.robustness.rclicks.sampling import group_labels, group_masses


def groups_figure(
    image: Any,
    prob_map: Any,
    *,
    gt: Any | None = None,
    clicks: dict[int, np.ndarray] | None = None,
    title: str = "",
) -> Any:
    """A matplotlib Figure: the map over the photo, and the photo with G1..G10 coloured
    (G1 = least likely 10 % of the mass, dark; G10 = most likely, bright). `gt` [H, W] draws the
    target's outline; `clicks` {group: float[n, 2] (x, y)} marks sampled clicks."""
    import matplotlib.pyplot as plt
    from matplotlib import colors

    image = check_image(image)
    prob = check_map(prob_map)
    if prob.shape != image.shape[:2]:
        raise ValueError(f"prob_map must have shape {image.shape[:2]}, got {prob.shape}")
    labels = np.asarray(group_labels(prob))
    masses = np.asarray(group_masses(prob))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4), constrained_layout=True)
    dim = (image * 0.45).astype(np.uint8)
    axes[0].imshow(dim)
    shown = np.ma.masked_where(prob <= 0, prob)
    im = axes[0].imshow(shown, cmap="inferno", alpha=0.9)
    fig.colorbar(im, ax=axes[0], fraction=0.04, label="click probability")
    axes[0].set_title("clickability map")
    cmap = plt.get_cmap("viridis", N_GROUPS)
    axes[1].imshow(dim)
    shown = np.ma.masked_where(labels == 0, labels)
    norm = colors.BoundaryNorm(np.arange(0.5, N_GROUPS + 1.5), N_GROUPS)
    im = axes[1].imshow(shown, cmap=cmap, norm=norm, alpha=0.85, interpolation="nearest")
    bar = fig.colorbar(im, ax=axes[1], fraction=0.04, ticks=np.arange(1, N_GROUPS + 1))
    bar.ax.set_yticklabels([f"G{g} ({100 * m:.0f}%)" for g, m in enumerate(masses, 1)])
    axes[1].set_title("clicking groups (share of the mass)")
    for ax in axes:
        if gt is not None:
            ax.contour(np.asarray(gt) == 1, levels=[0.5], colors="white", linewidths=0.8)
        ax.set_axis_off()
    for group, pts in (clicks or {}).items():
        pts = np.asarray(pts)
        colour = cmap((group - 1) / max(N_GROUPS - 1, 1))
        axes[1].scatter(pts[:, 0], pts[:, 1], s=14, color=colour, edgecolors="white",
                        linewidths=0.6, label=f"G{group} clicks")  # fmt: skip
    if clicks:
        axes[1].legend(loc="lower right", fontsize=7)
    if title:
        fig.suptitle(title)
    return fig


def save_groups_figure(path: str | Path, image: Any, prob_map: Any, **kwargs: Any) -> Path:
    """Write `groups_figure(image, prob_map, **kwargs)` to `path` (PNG) and close it. Scripts
    without a display should select matplotlib's Agg backend first."""
    import matplotlib.pyplot as plt

    fig = groups_figure(image, prob_map, **kwargs)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
