"""Robust-prompt fine-tune ablation (issue 40): the shipped default fine-tuned further with and
without realistic and adversarial prompts in the training loop (`dig_jax.train.robust`).

Both arms start from `checkpoints/lite_iterative_offline.digjax` and run the same steps on the
same data stream (same seed; the robust draws use their own generator, seeded by step), with
iterative sampling that aims a third of the corrections with clicks. They differ only in
`config.robust`:

- `offline`: robust prompts on: a share of the rectangles drawn from the BREPS realism prior,
  a share attacked inside the loop (a few BREPS steps against the current parameters), a share
  of the clicks drawn by clicking group from a clickability map, a share of the lassos and
  scribbles jittered by the prompt attack;
- `offline_plain`: robust prompts off (the ablation's control).

Variants demo and tiny (tests) have the robust prompts on.
"""

from __future__ import annotations

import ml_collections

from dig_jax.paths import CHECKPOINT_DIR
from dig_jax.train.config import (
    REAL_HELD_OUT,
    REAL_TRAIN_SOURCES,
    base_config,
    with_lite_backbone,
)

TRAIN_SOURCES = REAL_TRAIN_SOURCES
HELD_OUT = REAL_HELD_OUT
FINE_TUNE_STEPS = 900


def robust_config(on: bool) -> ml_collections.ConfigDict:
    """`config.robust` (all shares zero when `on` is False)."""
    share = 1.0 if on else 0.0
    return ml_collections.ConfigDict(
        dict(
            box_prior_prob=0.5 * share,  # rectangle creations: box drawn from the BREPS prior
            box_attack_prob=0.5 * share,  # batches whose rectangles are attacked in the loop
            attack_steps=3,
            attack_lam=0.1,
            attack_lr_mult=9.0,
            click_group_prob=0.5 * share,  # clicks drawn by clicking group
            stroke_attack_prob=0.25 * share,  # batches whose lassos/scribbles are attacked
        )
    )


def get_config(arg: str = "demo") -> ml_collections.ConfigDict:
    arg = arg or "demo"
    plain = arg.endswith("_plain")
    config = with_lite_backbone(base_config(arg.removesuffix("_plain")))
    config.data.multi_region_prob = 0.2
    config.data.focus_prob = 0.5
    config.iterative.prob = 0.6
    config.iterative.max_steps = 4
    config.iterative.kinds = (0, 0, 1, 2, 3, 4)  # clicks aim a third of the corrections
    if config.variant == "offline":
        config.init_from = str(CHECKPOINT_DIR / "lite_iterative_offline.digjax")
        config.data.sources = TRAIN_SOURCES
        config.data.val_sources = HELD_OUT
        config.total_steps = FINE_TUNE_STEPS
        config.optim.lr = 2e-4
        config.optim.warmup_steps = 50
        config.checkpoint.save_every = 150
        config.evals.dig.datasets = HELD_OUT
        config.evals.nog.datasets = HELD_OUT
        config.evals.nog.kinds = ("click", "tight_lasso", "mixed")
        config.predict = ml_collections.ConfigDict(dict(focus_pass=True))
    if not plain:
        config.robust = robust_config(True)
    return config
