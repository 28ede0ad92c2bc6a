"""HRNet-multiHeadAug: the multi-head model trained with multi-region augmentation (p = 0.2).

Variants: paper, offline, demo (default), tiny.
"""

from __future__ import annotations

import ml_collections

from dig_jax.train.config import base_config, with_multihead


def get_config(arg: str = "demo") -> ml_collections.ConfigDict:
    config = with_multihead(base_config(arg or "demo"))
    config.data.multi_region_prob = 0.2
    return config
