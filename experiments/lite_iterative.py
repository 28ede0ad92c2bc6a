"""The shipped default (`offline_long3x`), its 4000-step predecessor (`offline_long`) and their
start (`offline`): DIG dataAug on EfficientNet-Lite0, trained on every real source with
iterative sampling (the model's own masks as previous masks, `dig_jax.train.iterative`).

`offline` fine-tunes `checkpoints/lite_dataaug_offline.digjax` (9000 steps on coco_mval +
BSDS500 + procedural scenes) on coco_mval 9/10, BSDS500 regions, Clothing Co-Parsing 9/10,
CamVid train, feral cats train and procedural scenes (docs/data.md), with half of the batches
run through the current model 1-3 times first (2400 steps of batch 8 at 224²). Validation: the
held-out slice of each real source. Variants: offline, demo (default: procedural scenes, a few
minutes), tiny (tests).

`offline_long` (the previous default) continues `offline`'s checkpoint on the same data for 4000
more steps (lr 3e-4, 100 warm-up steps) with the longer iterative schedule of the robust
ablation's control (p = 0.6, 1-4 rounds, clicks aim a third of the corrections;
`experiments/lite_robust.py`) and leaky priors (`data.leak_prob` 0.3: 0.3 of the synthetic
priors also hold another region of the photo, which the sample's REMOVE gesture corrects; the
previous default is the same run with `--config.data.leak_prob=0.0`), and exports with
creation clicks run at 320 (`predict.click_size`), ignored refinement clicks run again on a box
2.5× smaller around the click (`predict.rescue_zoom`), ignored refinement strokes and outlines
run again on their own box (`predict.rescue_strokes`) and every run averaged with its mirrored
crop (`predict.flip`; docs/model_quality.md).

The three candidates below (not shipped) were measured continuing the previous default (no
leaks); run now, they continue the current one.

`offline_clicks` continues `offline_long`'s checkpoint for 3500 more steps with clicks weighted
up: a third of the first gestures and 3/7 of the corrections are clicks, iterative p = 0.7 with
1-5 rounds (a candidate, not shipped: docs/model_quality.md).

`offline_obey` continues `offline_long`'s checkpoint for 3000 more steps on the same data and
schedule with the obey loss on (`train.losses.obey_loss`, weight 0.5, pixels within 4 px of a
click or scribble that carry the label it asks for): a refinement click whose own pixel the
model leaves unchanged looked like what stalls the NoG trajectories (a candidate, not shipped:
clicks obeyed, convergence no better; docs/model_quality.md).

`offline_leak` continues `offline_long`'s checkpoint for 3000 more steps on the same data at
lr 1e-4 with leaky priors: the NoG runs that never reach 90 % start from a first click that
selected the wrong region, and REMOVE clicks on it are ignored (a candidate, not shipped: those
runs move and single gestures get worse, as much as in a control continuation without leaks,
`--config.data.leak_prob=0.0`; docs/model_quality.md); leaks from the start of `offline_long`
are what the default now trains with.

`offline_coarse` is `offline_long` (the same start, data, schedule and 4000 steps) with 0.3 of
the synthetic priors badly wrong (`data.coarse_prob`, `dig_jax.data.priors.coarse_prior`: a
small piece of the region, or the region with a blob of background), each sample correcting
the largest error: in NoG with clicks the default's refinement clicks change too little after
a wrong first mask (shipped beside the default as `lite_iterative_offline_coarse`, not the
default: clicks converge faster on every held-out source, tight lassos slower, single gestures
level held-out and 0.01-0.02 lower on the test sets; docs/model_quality.md).

`offline_coarse_clicks` is `offline_coarse` with the coarse priors given only to samples
corrected by a click (`data.coarse_kinds` (0,)): the strokes, lassos and rectangles refine the
default's priors, as in `offline_long`. `offline_coarse` traded tight lassos for clicks; this
run asks whether the click gain comes without that loss (a candidate, not shipped: it lands
between the two, a third of the click gain and most of the lassos back; docs/model_quality.md).

`offline_coarse_wide` is `offline_coarse_clicks` with over-segmenting coarse priors up to five
times the object (`data.coarse_over` (0.3, 4.0): background of 30-400 % of the region's area,
not 30-150 %): the NoG runs with clicks that never reach 90 % start from first masks 2.5-6.4x
the object, larger than any coarse prior `offline_coarse` trained on (a candidate, not shipped:
large REMOVE edits reach further on the instance aimed at, the first click is worse, and
NoG@90 with clicks pooled over the held-out sources is 16.26 against the clicks-only run's
16.40; docs/model_quality.md).

`offline_long3x` (the shipped default, `lite_iterative_offline_long3x`) is `offline_long`
(the same start, data, schedule and leaky priors) for three times the steps (12,000; 4 h 21 min
on two cores, resumed across sittings): the budget, not a data lever, moved convergence
(held-out NoG@90 with clicks 16.14 -> 15.69 pooled, COCO-MVal 13.77 -> 11.13; single gestures
level; docs/model_quality.md). Export it with `--set predict.obey_clicks=0.3` and `--set
predict.open_threshold=-0.25` when its workdir predates the click pass and the open gestures'
cut (the shipped file's was).

`offline_long3x_coarse_clicks` is `offline_long3x` with `offline_coarse_clicks`'s coarse priors
(0.3 of the click corrections start from a badly wrong prior): does the coarse priors' click gain
add to the budget's? Measured, not shipped: pooled held-out clicks converge a little faster
(NoG@90 15.69 -> 15.22, failures 92 -> 79 of 157), mixed slower (6.69 -> 7.26), the click's
refinement lower (RICE_local 0.418 -> 0.393); no paired interval excludes zero
(docs/model_quality.md).

`offline_long_leak_clicks` is `offline_long` (4000 steps) with leaky priors only where a click
corrects them (`data.leak_kinds` (0,)). Measured on the 12,000-step default, a second tight
lasso lowers IoU on 14 of 26 ADD corrections on COCO-MVal by removing pixels inside the lasso,
and the runs trained with leaks (whose REMOVE gestures include lassos) remove there more often
than their start (docs/model_quality.md): do leaks for clicks alone keep the clicks' gain
without teaching lassos "remove"? Measured, not shipped: no. Its second ADD lasso removes
about as often, NoG with lassos and mixed is no better (pooled +0.10 / +0.36) and clicks lose a
little (+0.43) against `offline_long` (docs/model_quality.md).

`offline_long3x_multimask` gives the shipped default candidate masks for a creation click
(`model.num_masks` 3: its own mask and two alternatives that start as it grown a little and a lot,
`models.heads.AltMasks`) and a head that predicts each one's IoU (`MaskIoUHead`), which
chooses among them, as SAM does for one point: a click alone does not say whether it means
a part or the whole. Only those two heads train (`model.train_trunk` False,
`optim.trainable`), from `offline_long3x`'s checkpoint, on creation clicks alone (every
other prompt runs exactly as the default's), for `MULTIMASK_STEPS` steps at lr 1e-3 (27 min).
Measured, not shipped: held-out first clicks 0.402 -> 0.412 (0.446 with
`predict.candidate_margin` 0.1), and the loop ends lower (COCO-MVal mean IoU after 20 clicks
0.910 -> 0.777, 0.857 with the margin): the grown first masks take in background the
default's REMOVE clicks do not take back (docs/model_quality.md).

`offline_long3x_grow` continues `offline_long3x`'s checkpoint for `GROW_STEPS` steps on the same
data and iterative schedule at lr 1e-4 with grown first masks (`iterative.grow_prob` 0.5:
half of the samples in an iterative batch start from the model's own mask grown along its
logits to 1.5-4x the region's area, then corrected by a click, `dig_jax.train.iterative`): every
lever that grew the first click's mask lost the loop to REMOVE clicks that take back too little.
Measured against the same continuation without growth (`--config.iterative.grow_prob=0.0`), not
shipped: held-out NoG@90 with clicks pooled 15.14 (control) -> 15.37, faster only where the
first click went wrong, and the single refinement gesture much worse (RICE_local 0.603 ->
0.529; docs/model_quality.md).

`offline_long3x_more` is that control made longer: the default continued for `MORE_STEPS`
steps on the same data and schedule at lr 1e-4, nothing else changed (the 2500-step control
kept single gestures level and converged a little faster, within noise: does more of the
same budget lever pay?). Measured, not shipped: held-out NoG@90 with clicks pooled 15.33
(default) -> 15.20, within noise, and the single refinement gesture worse (RICE_local 0.606 ->
0.586; docs/model_quality.md).

`offline_long3x_multihead` is the 2500-step control with DIG's multiHead (`with_multihead`:
context and gesture-kind heads on the top features, BCE / CE at weight 0.1 each, light here:
16 channels pooled to 8x8, MLPs of 128 and 64 units): the context model from an equal start
converges much faster in the loop told add/remove (docs/model_quality.md, "The starts at equal
length"); does learning to tell add from remove help the gesture model's own reading of it?
The heads are dropped at inference: `predict` reads only the mask. Measured, not shipped:
held-out NoG@90 with clicks pooled 15.14 (control) -> 15.21, the creation click worse (0.410 ->
0.383), the enclosing kinds' single refinements a little better (RICE_local 0.603 -> 0.613;
docs/model_quality.md).
"""

