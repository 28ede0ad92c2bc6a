"""HRNet-multiHead: HRNet-base plus context (add/remove) and gesture-kind heads.

The heads (1x1 conv 96 -> 48, max-pool to 32x32, MLPs 1024 -> 512 -> out in the paper;
smaller in demo/tiny) are trained jointly with BCE (context) and cross-entropy (kind).
Variants: paper, offline, demo (default), tiny.
"""

from __future__ import annotations

import ml_collections

from dig_jax.train.config import base_config, with_multihead


def get_config(arg: str = "demo") -> ml_collections.ConfigDict:
    config = with_multihead(base_config(arg or "demo"))
    return config
