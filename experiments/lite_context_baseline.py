"""Context baseline on EfficientNet-Lite0: a click-model-style segmenter told add/remove.

The input separates positive and negative prompts (RGB | positive disks | negative disks | box |
previous mask), as the DIG paper adapts click models; trained with the true context, gestures
encoded as their skeleton clicks (radius-5 disks) and rectangles as a box map, so that at test
time the positive / negative / random context strategies run on the same network. Backbone,
decoder, zoom-in crops and data as `lite_dataaug` (without multi-region augmentation, like the
paper's adapted baselines). Not trained yet on this machine (no CPU time was left after the
gesture-agnostic model); `dig_jax.paths.shipped_checkpoint("context")` falls back to the HRNet-18s
`checkpoints/context_baseline_offline.digjax` until `lite_context_baseline_offline.digjax` exists.
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
