"""Context baseline: a click-model-style HRNet-18s whose input separates positive and negative
prompts (RGB | positive disks | negative disks | box | previous mask), as the DIG paper adapts
click models. Trained with the true context; gestures are encoded as their skeleton clicks
(`dig_jax.gestures.to_clicks`, radius-5 disks) and rectangles as a box map, so at test time the
positive / negative / random context strategies can be run on the same network.

Variants: paper, offline, demo (default), tiny (raw gesture maps instead of skeleton clicks,
which keeps the test input pipeline cheap).
"""

from __future__ import annotations

import ml_collections

from dig_jax.train.config import base_config


def get_config(arg: str = "demo") -> ml_collections.ConfigDict:
    config = base_config(arg or "demo")
    config.model.input_kind = "context"
    config.model.context_encoding = "gesture" if config.variant == "tiny" else "clicks"
    return config
