"""The shipped default: DIG dataAug on EfficientNet-Lite0, trained on every real source with
iterative sampling (the model's own masks as previous masks, `dig_jax.train.iterative`).

`offline` fine-tunes `checkpoints/lite_dataaug_offline.digjax` (9000 steps on coco_mval +
BSDS500 + procedural scenes) on coco_mval 9/10, BSDS500 regions, Clothing Co-Parsing 9/10,
CamVid train, feral cats train and procedural scenes (docs/data.md), with half of the batches
run through the current model 1-3 times first (2400 steps of batch 8 at 224²). Validation: the
held-out slice of each real source. Variants: offline, demo (default: procedural scenes, a few
minutes), tiny (tests).
"""

from __future__ import annotations

import ml_collections

from dig_jax.paths import CHECKPOINT_DIR
from dig_jax.train.config import base_config, with_lite_backbone, with_real_fine_tune


def get_config(arg: str = "demo") -> ml_collections.ConfigDict:
    config = with_lite_backbone(base_config(arg or "demo"))
    config.data.multi_region_prob = 0.2
    config.iterative.prob = 0.5
    config.data.focus_prob = 0.5  # creation clicks cropped as the focus pass sees them
    if config.variant == "offline":  # the shipped run's budget (checkpoints/README.md)
        with_real_fine_tune(config, str(CHECKPOINT_DIR / "lite_dataaug_offline.digjax"))
    return config
