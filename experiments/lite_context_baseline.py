"""Context baseline on EfficientNet-Lite0: a click-model-style segmenter told add/remove.

The input separates positive and negative prompts (RGB | positive disks | negative disks | box |
previous mask), as the DIG paper adapts click models; trained with the true context, gestures
encoded as their skeleton clicks (radius-5 disks) and rectangles as a box map, so that at test
time the positive / negative / random context strategies run on the same network. Backbone,
decoder, zoom-in crops and data as `lite_dataaug` (without multi-region augmentation, like the
paper's adapted baselines). The shipped `checkpoints/lite_context_baseline_offline.digjax` is
this config's `offline` variant with `--config.total_steps=2500` (a short run).

`offline_real` is the context side of the shipped default's fine-tune
(`experiments/lite_iterative.py:offline`): from `lite_context_baseline_offline`, the same 2400
steps on the same real sources with the same iterative sampling, focus crops, schedule and
held-out validation, so that the gesture-agnostic vs. context comparison sees the same data and
fine-tune budget (the two starting points were trained 9000 and 2500 steps).
Variants: paper, offline, offline_real, demo (default), tiny (raw gesture maps instead of
skeleton clicks).
"""

from __future__ import annotations

import ml_collections

from dig_jax.paths import CHECKPOINT_DIR
from dig_jax.train.config import REAL_HELD_OUT, REAL_TRAIN_SOURCES, base_config, with_lite_backbone


def get_config(arg: str = "demo") -> ml_collections.ConfigDict:
    arg = arg or "demo"
    real = arg == "offline_real"
    config = with_lite_backbone(base_config(arg.removesuffix("_real")))
    config.model.input_kind = "context"
    config.model.context_encoding = "gesture" if config.variant == "tiny" else "clicks"
    if real:  # as lite_iterative.py:offline, on the context network
        config.init_from = str(CHECKPOINT_DIR / "lite_context_baseline_offline.digjax")
        config.data.sources = REAL_TRAIN_SOURCES
        config.data.val_sources = REAL_HELD_OUT
        config.data.focus_prob = 0.5
        config.iterative.prob = 0.5
        config.total_steps = 2400
        config.optim.lr = 5e-4
        config.optim.warmup_steps = 200
        config.evals.dig.datasets = REAL_HELD_OUT
        config.evals.nog.datasets = REAL_HELD_OUT
        config.evals.nog.kinds = ("click", "tight_lasso", "mixed")
        config.predict = ml_collections.ConfigDict(dict(focus_pass=True))
    return config
