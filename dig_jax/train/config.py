"""Shared config skeleton for experiments/*.py and its validation.

Every experiment file builds on `base_config(variant)` and edits a few fields; `validate_config`
raises a ValueError whose message starts with the dotted name of the bad key.
"""

from __future__ import annotations

from typing import Any

import ml_collections

VARIANTS = ("paper", "offline", "demo", "tiny", "gpu", "tpu")
# Every real source of docs/data.md with its held-out slice: the offline fine-tunes' data.
REAL_TRAIN_SOURCES = (
    "coco_mval%train",
    "bsds500_regions",
    "clothing_co_parsing%train",
    "camvid/train",
    "feral_cats/train",
    "procedural:1000",
)
REAL_HELD_OUT = ("coco_mval%val", "clothing_co_parsing%val", "camvid/val", "feral_cats/valid")
PAPER_SAMPLES = 15 * 30_000  # DIG's schedule: 15 epochs of 30 000 samples
PAPER_BATCH, PAPER_LR = 32, 3e-4
# The paper's recipe sized for accelerators: devices, global batch, working size, grain
# workers. The learning rate scales linearly with the global batch from the paper's 3e-4 at 32
# (warm-up scaled alike) and the steps keep the paper's sample budget (docs/scale.md).
ACCELERATORS = {
    "gpu": dict(devices=1, batch_size=32, image_size=512, workers=12),  # one H100/H200-class GPU
    "tpu": dict(devices=8, batch_size=128, image_size=512, workers=16),  # a v4-8 / v5e-8 slice
}


def _backbone(
    width: int,
    *,
    stem_width: int,
    stage1_planes: int,
    head_width: int,
    blocks: int = 1,
    stage_modules: tuple[int, ...] = (1, 1, 1),
) -> dict[str, Any]:
    """Segmenter backbone keywords whose four branch widths double from `width`."""
    return dict(
        widths=tuple(width * 2**i for i in range(4)),
        stem_width=stem_width,
        stage1_planes=stage1_planes,
        blocks=blocks,
        stage_modules=stage_modules,
        head_width=head_width,
    )


# Backbone sizes: full HRNet-W18-small and reduced ones for CPU runs and tests.
FULL_BACKBONE = _backbone(
    18, stem_width=64, stage1_planes=64, head_width=96, blocks=2, stage_modules=(1, 3, 2)
)
DEMO_BACKBONE = _backbone(8, stem_width=16, stage1_planes=8, head_width=32)
TINY_BACKBONE = _backbone(4, stem_width=8, stage1_planes=4, head_width=8)


