# ---
# jupyter:
#   jupytext:
#     formats: py:percent,ipynb
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 06 — Robust-prompt fine-tuning: before and after
#
# Issue 40 fine-tunes the shipped default with realistic and adversarial prompts in the
# training loop (`dig_jax.train.robust`, `experiments/lite_robust.py`): rectangles drawn from
# the BREPS realism prior or attacked against the current parameters, clicks drawn by clicking
# group, jittered lassos and scribbles. This notebook puts the two exported segmenters side by
# side on the same instances: IoU over centred and jittered boxes (the BREPS heatmap and IoU
# against the CIoU loss to the tight box), the worst and best plausible boxes the BREPS attack
# finds, and NoC / IoU-AUC per RClicks clicking group G1..G10.
#
# Models: BEFORE = `DIG_JAX_BEFORE`, else `DIG_JAX_CHECKPOINT`, else the robust arm's start
# (`checkpoints/lite_iterative_offline.digjax`, the default before `lite_iterative_offline_long`;
# without it, the shipped default); AFTER =
# `DIG_JAX_AFTER`, else `DIG_JAX_CHECKPOINT`, else `checkpoints/lite_robust_offline.digjax`.
# Where AFTER does not exist (the robust arm not exported yet) BEFORE stands in for it and a
# line says so. Photos: the first GrabCut instances when `dig_jax.paths.data_root()` has them,
# else synthetic scenes. `DIG_JAX_QUICK=1` (the test suite's run) takes 2 photos shrunk to a
# long side of 240 px, 20 attack steps, 7 × 7 heatmaps and 5 clicks; the full run 3 photos at
# their own size, the papers' 50 steps, 13 × 13 heatmaps and 20 clicks.

# %%
import os
from pathlib import Path
from typing import Any, NamedTuple

import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle
from scipy import stats

from dig_jax import load_segmenter
from dig_jax.evaluation import segmenter_predictor
from dig_jax.gestures.types import BRUSH_RADIUS
from dig_jax.metrics import ciou_loss, noc
from dig_jax.metrics.breps import breps_metrics, breps_table
from dig_jax.metrics.rclicks import N_GROUPS, iou_auc, rclicks_table
from dig_jax.notebooks import (
    PAPER_ATTACK_STEPS,
    first_instances,
    notebook_attack_steps,
    notebook_checkpoint,
    quick_mode,
)
from dig_jax.paths import (
    CHECKPOINT_DIR,
    checkpoint_name,
    data_root,
    figures_dir,
)
from dig_jax.robustness.breps import (
    BREPS_GAMMA,
    attack_lr,
    box_encoder,
    breps_attack_batch,
    project_box,
)
from dig_jax.robustness.breps.heatmap import box_heatmap, boxes_iou, plot_heatmap
from dig_jax.robustness.breps.prepare import zoom_instance
from dig_jax.robustness.rclicks import BASELINE, map_function, rclicks_ious

QUICK = quick_mode()
STEPS = notebook_attack_steps()
N_INSTANCES = 2 if QUICK else 3
MAX_SIDE = 240 if QUICK else None  # photos at their own size in the full run
SCALES = tuple(np.linspace(0.6, 1.4, 7 if QUICK else 13))  # heatmap: 60 %-140 % of the tight box
N_JITTER = 32 if QUICK else 300  # jittered boxes per instance for the CIoU curve
CLICKS = 5 if QUICK else 20  # RClicks rounds (the paper: 20)
FIGURES = figures_dir()  # results/figures, or DIG_JAX_FIGURES
QUICK_NOTE = f" (quick mode, DIG_JAX_QUICK: the papers' {PAPER_ATTACK_STEPS} steps, 20 clicks)"
print(f"{STEPS} attack steps, {CLICKS} clicks" + (QUICK_NOTE if QUICK else ""))

# %% [markdown]
# ## Models and data

# %%
ROBUST_CHECKPOINT = CHECKPOINT_DIR / "lite_robust_offline.digjax"  # experiments/lite_robust.py
ROBUST_START = CHECKPOINT_DIR / "lite_iterative_offline.digjax"  # the robust arm's init_from
single = os.environ.get("DIG_JAX_CHECKPOINT")
before_path = os.environ.get("DIG_JAX_BEFORE") or single or ROBUST_START
if not single and not os.environ.get("DIG_JAX_BEFORE") and not Path(before_path).is_file():
    before_path = notebook_checkpoint()  # a checkout without it: the shipped default
