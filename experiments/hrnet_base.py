"""HRNet-base: the gesture-agnostic HRNet-18s segmenter (DIG), single head, no multi-region aug.

Usage: python -m dig_jax.train --config experiments/hrnet_base.py:demo --workdir workdirs/x
Variants: paper (512², batch 32, 15 epochs on the DIG release), offline (../shared/data),
demo (embedded procedural scenes, minutes on a laptop CPU), tiny (tests).
"""

from __future__ import annotations

import ml_collections

from dig_jax.train.config import base_config


def get_config(arg: str = "demo") -> ml_collections.ConfigDict:
    return base_config(arg or "demo")