def base_config(variant: str) -> ml_collections.ConfigDict:
    """Gesture-agnostic single-head HRNet config for `variant` in VARIANTS.

    paper: full HRNet-W18-small, 512², batch 32, 15 epochs of 30 000 samples (RITM-style epoch
    length) on the DIG release (COCO+LVIS; point `--config.data.sources` at your copy);
    offline: full model at 160², 3500 steps of batch 8, lr 1e-3, on ../shared/data (coco_mval
    9/10 + bsds500_regions + procedural; validation on the held-out 1/10 of coco_mval), sized
    for about an hour on 2 CPU cores with two models training at once;
    demo: reduced widths (8/16/32/64) at 96² on embedded procedural scenes, a few minutes on
    2 CPU cores; tiny: widths 4/8/16/32 at 32² on the synthetic in-memory source (tests).
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    if variant in ACCELERATORS:
        return for_accelerator(base_config("paper"), variant)
    c = ml_collections.ConfigDict()
    c.variant = variant
    c.seed = 0
    c.num_devices = 0  # 0 = all devices (jax.devices()); >0 = the first n (single process only)
    c.image_size = {"paper": 512, "offline": 160, "demo": 96, "tiny": 32}[variant]
    c.batch_size = {"paper": 32, "offline": 8, "demo": 8, "tiny": 4}[variant]
    c.total_steps = {"paper": 15 * 30_000 // 32, "offline": 3500, "demo": 3000, "tiny": 4}[variant]
    c.log_every = {"paper": 100, "offline": 50, "demo": 25, "tiny": 1}[variant]

    backbone = {
        "paper": FULL_BACKBONE,
        "offline": FULL_BACKBONE,
        "demo": DEMO_BACKBONE,
        "tiny": TINY_BACKBONE,
    }[variant]
    c.model = ml_collections.ConfigDict(dict(backbone))
    c.model.widths = tuple(backbone["widths"])
    c.model.stage_modules = tuple(backbone["stage_modules"])
    c.model.input_kind = "gesture"  # "gesture" (DIG) or "context" (click-model baseline)
    c.model.context_encoding = "gesture"  # context models: "gesture" maps or "clicks" (skeleton)
    c.model.multihead = False
    c.model.backbone = "hrnet18s"  # or "efficientnet_lite0" (`with_lite_backbone`)
    c.model.pretrained = ""  # "imagenet" or a weights path (EfficientNet-Lite0 only)
    c.model.fine_head = False  # EfficientNet: stride-2 boundary refinement of the logits
    # > 1: candidate masks for a creation click, chosen by a predicted IoU (models.heads.AltMasks)
    c.model.num_masks = 1
    c.model.train_trunk = True  # False: train only heads outside the trunk (optim.trainable)
    small = variant in ("demo", "tiny")
    c.model.aux_reduce = 4 if variant == "tiny" else (16 if small else 48)
    c.model.aux_pool = 4 if variant == "tiny" else (8 if small else 32)
    c.model.aux_hidden = (16, 8) if variant == "tiny" else ((128, 64) if small else (1024, 512))

    c.loss = ml_collections.ConfigDict()
    c.loss.mask = "nfl"  # "nfl" (normalized focal) or "bce"
    c.loss.mask_weight = 1.0
    c.loss.context_weight = 0.0
    c.loss.kind_weight = 0.0
    c.loss.focal_alpha = 0.5
    c.loss.focal_gamma = 2.0
    # obey: extra BCE on the pixels within obey_radius px of a click or scribble that carry
    # the label it asks for (train.losses.obey_loss); 0 = off
    c.loss.obey_weight = 0.0
    c.loss.obey_radius = 4.0
    c.loss.obey_kinds = (0, 1)
    c.loss.iou_weight = 1.0  # candidate masks' predicted IoU (model.num_masks > 1)

    c.optim = ml_collections.ConfigDict()
    c.optim.lr = 3e-4 if variant in ("paper", "tiny") else 1e-3  # short CPU budgets: faster
    c.optim.weight_decay = 1e-4
    c.optim.schedule = "constant" if variant == "tiny" else "warmup_cosine"
    c.optim.warmup_steps = {"paper": 500, "offline": 200, "demo": 25, "tiny": 0}[variant]
    c.optim.grad_clip = 0.0 if variant == "tiny" else 1.0
    c.optim.backbone_lr_mult = 1.0  # lr factor of the params under 'backbone' (pre-trained)
    c.optim.trainable = ()  # top-level parameter keys trained; () = all (state.make_optimizer)
    # One flat vector per optimizer group (optax.flatten): a smaller program (compile time,
    # executable memory), same update. False: one optimizer state per parameter (workdirs
    # written before this option existed resume only with False).
    c.optim.flat = True

    c.data = ml_collections.ConfigDict()
    # Source specs: "synthetic:N" (tests), or any `dig_jax.data.pipeline.resolve_source` spec;
    # a "%train" / "%val" suffix keeps 9/10 or every 10th record (a held-out split).
    # Tuples, so that `--config.data.sources="('a', 'b')"` can override them.
    c.data.sources = {
        "paper": ("dig_json:../shared/dig_data/train.json:../shared/dig_data/images",),
        "offline": ("coco_mval%train", "bsds500_regions", "procedural:1000"),
        "demo": ("procedural:2000",),
        "tiny": ("synthetic:64",),
    }[variant]
    c.data.val_sources = {
        "paper": ("dig_json:../shared/dig_data/val.json:../shared/dig_data/images",),
        "offline": ("coco_mval%val",),
        "demo": ("procedural:128:777",),
        "tiny": ("synthetic:8",),
    }[variant]
    # The rest of `data` are `dig_jax.data.pipeline.PipelineConfig` fields (same names, checked
    # there): the training pipeline reads them directly.
    c.data.multi_region_prob = 0.0  # multi-region augmentation probability (dataAug: 0.2)
    c.data.leak_prob = 0.0  # a synthetic prior also holds another region, REMOVEd (leak_prior)
    c.data.leak_kinds = (0, 1, 2, 3, 4)  # gesture kinds whose samples may get a leaky prior
    c.data.coarse_prob = 0.0  # a badly wrong prior whose largest error is corrected (coarse_prior)
    c.data.coarse_kinds = (0, 1, 2, 3, 4)  # gesture kinds whose samples may get a coarse prior
    c.data.coarse_over = (0.3, 1.5)  # background an over-segmenting coarse prior takes in (x GT)
    c.data.prior_prob = 0.5  # probability that a training sample refines a previous mask
    c.data.max_side = 640  # photos are shrunk to this long side (px) before sampling
    # True: the DIG paper's input, the whole photo resized to image_size², no zoom-in crop
    # (the exported model then runs that way in evaluate and predict's evaluation predictor)
    c.data.paper_mode = False
    c.data.worker_count = {"paper": 8, "offline": 1, "demo": 1, "tiny": 0}[variant]  # grain workers

    c.eval = ml_collections.ConfigDict()
    c.eval.every_steps = {"paper": 2000, "offline": 500, "demo": 1000, "tiny": 0}[variant]
    c.eval.batch_size = c.batch_size

    # Evaluator objects (`dig_jax.evaluation.evaluators`, at the photos' own resolution) run by
    # the loop every `every_steps` (0: once, at the end) and by `python -m dig_jax.evaluate
    # --config ...`; `eval` above is the cheap per-batch validation at the working size.
    c.evals = ml_collections.ConfigDict()
    if variant in ("paper", "offline"):
        held_out = c.data.val_sources
        c.evals.dig = dict(type="dig_tables", datasets=held_out, every_steps=0)
        c.evals.nog = dict(
            type="iterative", datasets=held_out, kinds=("click", "mixed"), starts=("scratch",),
            limit=None if variant == "paper" else 20, every_steps=0,
        )  # fmt: skip
    elif variant == "demo":
        c.evals.dig = dict(type="dig_tables", datasets=("procedural:12:777",), every_steps=0)

    # Iterative training (`dig_jax.train.iterative`): the model's own masks as previous masks.
    c.iterative = ml_collections.ConfigDict(
        dict(
            prob=0.0, max_steps=3, min_area=20, kinds=(0, 1, 2, 3, 4),
            grow_prob=0.0, grow_scale=(1.5, 4.0), grow_kinds=(0,),
        )
    )  # fmt: skip
    c.init_from = ""  # an exported segmenter (.digjax) whose weights start a new run

    c.checkpoint = ml_collections.ConfigDict()
    c.checkpoint.save_every = {"paper": 1000, "offline": 250, "demo": 500, "tiny": 2}[variant]
    c.checkpoint.keep = 3
    c.checkpoint.async_save = variant != "tiny"
    c.export = True  # write <workdir>/segmenter.digjax at the end
    return c


def for_accelerator(config: ml_collections.ConfigDict, kind: str) -> ml_collections.ConfigDict:
    """The `paper` config sized for `kind` in ACCELERATORS ("gpu": one GPU; "tpu": an 8-chip
    slice), in place: global batch, working size, linearly scaled learning rate and warm-up,
    the paper's sample budget in steps, grain workers, evaluation and checkpoint intervals."""
    if kind not in ACCELERATORS:
        raise ValueError(f"kind must be one of {tuple(ACCELERATORS)}, got {kind!r}")
    spec = ACCELERATORS[kind]
    scale = spec["batch_size"] / PAPER_BATCH
    config.variant = kind
    config.batch_size = config.eval.batch_size = spec["batch_size"]
    config.image_size = spec["image_size"]
    config.total_steps = PAPER_SAMPLES // spec["batch_size"]
    config.optim.lr = PAPER_LR * scale
    config.optim.warmup_steps = max(int(500 / scale), 100)
    config.data.worker_count = spec["workers"]
    config.eval.every_steps = max(config.total_steps // 7, 1)
    config.checkpoint.save_every = max(config.total_steps // 14, 1)
    return config


def size_variant(variant: str) -> str:
    """The variant whose model sizes `variant` uses (accelerator variants: `paper`'s)."""
    return "paper" if variant in ACCELERATORS else variant


def with_real_fine_tune(
    config: ml_collections.ConfigDict, init_from: str, steps: int = 2400
) -> ml_collections.ConfigDict:
    """The first real-data fine-tune (`lite_iterative:offline`), in place: from `init_from`,
    `steps` steps on every real source (REAL_TRAIN_SOURCES) with iterative sampling (p = 0.5),
    focus crops (p = 0.5), lr 5e-4 with 200 warm-up steps, validation and final evaluators on
    the held-out slices, and the focus pass at inference (`experiments/lite_iterative.py`)."""
    config.init_from = init_from
    config.data.sources = REAL_TRAIN_SOURCES
    config.data.val_sources = REAL_HELD_OUT
    config.data.focus_prob = 0.5
    config.iterative.prob = 0.5
    config.total_steps = steps
    config.optim.lr = 5e-4
    config.optim.warmup_steps = 200
    config.evals.dig.datasets = REAL_HELD_OUT
    config.evals.nog.datasets = REAL_HELD_OUT
    config.evals.nog.kinds = ("click", "tight_lasso", "mixed")
    # predict reruns a creation prompt whose zoom box is the whole photo (a click) on its first
    # mask's box: chosen on the held-out slices (docs/model_quality.md)
    config.predict = ml_collections.ConfigDict(dict(focus_pass=True))
    return config


def with_long_fine_tune(
    config: ml_collections.ConfigDict, init_from: str, steps: int = 4000
) -> ml_collections.ConfigDict:
    """The shipped default's second fine-tune (`lite_iterative:offline_long`), in place: the
    first one (`with_real_fine_tune`) from `init_from` for `steps` steps at lr 3e-4 (100
    warm-up steps), with the longer iterative schedule (p = 0.6, 1-4 rounds, clicks aim a third
    of the corrections), leaky priors (`data.leak_prob` 0.3) and the shipped inference settings
    (`prompts.Passes`: creation clicks at 320, dots and open strokes cut at logit -0.25, both
    rescue passes, the flip, the click pass)."""
    with_real_fine_tune(config, init_from, steps=steps)
    config.optim.lr = 3e-4
    config.optim.warmup_steps = 100
    config.checkpoint.save_every = 250
    config.iterative.prob = 0.6
    config.iterative.max_steps = 4
    config.iterative.kinds = (0, 0, 1, 2, 3, 4)  # clicks aim a third of the corrections
    config.predict.click_size = 320  # a creation click's whole-photo pass (prompts.Passes)
    config.predict.rescue_zoom = 2.5  # an ignored refinement click runs again, closer
    config.predict.flip = True  # logits averaged with those of the mirrored crop
    config.predict.rescue_strokes = True  # an ignored refinement stroke runs again, closer
    config.predict.obey_clicks = 0.3  # a click still ignored flips the piece ranked past it
    config.predict.open_threshold = -0.25  # a dot's or open stroke's extent, cut below p = 0.5
    config.data.leak_prob = 0.3  # priors that took in another region, corrected by REMOVE
    return config


def with_lite_backbone(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """Switch to EfficientNet-Lite0 with ImageNet features (except `tiny`, which starts from
    random weights to stay fast), a light FPN decoder and a stride-2 refinement, in place.

    The backbone is fine-tuned at 0.1× the learning rate; `offline` trains 9000 steps of
    batch 8 at 224² (the zoom crops keep objects large), about 2 h alone on 2 CPU cores (see
    checkpoints/README.md for the shipped run).
    """
    config.model.backbone = "efficientnet_lite0"
    config.model.pretrained = "" if config.variant == "tiny" else "imagenet"
    config.model.fine_head = True
    sizes = {"paper": 96, "offline": 64, "demo": 32, "tiny": 8}
    config.model.head_width = sizes[size_variant(config.variant)]
    config.optim.backbone_lr_mult = 0.1
    if config.variant == "demo":  # `make train`: a few minutes from ImageNet features
        config.total_steps = 800
        config.optim.warmup_steps = 50
    if config.variant == "offline":
        config.image_size = 224
        config.total_steps = 9000
        config.optim.warmup_steps = 500
        config.eval.every_steps = 2000
        config.checkpoint.save_every = 500
    return config


def with_multihead(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """Turn on the context and gesture-kind heads (BCE / CE, weight 0.1 each) in place."""
    config.model.multihead = True
    config.loss.context_weight = 0.1
    config.loss.kind_weight = 0.1
    return config


def _check(ok: bool, key: str, message: str, value: Any) -> None:
    if not ok:
        raise ValueError(f"config.{key} {message}, got {value!r}")


def validate_config(c: ml_collections.ConfigDict, num_devices: int | None = None) -> None:
    """Raise ValueError('config.<key> ...') on the first bad field."""
    for key in (
        "seed",
        "batch_size",
        "total_steps",
        "image_size",
        "log_every",
        "model",
        "loss",
        "optim",
        "data",
        "eval",
        "checkpoint",
    ):
        _check(key in c, key, "is required", None)
    num = c.get("num_devices", 0)
    _check(num >= 0, "num_devices", "must be >= 0 (0 = all devices)", num)
    _check(c.batch_size >= 1, "batch_size", "must be >= 1", c.batch_size)
    if num_devices:
        _check(
            c.batch_size % num_devices == 0,
            "batch_size",
            f"must be divisible by the {num_devices} devices",
            c.batch_size,
        )
    _check(c.total_steps >= 1, "total_steps", "must be >= 1", c.total_steps)
    _check(
        c.image_size >= 32 and c.image_size % 32 == 0,
        "image_size",
        "must be a positive multiple of 32",
        c.image_size,
    )
    _check(c.log_every >= 1, "log_every", "must be >= 1", c.log_every)
    m = c.model
    _check(
        m.input_kind in ("gesture", "context"),
        "model.input_kind",
        "must be 'gesture' or 'context'",
        m.input_kind,
    )
    _check(
        m.context_encoding in ("gesture", "clicks"),
        "model.context_encoding",
        "must be 'gesture' or 'clicks'",
        m.context_encoding,
    )
    _check(
        len(m.widths) >= 2 and all(w >= 1 for w in m.widths),
        "model.widths",
        "must list >= 2 positive channel counts",
        m.widths,
    )
    _check(
        len(m.stage_modules) == len(m.widths) - 1,
        "model.stage_modules",
        f"must have len(model.widths) - 1 = {len(m.widths) - 1} entries",
        m.stage_modules,
    )
    backbones = ("hrnet18s", "efficientnet_lite0")
    backbone = m.get("backbone", "hrnet18s")
    _check(backbone in backbones, "model.backbone", f"must be one of {backbones}", backbone)
    pretrained = m.get("pretrained", "")
    _check(
        not pretrained or backbone == "efficientnet_lite0",
        "model.pretrained",
        "needs model.backbone='efficientnet_lite0'",
        pretrained,
    )
    num_masks = c.model.get("num_masks", 1)
    _check(num_masks >= 1, "model.num_masks", "must be >= 1", num_masks)
    gesture_input = c.model.input_kind == "gesture"
    _check(num_masks == 1 or gesture_input, "model.num_masks", "> 1 needs input_kind 'gesture'",
           num_masks)  # fmt: skip
    _check(num_masks <= 3, "model.num_masks", "must be <= 3 (two alternative offsets)", num_masks)
    trainable = tuple(c.optim.get("trainable", ()))
    frozen_trunk = not c.model.get("train_trunk", True)
    # a trunk run without gradient still decays under AdamW unless its parameters are frozen
    _check(not frozen_trunk or bool(trainable), "model.train_trunk", "False needs optim.trainable",
           frozen_trunk)  # fmt: skip
    mult = c.optim.get("backbone_lr_mult", 1.0)
    _check(mult >= 0, "optim.backbone_lr_mult", "must be >= 0", mult)
    for key in ("stem_width", "stage1_planes", "blocks", "head_width", "aux_reduce", "aux_pool"):
        _check(m[key] >= 1, f"model.{key}", "must be >= 1", m[key])
    loss = c.loss
    _check(loss.mask in ("nfl", "bce"), "loss.mask", "must be 'nfl' or 'bce'", loss.mask)
    for key in ("mask_weight", "context_weight", "kind_weight", "focal_gamma"):
        _check(loss[key] >= 0, f"loss.{key}", "must be >= 0", loss[key])
    obey_weight = loss.get("obey_weight", 0.0)
    _check(0 <= obey_weight < float("inf"), "loss.obey_weight", "must be >= 0", obey_weight)
    if obey_weight > 0:
        radius = loss.obey_radius
        _check(0 <= radius <= 255, "loss.obey_radius", "must be in [0, 255] px", radius)
        kinds = tuple(loss.obey_kinds)
        _check(
            bool(kinds) and all(int(k) in range(5) for k in kinds),
            "loss.obey_kinds", "must be a non-empty subset of 0..4", kinds,
        )  # fmt: skip
    _check(0 <= loss.focal_alpha <= 1, "loss.focal_alpha", "must be in [0, 1]", loss.focal_alpha)
    if (loss.context_weight > 0 or loss.kind_weight > 0) and not m.multihead:
        raise ValueError("config.loss.context_weight/kind_weight need config.model.multihead=True")
    o = c.optim
    _check(0 < o.lr < float("inf"), "optim.lr", "must be a finite number > 0", o.lr)
    _check(
        0 <= o.weight_decay < float("inf"),
        "optim.weight_decay",
        "must be a finite number >= 0",
        o.weight_decay,
    )
    _check(
        o.schedule in ("constant", "warmup_cosine"),
        "optim.schedule",
        "must be 'constant' or 'warmup_cosine'",
        o.schedule,
    )
    _check(0 <= o.warmup_steps, "optim.warmup_steps", "must be >= 0", o.warmup_steps)
    _check(o.grad_clip >= 0, "optim.grad_clip", "must be >= 0", o.grad_clip)
    d = c.data
    for key in ("sources", "val_sources"):
        specs = d[key]
        _check(
            isinstance(specs, (list, tuple)) and all(isinstance(x, str) for x in specs),
            f"data.{key}",
            "must be a list of source spec strings",
            specs,
        )
    _check(len(d.sources) > 0, "data.sources", "must name at least one source", d.sources)
    from dig_jax.data.pipeline import PipelineConfig

    try:  # the pipeline's own checks, named as config keys
        PipelineConfig.from_config(c, "train")
    except ValueError as error:
        raise ValueError(f"config.data.{error}") from None
    _check(d.worker_count >= 0, "data.worker_count", "must be >= 0", d.worker_count)
    from dig_jax.train.iterative import IterativeConfig

    try:
        IterativeConfig.from_config(c)
    except (ValueError, TypeError) as error:
        raise ValueError(f"config.iterative.{error}") from None
    from dig_jax.train.robust import RobustConfig

    try:
        RobustConfig.from_config(c)
    except (ValueError, TypeError) as error:
        raise ValueError(f"config.robust.{error}") from None
    init_from = c.get("init_from", "")
    if init_from:
        from pathlib import Path

        exists = Path(init_from).is_file()
        _check(exists, "init_from", "must be an existing .digjax file", init_from)
    _check(c.eval.every_steps >= 0, "eval.every_steps", "must be >= 0", c.eval.every_steps)
    for name, entry in c.get("evals", {}).items():
        every = entry.get("every_steps", 0)
        _check(every >= 0, f"evals.{name}.every_steps", "must be >= 0", every)
        _check("type" in entry, f"evals.{name}.type", "is required", None)
    _check(c.eval.batch_size >= 1, "eval.batch_size", "must be >= 1", c.eval.batch_size)
    if num_devices:
        _check(
            c.eval.batch_size % num_devices == 0,
            "eval.batch_size",
            f"must be divisible by the {num_devices} devices",
            c.eval.batch_size,
        )
    _check(
        c.checkpoint.save_every >= 1,
        "checkpoint.save_every",
        "must be >= 1",
        c.checkpoint.save_every,
    )
    _check(c.checkpoint.keep >= 1, "checkpoint.keep", "must be >= 1", c.checkpoint.keep)
