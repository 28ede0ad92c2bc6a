"""HRNet-dataAug: HRNet-base trained with multi-region augmentation (p = 0.2).

Usage: python -m dig_jax.train --config experiments/hrnet_dataaug.py:demo --workdir workdirs/x
Variants: paper, offline, demo (default; `make train`), tiny.
"""

from __future__ import annotations

import ml_collections

from dig_jax.train.config import base_config


def get_config(arg: str = "demo") -> ml_collections.ConfigDict:
    config = base_config(arg or "demo")
    config.data.multi_region_prob = 0.2
    return config