after_path = os.environ.get("DIG_JAX_AFTER") or single or ROBUST_CHECKPOINT
if not before_path or not Path(before_path).is_file():
    raise FileNotFoundError(
        f"no BEFORE checkpoint ({before_path or 'none shipped'}): set DIG_JAX_BEFORE or "
        "DIG_JAX_CHECKPOINT to an exported segmenter (.digjax)"
    )
if not Path(after_path).is_file():
    print(f"AFTER: {after_path} does not exist yet; BEFORE stands in for it (the two columns "
          "below are the same model)")  # fmt: skip
    after_path = before_path
SAME = Path(before_path).resolve() == Path(after_path).resolve()
if single and not (os.environ.get("DIG_JAX_BEFORE") and os.environ.get("DIG_JAX_AFTER")):
    print(f"DIG_JAX_CHECKPOINT={single} stands in where DIG_JAX_BEFORE / DIG_JAX_AFTER are unset")


class Model(NamedTuple):
    label: str
    seg: Any  # dig_jax.export.LoadedSegmenter
    predict: Any  # x f32[B, S, S, C] -> logits f32[B, S, S] (differentiable, for the attacks)
    encode_box: Any


def load(role: str, path: str | Path) -> Model:
    seg = load_segmenter(path)
    encode = box_encoder(seg.input_kind, seg.config.model.get("context_encoding", "gesture"))
    label = f"{role}: {checkpoint_name(path)}"
    print(f"{label} ({path}, {seg.input_kind}, working size {seg.size})")
    return Model(label, seg, seg.predict_logits_fn(), encode)


models = {"before": load("before", before_path)}
models["after"] = (
    models["before"]._replace(label="after (= before)") if SAME else load("after", after_path)
)


def per_model(fn):
    """{role: fn(role, model)} for "before" and "after"; computed once when both are one file."""
    out = {"before": fn("before", models["before"])}
    out["after"] = out["before"] if SAME else fn("after", models["after"])
    return out


samples, source = first_instances(N_INSTANCES, MAX_SIDE)
print(f"GrabCut: first {len(samples)} photos" if source == "grabcut" else
      f"no GrabCut photos under {data_root()}: synthetic scenes instead")  # fmt: skip
# each instance in the zoom crop `predict` uses for its tight box, at each model's working size
zooms = {m.seg.size: [zoom_instance(img, gt, m.seg.size) for img, gt in samples]
         for m in models.values()}  # fmt: skip

# %% [markdown]
# ## IoU over box perturbation
# Left to right BEFORE and AFTER: the BREPS heatmap (boxes centred on the object, height and
# width 60 %–140 % of the tight box; the model sees each box clipped to the photo). A model made
# robust to box placement should show a wider, smoother plateau.

# %%
heats = per_model(
    lambda _, m: [
        box_heatmap(
            m.predict, m.encode_box, z.image, z.gt, bounds=z.bounds, chunk=32, scales=SCALES
        )
        for z in zooms[m.seg.size]
    ]
)
fig, axes = plt.subplots(len(samples), 2, figsize=(11, 4 * len(samples)), squeeze=False)
for i in range(len(samples)):
    for j, (name, m) in enumerate(models.items()):
        plot_heatmap(heats[name][i], ax=axes[i, j], title=f"{m.label}, instance {i}")
fig.tight_layout()
fig.savefig(FIGURES / "06_robust_heatmaps.png", dpi=90)
plt.show()
for name, m in models.items():
    print(f"{m.label}: largest jump between neighbouring boxes "
          f"{[round(h.jump, 3) for h in heats[name]]} IoU")  # fmt: skip

# %% [markdown]
# Mean IoU against the CIoU loss of the box to the tight box, binned: the heatmap's centred
# boxes plus boxes whose corners are jittered uniformly by up to ±15 % of √(tight-box area)
# (moved, not only resized). The dotted line is the median CIoU loss of real user boxes (the
# BREPS Gamma fit, ≈ 0.18): left of it lies where most people draw.

