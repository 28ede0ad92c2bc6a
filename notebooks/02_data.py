# ---
# jupyter:
#   jupytext:
#     formats: py:percent,ipynb
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 02 — Data: regions, parts, previous segmentations, multi-region samples
#
# How `dig_jax.data` turns instance masks into DIG training samples: a region (the whole
# object) and its parts (connected components split by occlusion), a synthetic previous
# segmentation with IoU in [0.75, 0.85] and its corrections (error components >= 100 px,
# green = ADD, red = REMOVE), and the samples the pipeline yields. Real photos are used when
# `dig_jax.paths.data_root()` holds them; otherwise the procedural scenes stand in.

# %%

import matplotlib.pyplot as plt
import numpy as np

from dig_jax.data import (
    extract_regions,
    find_corrections,
    make_dataset,
    procedural,
    synthesize_prior,
)
from dig_jax.data.sources import benchmark_folder, bsds_regions, resize_loaded
from dig_jax.gestures.types import Context, GestureKind
from dig_jax.metrics import iou
from dig_jax.paths import data_root, figures_dir, has_data

SIZE = (256, 256)
FIGURES = figures_dir()  # results/figures, or DIG_JAX_FIGURES
if has_data("bsds500_regions") and has_data("coco_mval"):
    records = bsds_regions(data_root() / "bsds500_regions", annotators="first")[:3]
    records += benchmark_folder(data_root() / "coco_mval")[:60:2]  # occluded objects: parts
    sources = ["coco_mval", "bsds500_regions/val"]
else:
    print(f"real data not found at {data_root()}: showing procedural scenes instead")
    records = procedural(0, 9, size=SIZE)
    sources = ["procedural:50"]
loaded = [resize_loaded(r.load(), SIZE) for r in records]
regions = [extract_regions(x.instances) for x in loaded]  # [] when every region < 300 px


def overlay(ax, image, masks_and_colours, title=""):
    gray = image.astype(float).mean(-1, keepdims=True) / 255  # dimmed grey photo, coloured masks
    out = np.repeat(0.25 + 0.6 * gray, 3, axis=-1)
    for mask, colour in masks_and_colours:
        m = mask > 0
        out[m] = 0.35 * out[m] + 0.65 * np.asarray(colour)
    ax.imshow(out)
    ax.set_title(title, fontsize=8)
    ax.axis("off")


# %% [markdown]
# ## Regions and parts
# Each colour is one part (a connected component of >= 300 px) of a region split by occlusion;
# a gesture targets one part, the other parts are void in its target, the global GT is all.

# %%
fig, axes = plt.subplots(1, 3, figsize=(10, 3.6))
pool = list(zip(records, loaded, regions, strict=True))  # + procedural scenes (occlusion by design)
pool += [(r, r.load(), extract_regions(r.load().instances)) for r in procedural(0, 40, size=SIZE)]
pool = [p for p in pool if any(r.num_parts > 1 for r in p[2])]
palette = plt.cm.tab10.colors
for ax, (record, x, rs) in zip(axes, pool[:3], strict=False):
    region = max(rs, key=lambda r: r.num_parts)
    title = f"{record.source}/{record.image_id}: {region.num_parts} part(s)"
    overlay(ax, x.image, [(p, palette[k % 10]) for k, p in enumerate(region.parts)], title)
plt.tight_layout()
fig.savefig(FIGURES / "02_data_parts.png", dpi=90)
plt.show()

# %% [markdown]
# ## Previous segmentations and their corrections
# Blue: the prior (SLIC superpixels flipped along the boundary); green: missing components
# (ADD), red: extra components (REMOVE). The title gives IoU(prior, GT).

# %%
fig, axes = plt.subplots(1, 3, figsize=(10, 3.6))
for k, ax in enumerate(axes):
    x = loaded[k]
    region = max(regions[k], key=lambda r: r.area)
    prior = synthesize_prior(x.image, region.mask, np.random.default_rng(k), void=x.void)
    corrections = find_corrections(prior, region.mask, x.void)
    gt = np.where(x.void > 0, 255, region.mask).astype(np.uint8)
    layers = [(prior, (0.1, 0.3, 1.0))]
    layers += [(c.mask, (0, 1, 0) if c.context == Context.ADD else (1, 0, 0)) for c in corrections]
    overlay(ax, x.image, layers, f"IoU {float(iou(prior, gt)):.3f}, {len(corrections)} corrections")
plt.tight_layout()
fig.savefig(FIGURES / "02_data_priors.png", dpi=90)
plt.show()

# %% [markdown]
# ## Pipeline samples (creation, refinement, multi-region)
# Rows: image with the gesture (yellow) and previous mask (blue); training target (white 1,
# grey void); global GT. dataAug multi-region probability 0.5.

# %%
ds = make_dataset(
    dict(
        sources=sources,
        image_size=SIZE,
        batch_size=4,
        prior_prob=0.5,
        multi_region_prob=0.5,
        shard=(0, 1),
    ),
    "train",
    seed=3,
)
batch = next(iter(ds))
fig, axes = plt.subplots(3, 4, figsize=(11, 8.5))
for j in range(4):
    kind = GestureKind(int(batch["gesture_kind"][j])).name.lower()
    mode = "refine" if batch["has_prev"][j] else "create"
    overlay(
        axes[0, j],
        batch["image"][j],
        [(batch["prev_mask"][j], (0.1, 0.3, 1.0)), (batch["gesture"][j], (1, 1, 0))],
        f"{kind}, {mode}, context {int(batch['context'][j])}",
    )
    axes[1, j].imshow(np.where(batch["target"][j] == 255, 0.5, batch["target"][j]), cmap="gray")
    axes[1, j].set_title("target (local GT, grey = void)", fontsize=8)
    axes[2, j].imshow(batch["region"][j], cmap="gray")
    axes[2, j].set_title("region (global GT)", fontsize=8)
for ax in axes[1:].ravel():
    ax.axis("off")
plt.tight_layout()
fig.savefig(FIGURES / "02_data_samples.png", dpi=90)
plt.show()