from __future__ import annotations

import ml_collections

from dig_jax.paths import CHECKPOINT_DIR
from dig_jax.train.config import (
    base_config,
    with_lite_backbone,
    with_long_fine_tune,
    with_multihead,
    with_real_fine_tune,
)

LONG_STEPS = 4000
LONG3X_STEPS = 3 * LONG_STEPS
CLICKS_STEPS = 3500
CONTINUE_STEPS = 3000
MULTIMASK_STEPS = 6000
GROW_STEPS = 2500
MORE_STEPS = 6000


def get_config(arg: str = "demo") -> ml_collections.ConfigDict:
    arg = arg or "demo"
    long = arg in (
        "offline_long",
        "offline_clicks",
        "offline_obey",
        "offline_leak",
        "offline_coarse",
        "offline_coarse_clicks",
        "offline_coarse_wide",
        "offline_long3x",
        "offline_long3x_coarse_clicks",
        "offline_long_leak_clicks",
        "offline_long3x_multimask",
        "offline_long3x_grow",
        "offline_long3x_more",
        "offline_long3x_multihead",
    )
    config = with_lite_backbone(base_config("offline" if long else arg))
    config.data.multi_region_prob = 0.2
    config.iterative.prob = 0.5
    config.data.focus_prob = 0.5  # creation clicks cropped as the focus pass sees them
    if long:
        with_long_fine_tune(
            config, str(CHECKPOINT_DIR / "lite_iterative_offline.digjax"), steps=LONG_STEPS
        )
        if arg in ("offline_long3x", "offline_long3x_coarse_clicks"):  # three times the steps
            config.total_steps = LONG3X_STEPS
        if arg in ("offline_clicks", "offline_obey"):
            config.data.leak_prob = 0.0  # as measured: their data had no leaky priors
        if arg == "offline_clicks":  # the default continued with clicks weighted up
            config.init_from = str(CHECKPOINT_DIR / "lite_iterative_offline_long.digjax")
            config.total_steps = CLICKS_STEPS
            config.data.kinds = (0, 0, 1, 2, 3, 4)  # a third of the first gestures are clicks
            config.iterative.prob = 0.7
            config.iterative.max_steps = 5
            config.iterative.kinds = (0, 0, 0, 1, 2, 3, 4)  # clicks aim 3/7 of the corrections
        if arg == "offline_obey":  # the default continued with the obey loss
            config.init_from = str(CHECKPOINT_DIR / "lite_iterative_offline_long.digjax")
            config.total_steps = CONTINUE_STEPS
            config.loss.obey_weight = 0.5
            config.loss.obey_radius = 4.0
            config.loss.obey_kinds = (0, 1)
        coarse = ("offline_coarse", "offline_coarse_clicks", "offline_coarse_wide")
        if arg in (*coarse, "offline_long3x_coarse_clicks"):
            config.data.coarse_prob = 0.3  # badly wrong priors as well
        if arg in ("offline_coarse_clicks", "offline_coarse_wide", "offline_long3x_coarse_clicks"):
            config.data.coarse_kinds = (0,)  # ... only where a click corrects them
        if arg == "offline_long_leak_clicks":  # leaky priors for click corrections only
            config.data.leak_kinds = (0,)
        if arg == "offline_coarse_wide":  # ... with over-segmentations up to 5x the object
            config.data.coarse_over = (0.3, 4.0)
        if arg == "offline_leak":  # the default continued with leaky priors
            config.init_from = str(CHECKPOINT_DIR / "lite_iterative_offline_long.digjax")
            config.total_steps = CONTINUE_STEPS
            config.optim.lr = 1e-4  # gentler than offline_clicks/offline_obey (3e-4)
        if arg == "offline_long3x_multimask":
            with_candidate_masks(config)
        if arg in ("offline_long3x_grow", "offline_long3x_more", "offline_long3x_multihead"):
            config.init_from = str(CHECKPOINT_DIR / "lite_iterative_offline_long3x.digjax")
            config.total_steps = MORE_STEPS if arg == "offline_long3x_more" else GROW_STEPS
            config.optim.lr = 1e-4
            config.evals = ml_collections.ConfigDict()  # measured with `dig_jax.evaluate` instead
        if arg == "offline_long3x_multihead":  # ... with DIG's context and kind heads
            with_multihead(config)  # add/remove and the kind as auxiliary targets (weight 0.1)
            config.model.aux_reduce, config.model.aux_pool = 16, 8  # light: 1024 inputs
            config.model.aux_hidden = (128, 64)
        if arg == "offline_long3x_grow":  # ... with grown first masks
            config.iterative.grow_prob = 0.5
            config.iterative.grow_scale = (1.5, 4.0)
            config.iterative.grow_kinds = (0,)
    elif config.variant == "offline":  # the shipped run's budget (checkpoints/README.md)
        with_real_fine_tune(config, str(CHECKPOINT_DIR / "lite_dataaug_offline.digjax"))
    return config


def with_candidate_masks(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """`offline_long3x_multimask`, in place: the default's weights, frozen, with three
    candidate masks and the IoU head trained on creation clicks only."""
    config.init_from = str(CHECKPOINT_DIR / "lite_iterative_offline_long3x.digjax")
    config.model.num_masks = 3
    config.model.train_trunk = False
    config.optim.trainable = ("alt_masks", "iou_head")
    config.optim.lr = 1e-3
    config.total_steps = MULTIMASK_STEPS
    config.data.kinds = (0,)  # every sample a click ...
    config.data.prior_prob = 0.0  # ... with no previous mask: a creation click
    config.data.leak_prob = 0.0
    config.iterative.prob = 0.0
    config.eval.every_steps = 500
    config.evals = ml_collections.ConfigDict()  # measured with `dig_jax.evaluate` instead
    return config
