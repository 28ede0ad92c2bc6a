"""The project's segmenters written again in plain PyTorch, for `benchmarks/vs_torch.py`.

    python benchmarks/torch_segmenters.py [--quick]   # parity: JAX vs torch logits, same weights

`TorchSegmenter(model_config)` builds, from the same `config.model` as
`dig_jax.models.build_segmenter`, the HRNet-18s segmenter (HRNet + fusion head) or the
EfficientNet-Lite0 segmenter (prompt stem, ImageNet backbone, FPN head, stride-2 fine head),
modules created in the order Flax creates them, so `load_flax_variables` can copy a Flax
variables dict into it leaf by leaf. `same="torch"` (the benchmark's default) pads stride-2
convolutions symmetrically as a PyTorch author would (same cost); `same="tf"` pads like Flax's
"SAME" (the extra pixel at the bottom/right), which the parity check needs. The normalized focal
loss is `dig_jax.train.losses.normalized_focal_loss` in torch. torch is an optional extra
(`pip install '.[bench]'`): without it, importing this module raises ImportError.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

RGB_MEAN = (0.485, 0.456, 0.406)
RGB_STD = (0.229, 0.224, 0.225)
LITE0_STAGES = ((1, 3, 1, 1, 16), (2, 3, 2, 6, 24), (2, 5, 2, 6, 40), (3, 3, 2, 6, 80),
                (3, 5, 1, 6, 112), (4, 5, 2, 6, 192), (1, 3, 1, 6, 320))  # fmt: skip
TAP_BLOCKS = (2, 4, 10, 15)


class Conv(nn.Module):
    """k×k conv with "SAME" padding, TF style (`same="tf"`) or symmetric (`same="torch"`)."""

    def __init__(self, cin: int, cout: int, k: int, stride: int = 1, bias: bool = False,
                 groups: int = 1, same: str = "torch"):  # fmt: skip
        super().__init__()
        self.k, self.stride, self.tf = k, stride, same == "tf" and stride > 1
        pad = 0 if self.tf else k // 2
        self.conv = nn.Conv2d(cin, cout, k, stride, pad, bias=bias, groups=groups)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.tf:
            pads = []
            for size in (x.shape[3], x.shape[2]):  # F.pad order: last axis first
                out = -(-size // self.stride)
                total = max((out - 1) * self.stride + self.k - size, 0)
                pads += [total // 2, total - total // 2]
            x = F.pad(x, pads)
        return self.conv(x)


class ConvBN(nn.Module):
    def __init__(self, cin: int, cout: int, k: int = 3, stride: int = 1, relu: bool = True,
                 eps: float = 1e-5, same: str = "torch"):  # fmt: skip
        super().__init__()
        self.conv = Conv(cin, cout, k, stride, same=same)
        self.bn = nn.BatchNorm2d(cout, eps=eps, momentum=0.1)
        self.relu = relu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.bn(self.conv(x))
        return F.relu(x) if self.relu else x


def resize(x: torch.Tensor, size: Sequence[int]) -> torch.Tensor:
    """Bilinear, half-pixel centres (jax.image.resize for upsampling)."""
    if tuple(x.shape[-2:]) == tuple(size):
        return x
    return F.interpolate(x, size=tuple(size), mode="bilinear", align_corners=False)


class BasicBlock(nn.Module):
    def __init__(self, cin: int, width: int, same: str):
        super().__init__()
        self.short = ConvBN(cin, width, 1, relu=False, same=same) if cin != width else None
        self.a, self.b = ConvBN(cin, width, same=same), ConvBN(width, width, relu=False, same=same)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        short = x if self.short is None else self.short(x)
        return F.relu(self.b(self.a(x)) + short)


class Bottleneck(nn.Module):
    def __init__(self, cin: int, planes: int, same: str):
        super().__init__()
        out = planes * 4
        self.short = ConvBN(cin, out, 1, relu=False, same=same) if cin != out else None
        self.a = ConvBN(cin, planes, 1, same=same)
        self.b = ConvBN(planes, planes, same=same)
        self.c = ConvBN(planes, out, 1, relu=False, same=same)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        short = x if self.short is None else self.short(x)
        return F.relu(self.c(self.b(self.a(x))) + short)


class HRModule(nn.Module):
    def __init__(self, widths: tuple[int, ...], blocks: int, same: str):
        super().__init__()
        self.branches = nn.ModuleList(
            nn.Sequential(*[BasicBlock(w, w, same) for _ in range(blocks)]) for w in widths
        )
        self.fuse = nn.ModuleDict()
        for i, wi in enumerate(widths):
            for j, wj in enumerate(widths):
                if j > i:
                    self.fuse[f"{i}_{j}"] = ConvBN(wj, wi, 1, relu=False, same=same)
                elif j < i:
                    steps = []
                    for k in range(i - j):
                        last = k == i - j - 1
                        steps.append(ConvBN(wj, wi if last else wj, 3, 2, not last, same=same))
                    self.fuse[f"{i}_{j}"] = nn.Sequential(*steps)

    def forward(self, xs: list[torch.Tensor]) -> list[torch.Tensor]:
        branches = [b(x) for b, x in zip(self.branches, xs, strict=True)]
        out = []
        for i, total in enumerate(branches):
            size = total.shape[-2:]
            for j, y in enumerate(branches):
                if j != i:
                    total = total + resize(self.fuse[f"{i}_{j}"](y), size)
            out.append(F.relu(total))
        return out


class HRNetSegmenter(nn.Module):
    """HRNet backbone + FusionHead, as `Segmenter(backbone="hrnet18s")`: x NCHW -> logits."""

    def __init__(self, m: Any, in_channels: int, same: str = "torch"):
        super().__init__()
        widths = tuple(m.widths)
        layers: list[nn.Module] = [ConvBN(in_channels, m.stem_width, 3, 2, same=same),
                                   ConvBN(m.stem_width, m.stem_width, 3, 2, same=same)]  # fmt: skip
        cin = m.stem_width
        for _ in range(m.blocks):
            layers.append(Bottleneck(cin, m.stage1_planes, same))
            cin = m.stage1_planes * 4
        self.stem = nn.Sequential(*layers)
        self.stages = nn.ModuleList()
        channels = [cin]
        for stage, modules in enumerate(m.stage_modules, start=2):
            ws = widths[:stage]
            trans = nn.ModuleList(
                nn.Identity() if c == w else ConvBN(c, w, same=same)
                for c, w in zip(channels, ws, strict=False)
            )
            trans.append(ConvBN(channels[-1], ws[len(channels)], 3, 2, same=same))
            mods = nn.ModuleList(HRModule(ws, m.blocks, same) for _ in range(modules))
            self.stages.append(nn.ModuleList([trans, mods]))
            channels = list(ws)
        self.top = ConvBN(sum(widths), m.head_width, 1, same=same)
        self.logits = nn.Conv2d(m.head_width, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xs = [self.stem(x)]
        for trans, mods in self.stages:
            new = trans[-1](xs[-1])
            xs = [t(x) for t, x in zip(trans, xs, strict=False)] + [new]
            for mod in mods:
                xs = mod(xs)
        size = xs[0].shape[-2:]
        top = self.top(torch.cat([resize(f, size) for f in xs], 1))
        return self.logits(top)


class MBConv(nn.Module):
    def __init__(self, cin: int, cout: int, k: int, stride: int, expand: int, same: str):
        super().__init__()
        hidden = cin * expand
        if expand != 1:
            self.expand_conv = nn.Conv2d(cin, hidden, 1, bias=False)
            self.bn0 = nn.BatchNorm2d(hidden, eps=1e-3, momentum=0.01)
        self.depthwise = Conv(hidden, hidden, k, stride, groups=hidden, same=same)
        self.bn1 = nn.BatchNorm2d(hidden, eps=1e-3, momentum=0.01)
        self.project = nn.Conv2d(hidden, cout, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout, eps=1e-3, momentum=0.01)
        self.expand, self.skip = expand, stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu6(self.bn0(self.expand_conv(x))) if self.expand != 1 else x
        y = self.bn2(self.project(F.relu6(self.bn1(self.depthwise(y)))))
        return y + x if self.skip else y


class LiteSegmenter(nn.Module):
    """EfficientNet-Lite0 segmenter as `Segmenter(backbone="efficientnet_lite0")`."""

    def __init__(self, m: Any, in_channels: int, same: str = "torch"):
        super().__init__()
        maps, self.fine = in_channels - 3, bool(m.get("fine_head", False))
        self.prompt_a = Conv(maps, 16, 3, 2, bias=True, same=same)
        self.prompt_b = Conv(16, 32, 3, same=same)
        self.conv_stem = Conv(3, 32, 3, 2, same=same)
        self.bn0 = nn.BatchNorm2d(32, eps=1e-3, momentum=0.01)
        blocks, cin = [], 32
        for repeats, k, stride, expand, cout in LITE0_STAGES:
            for r in range(repeats):
                blocks.append(MBConv(cin, cout, k, stride if r == 0 else 1, expand, same))
                cin = cout
        self.blocks = nn.ModuleList(blocks)
        w = m.head_width
        self.laterals = nn.ModuleList(nn.Conv2d(c, w, 1) for c in (320, 112, 40, 24))
        self.head_a = ConvBN(w + maps, w, same=same)
        self.head_b = ConvBN(w, w, same=same)
        self.mask_logits = nn.Conv2d(w, 1, 1)
        if self.fine:
            self.reduce_top, self.reduce_fine = nn.Conv2d(w, 16, 1), nn.Conv2d(16, 16, 1)
            self.fine_conv = ConvBN(32 + maps, 16, same=same)
            self.delta = nn.Conv2d(16, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rgb, maps = x[:, :3], x[:, 3:]
        extra = self.prompt_b(F.relu(self.prompt_a(maps)))
        y = F.relu6(self.bn0(self.conv_stem(rgb) + extra))
        taps = []
        for index, block in enumerate(self.blocks):
            y = block(y)
            if index in TAP_BLOCKS or (self.fine and index == 0):
                taps.append(y)
        fine, feats = (taps[0], taps[1:]) if self.fine else (None, taps)
        top = None
        for lateral, feature in zip(self.laterals, reversed(feats), strict=True):
            lat = lateral(feature)
            top = lat if top is None else lat + resize(top, feature.shape[-2:])
        small = F.avg_pool2d(maps, x.shape[-1] // feats[0].shape[-1])
        top = self.head_b(self.head_a(torch.cat([top, small], 1)))
        logits = self.mask_logits(top)
        if fine is not None:
            size = fine.shape[-2:]
            maps2 = F.avg_pool2d(maps, x.shape[-1] // fine.shape[-1])
            z = torch.cat([resize(self.reduce_top(top), size), self.reduce_fine(fine), maps2], 1)
            logits = resize(logits, size) + self.delta(self.fine_conv(z))
        return logits


class TorchSegmenter(nn.Module):
    """The segmenter `config.model` describes: x f32[B, C, H, W] (RGB 0..255 then the prompt
    maps) -> mask logits f32[B, H, W]; RGB is normalised inside, as in the JAX model."""

    def __init__(self, model_config: Any, in_channels: int = 6, same: str = "torch"):
        super().__init__()
        self.lite = model_config.get("backbone", "hrnet18s") == "efficientnet_lite0"
        if model_config.get("multihead", False):
            raise ValueError("the torch port has no multi-head branches")
        cls = LiteSegmenter if self.lite else HRNetSegmenter
        self.net = cls(model_config, in_channels, same)
        self.register_buffer("mean", torch.tensor(RGB_MEAN).view(1, 3, 1, 1) * 255.0)
        self.register_buffer("std", torch.tensor(RGB_STD).view(1, 3, 1, 1) * 255.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.cat([(x[:, :3] - self.mean) / self.std, x[:, 3:]], 1)
        return resize(self.net(x), x.shape[-2:])[:, 0]


def focal_loss(logits: torch.Tensor, target: torch.Tensor, alpha: float = 0.5,
               gamma: float = 2.0) -> torch.Tensor:  # fmt: skip
    """`dig_jax.train.losses.normalized_focal_loss` (void = 255 ignored), batch mean."""
    valid = (target != 255).float()
    positive = target == 1
    log_pt = torch.where(positive, F.logsigmoid(logits), F.logsigmoid(-logits))
    beta = (1.0 - log_pt.exp()) ** gamma * valid
    count = valid.sum((1, 2), keepdim=True)
    beta = beta * (count / (beta.sum((1, 2), keepdim=True) + 1e-8)).detach()
    alpha_t = torch.where(positive, alpha, 1.0 - alpha)
    per_sample = (-alpha_t * beta * log_pt).sum((1, 2)) / count[:, 0, 0].clamp(min=1.0)
    return per_sample.mean()


def _flax_leaves(model: Any, variables: dict[str, Any], x: np.ndarray, col: str) -> list:
    """(path, array) leaves of `variables[col]` in the order Flax creates them (the order of the
    first call of each module that owns variables; a module's own leaves kernel, scale, bias /
    mean, var), recorded by intercepting the module calls of one `apply`."""
    import flax.linen as fnn

    order: list[tuple[str, ...]] = []

    def record(next_fun, args, kwargs, context):
        if context.method_name == "__call__" and context.module.path not in order:
            order.append(context.module.path)
        return next_fun(*args, **kwargs)

    with fnn.intercept_methods(record):
        model.apply(variables, x, train=False)
    rank = {"kernel": 0, "scale": 1, "bias": 2, "mean": 0, "var": 1}
    out = []
    for path in order:
        node = variables.get(col, {})
        for key in path:
            node = node.get(key, {}) if hasattr(node, "get") else {}
        own = [k for k, v in node.items() if not hasattr(v, "items")] if node else []
        for key in sorted(own, key=rank.__getitem__):
            out.append(("/".join((*path, key)), np.asarray(node[key])))
    return out


def _torch_order(module: nn.Module, kind: str) -> list[tuple[str, torch.Tensor]]:
    """Parameters ('params') or BatchNorm statistics ('stats') in Flax's order: conv weight
    before BatchNorm scale/bias; running mean before variance."""
    if kind == "params":
        return list(module.named_parameters())
    return [
        (n, b) for n, b in module.named_buffers() if n.endswith(("running_mean", "running_var"))
    ]


def _to_torch(path: str, value: np.ndarray, target: torch.Tensor) -> torch.Tensor:
    if value.ndim == 4:  # HWIO -> OIHW (depthwise: HW1C -> C1HW)
        value = np.transpose(value, (3, 2, 0, 1))
    elif value.ndim == 2:  # Dense (in, out) -> (out, in)
        value = value.T
    if tuple(value.shape) != tuple(target.shape):
        raise ValueError(f"{path}: Flax shape {value.shape} != torch {tuple(target.shape)}")
    return torch.from_numpy(np.array(value, np.float32, copy=True))


def load_flax_variables(
    model: TorchSegmenter, flax_model: Any, variables: dict[str, Any], x: np.ndarray
) -> TorchSegmenter:
    """Copy Flax variables (params + batch_stats of the matching `Segmenter`) into `model`,
    leaf by leaf in creation order (both sides create their layers in the same order)."""
    for kind, col in (("params", "params"), ("stats", "batch_stats")):
        leaves = _flax_leaves(flax_model, variables, x, col)
        targets = _torch_order(model, kind)
        if len(leaves) != len(targets):
            raise ValueError(f"{col}: {len(leaves)} Flax leaves vs {len(targets)} torch tensors")
        with torch.no_grad():
            for (path, value), (_, tensor) in zip(leaves, targets, strict=True):
                tensor.copy_(_to_torch(path, value, tensor))
    return model


def parity(config: Any, side: int = 64, batch: int = 2) -> float:
    """Max |JAX − torch| logit difference for random weights and input (inference mode)."""
    import jax

    from dig_jax.models.interactive import build_segmenter

    model = build_segmenter(config.model)
    rng = np.random.default_rng(0)
    x = np.concatenate(
        [rng.uniform(0, 255, (batch, side, side, 3)), rng.uniform(0, 1, (batch, side, side, 3))],
        -1,
    ).astype(np.float32)
    variables = model.init(jax.random.key(0), x, train=False)
    variables = jax.tree.map(  # non-trivial BatchNorm statistics and a non-zero fine-head delta
        lambda v: v + rng.normal(0, 0.05, v.shape).astype(np.float32), variables
    )
    variables["batch_stats"] = jax.tree.map(np.abs, variables["batch_stats"])
    want = np.asarray(model.apply(variables, x, train=False)["mask"])
    ported = TorchSegmenter(config.model, x.shape[-1], same="tf")
    load_flax_variables(ported, model, variables, x)
    with torch.no_grad():
        got = ported.eval()(torch.from_numpy(x).permute(0, 3, 1, 2)).numpy()
    return float(np.abs(got - want).max())


def main(argv: list[str] | None = None) -> int:
    from dig_jax.train.config import base_config, with_lite_backbone

    quick = "--quick" in (argv if argv is not None else sys.argv[1:])
    variant = "tiny" if quick else "offline"
    configs = {"hrnet18s": base_config(variant),
               "efficientnet_lite0": with_lite_backbone(base_config(variant))}  # fmt: skip
    for name, config in configs.items():
        config.model.pretrained = ""
        diff = parity(config)
        print(f"{name} ({variant}): max |JAX - torch| logit difference {diff:.2e}")
        if not diff < 1e-3:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
