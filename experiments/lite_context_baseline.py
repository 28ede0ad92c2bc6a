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

`offline_long` is the context side of the default's second fine-tune
(`experiments/lite_iterative.py:offline_long`): from `lite_context_real_offline`, the same 4000
steps with the same schedule, iterative sampling, leaky priors (the leak's REMOVE gesture told
as remove) and inference settings (`checkpoints/lite_context_long_offline.digjax`, about 64
min; the comparison with the default is in docs/model_quality.md).

`offline_long3x` is the context side of the shipped default (`lite_iterative.py:offline_long3x`):
`offline_long` for the same 12,000 steps.

`offline_real9k` and `offline_long3x9k` are `offline_real` and `offline_long3x` from a start
trained as long as the default's: this config's `offline` variant at its own 9000 steps (the
recipe of `lite_dataaug:offline`, whose 9000 steps start the default), exported as
`checkpoints/lite_context_baseline_offline9k.digjax`; `offline_long3x9k` continues
`offline_real9k`'s export, `checkpoints/lite_context_real9k_offline.digjax`. The chain then
matches the default's whole budget, 9000 + 2400 + 12,000 steps.
Variants: paper, offline, offline_real, offline_long, offline_long3x, offline_real9k,
offline_long3x9k, demo (default), tiny (raw gesture maps instead of skeleton clicks).
"""

from __future__ import annotations

import ml_collections

from dig_jax.paths import CHECKPOINT_DIR
from dig_jax.train.config import (
    base_config,
    with_lite_backbone,
    with_long_fine_tune,
    with_real_fine_tune,
)

# The start each fine-tune continues: (first, second) exported checkpoints.
STARTS = {
    "": ("lite_context_baseline_offline", "lite_context_real_offline"),  # a 2500-step start
    "9k": ("lite_context_baseline_offline9k", "lite_context_real9k_offline"),  # the default's 9000
}
FINE_TUNES = (
    "offline_real",
    "offline_long",
    "offline_long3x",
    "offline_real9k",
    "offline_long3x9k",
)


def get_config(arg: str = "demo") -> ml_collections.ConfigDict:
    arg = arg or "demo"
    config = with_lite_backbone(base_config("offline" if arg in FINE_TUNES else arg))
    config.model.input_kind = "context"
    config.model.context_encoding = "gesture" if config.variant == "tiny" else "clicks"
    if arg in FINE_TUNES:
        first, second = STARTS["9k" if arg.endswith("9k") else ""]
        stage = arg.removesuffix("9k")
        if stage == "offline_real":  # the default's fine-tune, on the context network
            with_real_fine_tune(config, str(CHECKPOINT_DIR / f"{first}.digjax"))
        else:  # the default's second fine-tune, on it
            with_long_fine_tune(
                config,
                str(CHECKPOINT_DIR / f"{second}.digjax"),
                steps=12_000 if stage == "offline_long3x" else 4000,
            )
    return config
