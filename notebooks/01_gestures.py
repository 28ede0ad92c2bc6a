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
# # Gestures: simulation, three rasterisers, timing
#
# Five gesture kinds (click, scribble, loose lasso, tight lasso, rectangle) simulated as in the
# DIG dataset, drawn with a radius-5 disc brush by a numpy reference, a batched `jnp` rasteriser
# and a soft differentiable one. The gallery needs the real photos (`DIG_JAX_DATA`, default
# `../shared/data`); everything else runs without them.

# %%
from pathlib import Path

import jax
import matplotlib.pyplot as plt
import numpy as np

import dig_jax
from dig_jax.gestures import (
    GestureKind,
    pad_gestures,
    rasterize,
    rasterize_batch,
    simulate_creation,
    soft_rasterize,
)
from dig_jax.notebooks import quick_mode
from dig_jax.paths import data_root, figures_dir, has_data

ROOT = Path(dig_jax.__file__).resolve().parents[1]
FIGURES = figures_dir()

# %% [markdown]
# ## The three rasterisers on one synthetic target

# %%
target = np.zeros((96, 96), np.uint8)
yy, xx = np.mgrid[:96, :96]
target[((yy - 50) / 30) ** 2 + ((xx - 45) / 22) ** 2 <= 1] = 1
rng = np.random.default_rng(0)
gestures = [simulate_creation(kind, target, rng) for kind in GestureKind]
reference = np.stack([rasterize(g, target.shape) for g in gestures])
batched = np.asarray(rasterize_batch(*pad_gestures(gestures), target.shape))
print("numpy reference == batched jnp:", bool((reference == batched).all()))

g = gestures[GestureKind.SCRIBBLE]
# jitted: one compile, not one per operation
soft = jax.jit(soft_rasterize, static_argnums=3)(g.points, len(g.points), g.closed, target.shape)
fig, axes = plt.subplots(1, 6, figsize=(18, 3))
for ax, kind, m in zip(axes, GestureKind, reference, strict=False):
    ax.imshow(target, cmap="gray", vmax=3)
    ax.imshow(np.ma.masked_equal(m, 0), cmap="spring", alpha=0.8)
    ax.set_title(kind.name)
    ax.set_axis_off()
axes[-1].imshow(soft, cmap="magma")
axes[-1].set_title("soft scribble (T = 0.5)")
axes[-1].set_axis_off()
plt.show()

# %% [markdown]
# ## Gallery on real photos
# Row 1: creation (target outlined in green). Rows 2-3: refinement of a corrupted previous mask
# (blue) aimed at its error component (yellow), ADD then REMOVE. Gestures in magenta.

# %%
if has_data("grabcut"):
    from IPython.display import Image, display

    from dig_jax.gestures.gallery import save_gallery

    path = save_gallery(FIGURES / "gestures_gallery.png", data_root(), np.random.default_rng(0))
    print("saved", path)
    display(Image(filename=str(path)))
else:
    print(f"real data not found at {data_root()}: gallery skipped (set DIG_JAX_DATA)")

# %% [markdown]
# ## Timing: simulation + rasterisation at 512x512 per gesture
# numpy path one gesture at a time, `jnp` path in a batch of 256 (after warm-up), against the
# DIG authors' CPU figures. `benchmarks/gestures.py` without `--quick` gives steadier numbers.
# `DIG_JAX_QUICK=1` (the test suite's run): the `jnp` path on 16 gestures per kind, every kind
# padded to 2048 points (one compile for all five), so its column is a smoke check, not a timing.

# %%
import runpy  # noqa: E402

bench = runpy.run_path(str(ROOT / "benchmarks" / "gestures.py"), run_name="gestures_bench")
bench["main"](["--quick", *(["--jnp-batch", "16", "--jnp-points", "2048"] * quick_mode())])