# %%
BINS = np.array([0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.6, 1.0])  # >= 1: left out


def ciou_points(role: str, m: Model) -> tuple[np.ndarray, np.ndarray]:
    """(CIoU loss to the tight box, IoU) of every heatmap and jittered box of every instance."""
    rng = np.random.default_rng(0)
    losses, ious = [], []
    for z, heat in zip(zooms[m.seg.size], heats[role], strict=True):
        tight = heat.tight
        scale = np.sqrt((tight[2] - tight[0]) * (tight[3] - tight[1]))
        jitter = tight + rng.uniform(-0.15, 0.15, (N_JITTER, 4)).astype(np.float32) * scale
        jitter_iou = boxes_iou(m.predict, m.encode_box, z.image, z.gt, jitter, chunk=32,
                               bounds=z.bounds)  # fmt: skip
        for boxes, iou_values in ((heat.boxes.reshape(-1, 4), heat.ious.ravel()),
                                  (jitter, jitter_iou)):  # fmt: skip
            seen = np.asarray(project_box(jnp.asarray(boxes), jnp.asarray(z.bounds)))
            losses.append(np.asarray(ciou_loss(seen, tight)))
            ious.append(np.asarray(iou_values))
    return np.concatenate(losses), np.concatenate(ious)


points = per_model(ciou_points)
median_ciou = stats.gamma.median(BREPS_GAMMA.shape, scale=BREPS_GAMMA.scale)
fig, ax = plt.subplots(figsize=(6, 4))
for (name, m), style in zip(models.items(), ("o-", "s--"), strict=True):
    loss, value = points[name]
    which = np.digitize(loss, BINS) - 1
    counts = np.bincount(which, minlength=len(BINS) - 1)[: len(BINS) - 1]
    kept = counts >= len(samples)  # at least as many boxes as instances (the tight ones: bin 0)
    means = [value[which == b].mean() for b in np.flatnonzero(kept)]
    ax.plot(((BINS[:-1] + BINS[1:]) / 2)[kept], means, style, label=m.label)
    print(f"{m.label}: boxes per CIoU bin from {BINS[:-1].tolist()}: {counts.tolist()}")
ax.axvline(median_ciou, color="grey", ls=":", label=f"median real box ({median_ciou:.2f})")
ax.set_xlabel("CIoU loss to the tight box (bin centre)")
ax.set_ylabel("mean IoU")
ax.set_ylim(0, 1)
ax.set_title(f"IoU over box perturbation, {source}")
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(FIGURES / "06_robust_iou_vs_ciou.png", dpi=90)
plt.show()

# %% [markdown]
# ## The attack's boxes
# The BREPS attack (Adam on the box coordinates, kept plausible by the realism prior) on each
# instance in its zoom crop, for each model: the tight box (white, dashed), the worst plausible
# box (min, red) and the best (max, green), drawn on the photo. The IoUs are in the crop, as
# notebook 05 reports them (`python -m dig_jax.attack` scores them on the photo).


# %%
def attack(_: str, m: Model) -> tuple[Any, Any]:
    zs = zooms[m.seg.size]
    images, gts = np.stack([z.image for z in zs]), np.stack([z.gt for z in zs])
    kw = dict(
        steps=STEPS,
        encode_box=m.encode_box,
        bounds=np.stack([z.bounds for z in zs]),
        # BREPS's step in photo pixels and the 5 px brush, both scaled into each crop
        lr_px=np.array([attack_lr(*z.shape, 9.0) * z.scale for z in zs]),
        radius=np.array([BRUSH_RADIUS * z.scale for z in zs]),
    )
    worst = breps_attack_batch(m.predict, images, gts, mode="min", **kw)
    best = breps_attack_batch(m.predict, images, gts, mode="max", **kw)
    return worst, best


# one compile of the attack's gradient per model (~8 min for EfficientNet-Lite0 on 2 CPU
# cores), so one cell each: the notebook runner's time limit is per cell
attacks = {"before": attack("before", models["before"])}

