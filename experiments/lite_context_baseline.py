"""Context baseline on EfficientNet-Lite0: a click-model-style segmenter told add/remove.

The input separates positive and negative prompts (RGB | positive disks | negative disks | box |
previous mask), as the DIG paper adapts click models; trained with the true context, gestures
encoded as their skeleton clicks (radius-5 disks) and rectangles as a box map, so that at test
time the positive / negative / random context strategies run on the same network. Backbone,
decoder, zoom-in crops and data as `lite_dataaug` (without multi-region augmentation, like the
paper's adapted baselines). The shipped `checkpoints/lite_context_baseline_offline.digjax` is
this config's `offline` variant with `--config.total_steps=2500` (a short run).
Variants: paper, offline, demo (default), tiny (raw gesture maps instead of skeleton clicks).
"""

from __future__ import annotations

import ml_collections

from dig_jax.train.config import base_config, with_lite_backbone


def get_config(arg: str = "demo") -> ml_collections.ConfigDict:
    config = with_lite_backbone(base_config(arg or "demo"))
    config.model.input_kind = "context"
    config.model.context_encoding = "gesture" if config.variant == "tiny" else "clicks"
    return config
