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
# # 04 — RClicks: realistic clicks, clicking groups and robustness
#
# Interactive benchmarks click the centre of the largest error; people do not. RClicks
# (Antonov et al., NeurIPS 2024) replaces that click by one drawn from a *clickability map*
# (the probability that a person clicks each pixel), split into ten *clicking groups* G1..G10
# by probability mass, and asks how much a model's annotation cost changes between them.
# This notebook shows the weight-free maps (UD, DT, SM), the groups, the baseline clicker, the
# 20-click protocol on a tiny subset with the shipped checkpoint, the metrics table, and a
# learned clickability model trained on clicks drawn from a known map.
#
# Photos: the first GrabCut instances when `dig_jax.paths.data_root()` holds them, else
# procedural scenes. Model: the segmenter named by `DIG_JAX_CHECKPOINT` (the test suite's tiny
# random one), else the shipped one (`checkpoints/lite_iterative_offline_long3x.digjax` when
# present, else `checkpoints/hrnet_dataaug_offline.digjax`), else a transparent disc stand-in.

# %%
import time
from pathlib import Path

import jax
import matplotlib.pyplot as plt
import numpy as np

import dig_jax
from dig_jax.evaluation import SkipLog, segmenter_predictor
from dig_jax.evaluation.protocol import load_dataset, nog_items
from dig_jax.metrics.rclicks import rclicks_table
from dig_jax.notebooks import notebook_checkpoint, quick_mode
from dig_jax.paths import checkpoint_name, has_data
from dig_jax.robustness.rclicks import (
    BASELINE,
    baseline_click,
    clickability_map,
    group_labels,
    group_masses,
    map_function,
    map_scores,
    rclicks_ious,
    sample_clicks,
    target_map,
    train_clickability,
)
from dig_jax.robustness.rclicks.figures import groups_figure
from dig_jax.robustness.rclicks.train import TrainingExample

N_INSTANCES, MAX_SIDE = 2, 240  # a tiny subset
CLICKS = 5 if quick_mode() else 10  # the CLI runs 20; 5 in DIG_JAX_QUICK runs (tests)
ROOT = Path(dig_jax.__file__).resolve().parents[1]
spec = "grabcut" if has_data("grabcut") else "procedural:4"
items = nog_items(load_dataset(spec, size=240), MAX_SIDE, SkipLog())[:N_INSTANCES]
print(f"{spec}: {len(items)} instances, photo sizes {[it[0].shape[:2] for it in items]}")

# %% [markdown]
# ## Clickability maps for the first click
# Before the first click the error is the whole target. UD is uniform over it, DT follows the
# distance to its boundary (one pixel of padding, as the baseline clicker), SM is
# spectral-residual saliency of the target's enlarged box with the background greyed out.

# %%
image, gt, _ = items[0]
target = (gt == 1).astype(np.uint8)
maps = {kind: clickability_map(kind, image, target, gt == 1) for kind in ("ud", "dt", "sm")}
fig, axes = plt.subplots(1, 4, figsize=(16, 3.6))
axes[0].imshow(image)
axes[0].set_title("photo")
for ax, (kind, m) in zip(axes[1:], maps.items(), strict=True):
    ax.imshow(np.ma.masked_where(m <= 0, m), cmap="inferno", vmin=0)
    ax.set_title(f"{kind.upper()} map")
for ax in axes:
    ax.set_axis_off()
plt.show()

# %% [markdown]
# ## Clicking groups
# Sort the pixel probabilities, cut the cumulative mass at 10 % steps: G1 holds the least
# likely tenth of the mass (the rim of the object for DT), G10 the most likely (its centre).

# %%
dt = maps["dt"]
print("mass per group:", np.round(group_masses(dt), 4))
print("pixels per group:", np.bincount(group_labels(dt).ravel(), minlength=11)[1:])
key = jax.random.key(0)
g_clicks = {g: np.asarray(sample_clicks(key, np.where(group_labels(dt) == g, dt, 0), n=8)[0])
            for g in (1, 10)}  # fmt: skip
groups_figure(image, dt, gt=gt, clicks=g_clicks, title="DT map, first click")
plt.show()

# %% [markdown]
# Sampling follows the map: 20,000 clicks drawn ∝ the DT map fall into each group with
# frequency ≈ 10 %.

# %%
pts, _ = sample_clicks(jax.random.key(1), dt, n=20_000)
pts = np.asarray(pts).astype(int)
labels = group_labels(dt)
share = np.bincount(labels[pts[:, 1], pts[:, 0]], minlength=11)[1:] / len(pts)
print("share of sampled clicks per group:", np.round(share, 3))

# %% [markdown]
# ## The baseline clicker
# Pad FN and FP by one pixel, Euclidean distance transform, click the maximum; positive iff the
# FN maximum is larger. Before any prediction it is the centre of the target.