# %%
attacks["after"] = attacks["before"] if SAME else attack("after", models["after"])
fig, axes = plt.subplots(len(samples), 2, figsize=(11, 4 * len(samples)), squeeze=False)
for i, (image, gt) in enumerate(samples):
    for j, (name, m) in enumerate(models.items()):
        worst, best = attacks[name]
        z, ax = zooms[m.seg.size][i], axes[i, j]
        ax.imshow(image)
        ax.contour(gt == 1, levels=[0.5], colors="yellow", linewidths=1)
        for box, colour, ls, label in ((worst.box[i], "red", "-", "min"),
                                       (best.box[i], "lime", "-", "max"),
                                       (worst.tight[i], "white", "--", "tight")):  # fmt: skip
            x1, y1, x2, y2 = z.to_photo(np.asarray(box))
            ax.add_patch(Rectangle((x1, y1), x2 - x1, y2 - y1, fill=False, ec=colour, ls=ls, lw=2,
                                   label=label))  # fmt: skip
        ious = [float(v[i]) for v in (worst.iou_tight, worst.iou, best.iou)]
        ax.set_title(f"{m.label}\ntight {ious[0]:.2f} · min {ious[1]:.2f} · max {ious[2]:.2f}",
                     fontsize=9)  # fmt: skip
        ax.set_axis_off()
fig.tight_layout()
axes[0, 0].legend(fontsize=7, loc="lower right")
fig.savefig(FIGURES / "06_robust_attack_boxes.png", dpi=90)
plt.show()

rows = {(source, m.label): breps_metrics(attacks[n][0].iou_tight, attacks[n][0].iou,
                                         attacks[n][1].iou) for n, m in models.items()}  # fmt: skip
print(breps_table(rows))
before_m, after_m = rows.values()
keys = ("iou_tight", "iou_min", "iou_max", "iou_delta")
print("after − before: " + ", ".join(f"{k} {after_m[k] - before_m[k]:+.3f}" for k in keys))

# %% [markdown]
# ## Clicking groups
# The RClicks protocol (as notebook 04, `python -m dig_jax.rclicks`) on the same photos: one
# click trajectory per clicking group G1..G10 of the DT clickability map (G1 the least likely
# tenth of the click mass, G10 the most likely) plus the baseline clicker; same seed for both
# models. Left: mean NoC@85 per group (the dashed lines are the baseline clicker's); right: the
# mean IoU-AUC per group, which still separates the models when no trajectory reaches 85 %.

# %%
_, dt_fn = map_function("dt")
items = [(image, gt) for image, gt in samples]
runs = per_model(
    lambda _, m: rclicks_ious(
        segmenter_predictor(m.seg, batch_size=8), items, dt_fn, seed=0, max_clicks=CLICKS
    )
)
groups = np.arange(1, N_GROUPS + 1)
fig, (ax_noc, ax_auc) = plt.subplots(1, 2, figsize=(12, 4))
for (name, m), (colour, marker) in zip(models.items(), (("C0", "o"), ("C1", "s")), strict=True):
    counts = noc(runs[name].ious, thresholds=(0.85,), max_interactions=CLICKS)["noc"][..., 0]
    mean_noc = counts.mean(axis=0)  # [11]: G1..G10, baseline
    ax_noc.plot(groups, mean_noc[:N_GROUPS], f"{marker}-", color=colour, label=m.label)
    ax_noc.axhline(mean_noc[BASELINE], color=colour, ls="--", lw=1)
    auc = iou_auc(runs[name].ious).mean(axis=0)
    ax_auc.plot(groups, auc[:N_GROUPS], f"{marker}-", color=colour, label=m.label)
    ax_auc.axhline(auc[BASELINE], color=colour, ls="--", lw=1)
for ax, ylabel in ((ax_noc, f"mean NoC@85 (max {CLICKS})"), (ax_auc, "mean IoU-AUC")):
    ax.set_xticks(groups, [f"G{g}" for g in groups])
    ax.set_xlabel("clicking group")
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)
ax_noc.set_title(f"{source}: {len(items)} instances, {CLICKS} clicks")
ax_auc.set_title("dashed: baseline clicker")
fig.tight_layout()
fig.savefig(FIGURES / "06_robust_groups.png", dpi=90)
plt.show()
print(rclicks_table({m.label: runs[n].tally().compute() for n, m in models.items()},
                    threshold=0.85, max_clicks=CLICKS))  # fmt: skip
