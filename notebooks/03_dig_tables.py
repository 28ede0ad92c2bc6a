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
# # 03 — DIG tables: the shipped models beside the peers and the paper
#
# The DIG paper's tables from the results of `python -m dig_jax.evaluate` (its `metrics.json`):
# creation and refinement per gesture kind with RICE and IoU against the local and the global
# ground truth (cf. DIG Tables 2, 6, 8), multi-region samples (Table 5) and the iterative
# protocol NoG / NoF at 80 / 85 / 90 % IoU from scratch and from a prior, per kind and "mixed"
# (Table 7), with a qualitative figure (each gesture kind → each predictor's mask).
#
# Results: the folder named by `DIG_JAX_RESULTS` (what `make evaluate` writes, e.g.
# `results/eval`). Without it the notebook evaluates the shipped checkpoint (or the segmenter
# named by `DIG_JAX_CHECKPOINT`: the test suite's tiny random one) and the filled-gesture peer
# on a tiny subset itself (2 photos, NoG capped at 5 gestures), so that it runs anywhere in a
# minute or two — those numbers only show the layout, not the models' quality.
#
# What differs from the paper's protocol: DIG trains and tests on COCO + LVIS at 512 px; here
# the shipped models are trained offline on COCO-MVal + BSDS500 regions (see
# `checkpoints/README.md`) and tested on GrabCut and Berkeley at each photo's own resolution
# through `predict`'s zoom-in, with gestures simulated by `dig_jax.gestures` (seeded).

# %%
import json
import os
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
from IPython.display import Markdown, display

from dig_jax.evaluate import main as evaluate
from dig_jax.evaluation import evaluation_samples
from dig_jax.evaluation.gallery import save_prediction_gallery
from dig_jax.evaluation.peers import peer_predictor
from dig_jax.evaluation.protocol import load_dataset
from dig_jax.evaluation.tables import all_tables, kind_table, nog_table
from dig_jax.notebooks import notebook_checkpoint
from dig_jax.paths import checkpoint_name, has_data

# %% [markdown]
# ## Results

# %%
results_dir = os.environ.get("DIG_JAX_RESULTS")
if results_dir and (Path(results_dir) / "metrics.json").is_file():
    print(f"results: {results_dir}")
else:
    results_dir = tempfile.mkdtemp(prefix="dig_tables_")
    dataset = "grabcut[0:2]" if has_data("grabcut") else "procedural:2:7"
    checkpoint = notebook_checkpoint()
    predictors = ",".join([str(checkpoint)] * (checkpoint is not None) + ["filled"])
    argv = ["--predictor", predictors, "--datasets", dataset, "--out", results_dir,
            "--modes", "creation,refinement,multi_region", "--nog-kinds", "click,mixed",
            "--nog-starts", "scratch,prior", "--nog-max", "5"]  # fmt: skip
    assert evaluate(argv) == 0
    print(f"evaluated {predictors} on {dataset} (tiny subset) into {results_dir}")
payload = json.loads((Path(results_dir) / "metrics.json").read_text())
results = payload["results"]
print("predictors:", ", ".join(results), "| skipped items:", len(payload["skipped"]))

# %% [markdown]
# ## Creation and refinement per gesture kind (cf. DIG Tables 2, 6, 8)
# RICE = IoU in creation; in refinement RICE measures how much of the possible change (gain or
# loss) relative to the previous mask was realised. Local GT: creation — the targeted part;
# refinement — the previous mask with only the targeted error corrected. Global GT: the whole
# region. The paper's row is DIG Table 2, HRNet-dataAug (RICE, creation, COCO + LVIS at 512 px).

# %%
PAPER_CREATION = {"click": 0.548, "scribble": 0.586, "loose_lasso": 0.675,
                  "tight_lasso": 0.784, "rectangle": 0.607}  # fmt: skip
paper = ("| DIG paper (Table 2) | HRNet-dataAug | "
         + " | ".join(f"{v:.3f}" for v in PAPER_CREATION.values()) + " | – | – |")  # fmt: skip
display(Markdown(kind_table(results, "rice_local", "create") + "\n" + paper))
for phase in ("refine",):
    for score in ("rice_local", "rice_global", "iou_global"):
        display(Markdown(kind_table(results, score, phase)))

# %% [markdown]
# ## Multi-region samples (cf. DIG Table 5)
# A creation gesture while the previous mask already holds another region that must be kept
# (what dataAug trains for). Empty when no photo of the set has two disjoint regions (GrabCut
# and COCO-MVal have one object per photo; Berkeley has a few pairs).

# %%
display(Markdown(kind_table(results, "rice_local", "multi") or "no multi-region samples here"))

# %% [markdown]
# ## Iterative protocol (cf. DIG Table 7)
# Gestures until IoU ≥ t; each aims at the largest error of the current mask; "mixed" is a tight
# lasso, then clicks; from a prior the first gesture already refines a synthetic previous mask.

# %%
for t in (80, 85, 90):
    display(Markdown(nog_table(results, t) or "no iterative results"))

# %% [markdown]
# ## Everything, as `tables.md` holds it

# %%
text = all_tables(results)
assert text + "\n" == (Path(results_dir) / "tables.md").read_text()
print(text[:600], "...")

# %% [markdown]
# ## Qualitative: each gesture kind, each predictor

# %%
spec = next(iter(payload["evals"]["dig"]["datasets"])) if "dig" in payload["evals"] else None
spec = spec or ("grabcut[0:2]" if has_data("grabcut") else "procedural:2:7")
samples = list(evaluation_samples(load_dataset(spec)[:2], modes=("creation",)))
checkpoint = notebook_checkpoint()
figure_predictors = {"filled": peer_predictor("filled")}
if checkpoint is not None:
    from dig_jax import load_segmenter
    from dig_jax.evaluation import segmenter_predictor

    model = segmenter_predictor(load_segmenter(checkpoint))
    figure_predictors = {checkpoint_name(checkpoint): model, **figure_predictors}
path = save_prediction_gallery(samples, figure_predictors, Path(results_dir) / "qualitative.png",
                               photos=2)  # fmt: skip
plt.figure(figsize=(14, 8))
plt.imshow(plt.imread(path))
plt.axis("off")
plt.show()