# %%
click = baseline_click(np.zeros_like(target), gt)
print(f"baseline first click: x={click.x:.0f}, y={click.y:.0f}, positive={click.positive}")

# %% [markdown]
# ## The multi-round protocol on a tiny subset (20 clicks in `python -m dig_jax.rclicks`)
# One trajectory per group (each click drawn from its group of the DT map of the current
# error) plus the baseline trajectory; every click is a CLICK gesture with the current mask as
# the previous mask. All trajectories of a round go to the model in one call.

# %%
checkpoint = notebook_checkpoint()
if checkpoint is not None:
    predict = segmenter_predictor(dig_jax.load_segmenter(checkpoint), batch_size=8)
    label = checkpoint_name(checkpoint)
else:  # a transparent stand-in: add / remove a 12 px disc at the click

    def predict(samples):
        out = []
        for s in samples:
            ys, xs = np.nonzero(s["gesture"])
            yy, xx = np.mgrid[: s["gesture"].shape[0], : s["gesture"].shape[1]]
            d = (yy - ys.mean()) ** 2 + (xx - xs.mean()) ** 2 <= 144
            prev = (s["prev_mask"] > 0) & bool(s["has_prev"])
            out.append((prev | d if s["context"] == 1 else prev & ~d).astype(np.uint8))
        return out

    label = "disc stand-in"
_, dt_fn = map_function("dt")
start = time.perf_counter()
run = rclicks_ious(predict, items, dt_fn, seed=0, max_clicks=CLICKS)
print(f"{label}: {len(items)} instances x 11 trajectories x {CLICKS} clicks "
      f"in {time.perf_counter() - start:.1f} s")  # fmt: skip
mean = run.ious.mean(axis=0)
for t, name in ((0, "G1"), (9, "G10"), (BASELINE, "baseline")):
    plt.plot(np.arange(1, CLICKS + 1), mean[t], label=name)
plt.xlabel("clicks")
plt.ylabel("mean IoU")
plt.legend()
plt.title(f"{label} on {spec}")
plt.show()
print(rclicks_table({spec: run.tally().compute()}))

# %% [markdown]
# ## A learned clickability model
# RClicks trains a network (image + target + error in, softmax over pixels out) with a KL loss
# against target maps built from recorded clicks: a Gaussian per click (σ scaled to the image
# diagonal) times the blurred error. No recorded clicks exist here, so they are drawn from a
# known map — people click bright pixels of the error — and the model should recover it.
# Scores against held-out "recorded" clicks: NSS ↑, PL1 ↓, KS ↑, WD ↓.


# %%
def toy_scene(rng, n=48):
    yy, xx = np.mgrid[:n, :n] / (n - 1)
    light = [xx, 1 - xx, yy, 1 - yy][rng.integers(4)]
    photo = np.clip(light[..., None] * 200 + 30 + rng.normal(0, 6, (n, n, 3)), 0, 255)
    error = np.zeros((n, n), bool)
    y0, x0 = rng.integers(0, n // 2, 2)
    h, w = rng.integers(n // 4, n // 2, 2)
    error[y0 : y0 + h, x0 : x0 + w] = True
    known = error * np.exp(6 * light)
    return photo.astype(np.uint8), error, (known / known.sum()).astype(np.float32)


rng = np.random.default_rng(0)
examples = []
for k in range(48):
    photo, error, known = toy_scene(rng)
    xy = np.asarray(sample_clicks(jax.random.key(k), known, n=30)[0])
    examples.append(TrainingExample(photo, error, error, target_map(xy[:, 0], xy[:, 1], error)))
cm, losses = train_clickability(
    examples, jax.random.key(0), steps=200, batch_size=16, lr=1e-2, size=32, features=(8,)
)
print(f"KL loss: {losses[:10].mean():.3f} -> {losses[-10:].mean():.3f}")
photo, error, known = toy_scene(rng)
xy = np.asarray(sample_clicks(jax.random.key(99), known, n=30)[0])
box = (int(error.any(0).sum()), int(error.any(1).sum()))
candidates = {
    "UD": clickability_map("ud", photo, error, error),
    "DT": clickability_map("dt", photo, error, error),
    "CM (learned)": cm.predict_map(photo, error, error),
    "known": known,
}
for name, m in candidates.items():
    s = map_scores(m, xy[:, 0], xy[:, 1], box, np.random.default_rng(0), n_boot=20)
    print(f"{name:>13}: " + ", ".join(f"{k} {v:.3f}" for k, v in s.items()))
fig, axes = plt.subplots(1, 4, figsize=(13, 3.2))
for ax, (name, m) in zip(axes, candidates.items(), strict=True):
    ax.imshow(photo)
    ax.imshow(np.ma.masked_where(m <= 0, m), cmap="inferno", alpha=0.8, vmin=0)
    ax.scatter(xy[:, 0], xy[:, 1], s=6, c="cyan")
    ax.set_title(name)
    ax.set_axis_off()
plt.show()
