"""Depthwise convolutions: the C++ kernels (`native`) against the pure-XLA shift form and torch.

    python benchmarks/depthwise.py [--batch 8] [--side 256] [--iters 15] [--quick]

For every depthwise layer of the EfficientNet-Lite0 backbone at `--side` input (the shapes its
16 blocks see, batch `--batch`), ms of the forward and of forward + both gradients for `shift`
(`dig_jax.cpu.depthwise.shift_depthwise_conv`), `native` (`native_depthwise_conv`) and, where
torch is installed, torch's `channels_last` depthwise `Conv2d` on 2 threads; then the ratios
shift / native and torch / native (> 1: native faster). All compiled in one process and timed
interleaved round by round, median of `--iters`, on jemalloc where it is installed (as the
entry points run: `dig_jax.cpu.prepare_entry_point`). `--quick`: three small layers, 3 iterations
(a smoke run for `make bench`). Without a C++ compiler the native column is skipped with the
reason.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from dig_jax.cpu import native, prepare_entry_point, train_compiler_options
from dig_jax.cpu.depthwise import native_depthwise_conv
from dig_jax.cpu.depthwise import shift_depthwise_conv as depthwise_conv
from dig_jax.cpu.memory import jemalloc_loaded
from dig_jax.models.efficientnet_lite import block_specs


def lite_layers(batch: int, side: int) -> list[tuple[int, int, int, int, int]]:
    """(batch, input side, channels, kernel, stride) of the backbone's depthwise layers."""
    layers, size = [], side // 2  # after the stride-2 stem
    for cin, _, kernel, stride, expand in block_specs():
        layers.append((batch, size, cin * expand, kernel, stride))
        size = -(-size // stride)
    return layers


def _jax_calls(op, x, w, g, stride: int) -> tuple:
    options = train_compiler_options() or None
    forward = jax.jit(lambda x, w: op(x, w, stride), compiler_options=options)
    both = jax.jit(
        lambda x, w, g: jax.vjp(lambda x, w: op(x, w, stride), x, w)[1](g),
        compiler_options=options,
    )
    forward, both = forward.lower(x, w).compile(), both.lower(x, w, g).compile()
    return (lambda: forward(x, w).block_until_ready(), lambda: jax.block_until_ready(both(x, w, g)))


def _torch_calls(x: np.ndarray, w: np.ndarray, g: np.ndarray, stride: int) -> tuple | None:
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(2)
    k, channels = w.shape[0], w.shape[2]
    cl = torch.channels_last
    conv = torch.nn.Conv2d(channels, channels, k, stride, k // 2, groups=channels, bias=False)
    conv = conv.to(memory_format=cl)
    xt = torch.from_numpy(x).permute(0, 3, 1, 2).contiguous(memory_format=cl).requires_grad_()
    gt = torch.from_numpy(g).permute(0, 3, 1, 2).contiguous(memory_format=cl)

    def forward() -> None:
        with torch.no_grad():
            conv(xt)

    def both() -> None:
        conv.zero_grad(set_to_none=True)
        xt.grad = None
        conv(xt).backward(gt)

    return forward, both


def layer_row(layer: tuple[int, int, int, int, int], iters: int, use_native: bool) -> dict:
    batch, side, channels, k, stride = layer
    rng = np.random.default_rng(0)
    x = rng.normal(size=(batch, side, side, channels)).astype(np.float32)
    w = rng.normal(size=(k, k, channels)).astype(np.float32)
    out = -(-side // stride)
    g = rng.normal(size=(batch, out, out, channels)).astype(np.float32)
    xj, wj, gj = jnp.asarray(x), jnp.asarray(w), jnp.asarray(g)
    calls = {"shift": _jax_calls(depthwise_conv, xj, wj, gj, stride)}
    if use_native:
        calls["native"] = _jax_calls(native_depthwise_conv, xj, wj, gj, stride)
    torch_calls = _torch_calls(x, w, g, stride)
    if torch_calls is not None:
        calls["torch"] = torch_calls
    flat = {(name, part): fn for name, fns in calls.items() for part, fn in enumerate(fns)}
    for fn in flat.values():  # warm-up
        fn()
        fn()
    times = {key: [] for key in flat}
    keys = list(flat)
    for round_ in range(iters):
        for key in keys[round_ % len(keys) :] + keys[: round_ % len(keys)]:
            start = time.perf_counter()
            flat[key]()
            times[key].append(time.perf_counter() - start)
    return {key: statistics.median(v) * 1e3 for key, v in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--side", type=int, default=256)
    parser.add_argument("--iters", type=int, default=15)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    # As the entry points run: on jemalloc where installed (torch, in this process, too); on
    # glibc the buffers above its mmap threshold (32 MiB) are mapped and faulted in on every
    # call, which doubled some layers' times.
    prepare_entry_point()
    jax.config.update("jax_platforms", "cpu")
    use_native = native.load_kernels()
    if not use_native:
        print("native kernels unavailable (see the warning above): shift and torch only")
    if args.quick:
        layers, iters = [(2, 16, 16, 3, 1), (2, 16, 24, 5, 2), (1, 9, 8, 3, 2)], 3
    else:
        layers, iters = lite_layers(args.batch, args.side), args.iters
    allocator = "jemalloc" if jemalloc_loaded() else "glibc malloc"
    print(f"depthwise layers of EfficientNet-Lite0, ms (median of {iters}, interleaved, "
          f"{allocator}); ratios > 1: native faster")  # fmt: skip
    print("| batch × side² × C, k, s | shift fwd | native fwd | torch fwd | shift fwd+bwd "
          "| native fwd+bwd | torch fwd+bwd | shift / native fwd+bwd "
          "| torch / native fwd+bwd |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    totals: dict = {}
    for layer in layers:
        row = layer_row(layer, iters, use_native)
        for key, value in row.items():
            totals[key] = totals.get(key, 0.0) + value
        print(_format(f"{layer[0]} × {layer[1]}² × {layer[2]}, {layer[3]}, {layer[4]}", row))
        sys.stdout.flush()
    print(_format("**all layers**", totals))
    return 0


def _format(label: str, row: dict) -> str:
    cell = lambda key: f"{row[key]:.2f}" if key in row else "–"
    ratio = lambda a, b: f"{row[a] / row[b]:.2f}" if a in row and b in row else "–"
    cells = [cell((name, part)) for part in (0, 1) for name in ("shift", "native", "torch")]
    ratios = [ratio(("shift", 1), ("native", 1)), ratio(("torch", 1), ("native", 1))]
    return f"| {label} | " + " | ".join(cells + ratios) + " |"


if __name__ == "__main__":
    sys.exit(main())
