"""Depthwise convolution on CPU: fused shift-and-multiply-adds, and the C++ kernels.

XLA's CPU backend lowers `lax.conv_general_dilated(..., feature_group_count=C)` to a generic
grouped convolution that runs at 1–2 GFLOP/s, against 60–270 GFLOP/s for dense convolutions.
A depthwise k×k convolution is only k² shifted views of the padded input, each scaled by one
weight per channel, summed: XLA fuses that into one elementwise loop. The backward pass is the
same trick (a custom VJP): the input gradient is the output gradient (dilated for strides > 1)
correlated with the flipped kernel, the kernel gradient k² channel-wise reductions.

Padding is TensorFlow's SAME (the extra pixel at the bottom/right), as EfficientNet-Lite's
ImageNet weights expect. `depthwise_conv` picks the form by the switch (`dig_jax.cpu.switch`):
XLA's grouped convolution when off or off CPU; the shifted sums (custom VJP in reverse-mode-only
traces, plain differentiable ops otherwise); with `DIG_JAX_CPU=native` the C++ kernels (custom
VJP in reverse-mode-only traces, a forward-mode-aware forward otherwise).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from dig_jax.cpu import switch
from dig_jax.cpu.native import load_kernels

CHUNK_BYTES = 1 << 20  # the kernel gradient's working set per loop step (fits in L2)
SMALL_GRAD_BYTES = 8 << 20  # up to this output gradient size the kernel gradient has no loop


def same_padding(size: int, kernel: int, stride: int) -> tuple[int, int, int]:
    """(output size, pad before, pad after) of TF-style SAME padding along one axis."""
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return out, total // 2, total - total // 2


def _taps_sum(xp: jax.Array, w: jax.Array, out_hw: tuple[int, int], stride: int) -> jax.Array:
    """Σ_ij xp[:, i + s·h, j + s·w, :] · w[i, j]: xp f32[B, H', W', C], w f32[k, k, C]."""
    k = w.shape[0]
    oh, ow = out_hw
    total = None
    for i in range(k):
        for j in range(k):
            tap = lax.slice(
                xp,
                (0, i, j, 0),
                (xp.shape[0], i + (oh - 1) * stride + 1, j + (ow - 1) * stride + 1, xp.shape[3]),
                (1, stride, stride, 1),
            )
            term = tap * w[i, j]
            total = term if total is None else total + term
    return total


def _pads(x_shape: tuple[int, ...], k: int, stride: int):
    oh, top, bottom = same_padding(x_shape[1], k, stride)
    ow, left, right = same_padding(x_shape[2], k, stride)
    return (oh, ow), ((0, 0), (top, bottom), (left, right), (0, 0))


def depthwise_conv(x: jax.Array, kernel: jax.Array, stride: int = 1) -> jax.Array:
    """Depthwise conv, SAME padding: x f32[B, H, W, C], kernel f32[k, k, C] -> [B, ⌈H/s⌉, ⌈W/s⌉, C],
    in the form the switch picks (module docstring); the same values to float rounding."""
    if not switch.active():
        return depthwise_conv_reference(x, kernel, stride)
    reverse = switch.in_reverse_mode_only()
    if switch.native_requested() and load_kernels():
        op = native_depthwise_conv if reverse else native_depthwise_forward
    else:
        op = shift_depthwise_conv if reverse else shift_forward
    return op(x, kernel, stride)


def shift_forward(x: jax.Array, kernel: jax.Array, stride: int = 1) -> jax.Array:
    """The shifted-sums depthwise convolution as plain differentiable ops."""
    out_hw, pads = _pads(x.shape, kernel.shape[0], stride)
    return _taps_sum(jnp.pad(x, pads), kernel.astype(x.dtype), out_hw, stride)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def shift_depthwise_conv(x: jax.Array, kernel: jax.Array, stride: int = 1) -> jax.Array:
    """`shift_forward` with its backward pass as shifted sums too (several times faster on CPU
    than XLA's grouped convolution's); reverse mode only."""
    return shift_forward(x, kernel, stride)


def _fwd(x, kernel, stride):
    return shift_forward(x, kernel, stride), (x, kernel)


def _bwd(stride, residuals, g):
    x, kernel = residuals
    k = kernel.shape[0]
    _, pads = _pads(x.shape, k, stride)
    (_, (top, _), (left, _), _) = pads
    # Input gradient: g dilated by the stride, padded by k - 1, correlated with the flipped
    # kernel; only the rows/columns of the unpadded input are computed.
    gd = lax.pad(
        g,
        jnp.zeros((), g.dtype),
        ((0, 0, 0), (k - 1, k - 1, stride - 1), (k - 1, k - 1, stride - 1), (0, 0, 0)),
    )
    start = (0, top, left, 0)
    height, width = x.shape[1], x.shape[2]
    # Rows of gd beyond what the input covers are never read; pad gd so every slice fits.
    need_h = top + height + k - 1 - gd.shape[1]
    need_w = left + width + k - 1 - gd.shape[2]
    if need_h > 0 or need_w > 0:
        gd = jnp.pad(gd, ((0, 0), (0, max(need_h, 0)), (0, max(need_w, 0)), (0, 0)))
    gd = lax.slice(
        gd, start, (gd.shape[0], top + height + k - 1, left + width + k - 1, gd.shape[3])
    )
    dx = _taps_sum(gd, kernel[::-1, ::-1].astype(g.dtype), (height, width), 1)
    dk = _kernel_grad(jnp.pad(x, pads), g, k, stride).astype(kernel.dtype)
    return dx.astype(x.dtype), dk


def _tap_sums(xs: jax.Array, gs: jax.Array, k: int, stride: int, axes: tuple[int, ...]):
    """f[k, k, C]: Σ over `axes` of the (i, j)-shifted, strided view of xs times gs, for all k²
    taps in one variadic reduction (one pass over gs instead of k²)."""
    rows, ow = gs.shape[-3], gs.shape[-2]
    lead = xs.shape[:-3]
    products = [
        lax.slice(
            xs,
            (*(0 for _ in lead), i, j, 0),
            (*lead, i + (rows - 1) * stride + 1, j + (ow - 1) * stride + 1, xs.shape[-1]),
            (*(1 for _ in lead), stride, stride, 1),
        )
        * gs
        for i in range(k)
        for j in range(k)
    ]
    zeros = [jnp.zeros((), gs.dtype)] * len(products)
    sums = lax.reduce(
        products, zeros, lambda a, b: [u + v for u, v in zip(a, b, strict=True)], axes
    )
    return jnp.stack(sums).reshape(k, k, xs.shape[-1])


def _kernel_grad(xp: jax.Array, g: jax.Array, k: int, stride: int) -> jax.Array:
    """dk[i, j, c] = Σ_{n,h,w} xp[n, s·h + i, s·w + j, c] · g[n, h, w, c], f32[k, k, C].

    The k² tap sums are one variadic reduction, so g is read once. When g is larger than
    SMALL_GRAD_BYTES the reduction runs over blocks of output rows that fit in cache (about
    CHUNK_BYTES of g), else over the whole batch at once (the loop's overhead then dominates).
    """
    batch, oh, ow, channels = g.shape
    if g.size * g.dtype.itemsize <= SMALL_GRAD_BYTES:
        return _tap_sums(xp, g, k, stride, (0, 1, 2))
    # Rows per step: the largest divisor of the output height within the budget (a ragged last
    # block would need padded copies, which XLA handles badly inside the loop).
    budget = max(1, CHUNK_BYTES // (4 * ow * channels))
    rows = max(d for d in range(1, oh + 1) if oh % d == 0 and d <= budget)
    blocks = oh // rows
    in_rows = (rows - 1) * stride + k

    def body(t, acc):
        n, block = t // blocks, t % blocks
        xs = lax.dynamic_slice(
            xp, (n, block * rows * stride, 0, 0), (1, in_rows, xp.shape[2], channels)
        )[0]
        gs = lax.dynamic_slice(g, (n, block * rows, 0, 0), (1, rows, ow, channels))[0]
        return acc + _tap_sums(xs, gs, k, stride, (0, 1))

    return lax.fori_loop(0, batch * blocks, body, jnp.zeros((k, k, channels), g.dtype))


shift_depthwise_conv.defvjp(_fwd, _bwd)


def depthwise_conv_reference(x: jax.Array, kernel: jax.Array, stride: int = 1) -> jax.Array:
    """XLA's grouped convolution with the same SAME padding (the reference for tests)."""
    k = kernel.shape[0]
    _, pads = _pads(x.shape, k, stride)
    return lax.conv_general_dilated(
        x,
        kernel[:, :, None, :].astype(x.dtype),
        (stride, stride),
        [pads[1], pads[2]],
        dimension_numbers=("NHWC", "HWIO", "NHWC"),
        feature_group_count=x.shape[-1],
    )


_KERNEL_GRAD = "dig_jax_depthwise_kernel_grad"


def _fold_channels(a: jax.Array, batched: bool, size: int, axis: int) -> jax.Array:
    """f32[V, ..., C] (or unbatched [..., C], broadcast) -> f32[..., V·C], V placed at `axis`
    of the unbatched shape then merged with the channels that follow it."""
    if not batched:
        a = jnp.broadcast_to(a, (size, *a.shape))
    a = jnp.moveaxis(a, 0, axis)
    return a.reshape(*a.shape[:axis], -1)


def _native_call(target: str, first: jax.Array, second: jax.Array, out_shape: tuple[int, ...],
                 stride: int, pads) -> jax.Array:  # fmt: skip
    """One FFI call; under `vmap` the mapped axis becomes part of the batch axis (only the
    image side mapped: a free reshape) or of the channel axis (the kernel mapped too, or a
    kernel gradient: depthwise channels are independent), so the kernels run once."""

    @jax.custom_batching.custom_vmap
    def call(first: jax.Array, second: jax.Array) -> jax.Array:
        (_, (top, _), (left, _), _) = pads
        ffi = jax.ffi.ffi_call(target, jax.ShapeDtypeStruct(out_shape, jnp.float32))
        return ffi(
            first.astype(jnp.float32), second.astype(jnp.float32),
            stride=np.int64(stride), top=np.int64(top), left=np.int64(left),
        )  # fmt: skip

    @call.def_vmap
    def _(size: int, in_batched: list[bool], first: jax.Array, second: jax.Array):
        first_batched, second_batched = in_batched
        if target != _KERNEL_GRAD and not second_batched:  # images mapped, one kernel
            merged = first.reshape(-1, *first.shape[2:])
            out = _native_call(target, merged, second, (size * out_shape[0], *out_shape[1:]),
                               stride, pads)  # fmt: skip
            return out.reshape(size, *out_shape), True
        # Image side [N, H, W, C] -> [N, H, W, V·C]; kernel or dy likewise.
        second_axis = 3 if target == _KERNEL_GRAD else 2
        out = _native_call(
            target, _fold_channels(first, first_batched, size, 3),
            _fold_channels(second, second_batched, size, second_axis),
            (*out_shape[:-1], size * out_shape[-1]), stride, pads,
        )  # fmt: skip
        out = out.reshape(*out_shape[:-1], size, out_shape[-1])
        return jnp.moveaxis(out, -2, 0), True

    return call(first, second)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def native_depthwise_conv(x: jax.Array, kernel: jax.Array, stride: int = 1) -> jax.Array:
    """`depthwise_conv` by the C++ kernels of `dig_jax.cpu.native` (CPU only; float32 inside):
    x f32[B, H, W, C], kernel f32[k, k, C] -> f32[B, ⌈H/s⌉, ⌈W/s⌉, C].

    Forward and both gradients vectorise over the channels and run on XLA's intra-op threads
    (docs/speed.md has their measurements). Call only when `load_kernels()` is True."""
    out_hw, pads = _pads(x.shape, kernel.shape[0], stride)
    shape = (x.shape[0], *out_hw, x.shape[3])
    return _native_call("dig_jax_depthwise_forward", x, kernel, shape, stride, pads).astype(x.dtype)


def _native_fwd(x, kernel, stride):
    return native_depthwise_conv(x, kernel, stride), (x, kernel)


def _native_bwd(stride, residuals, g):
    x, kernel = residuals
    _, pads = _pads(x.shape, kernel.shape[0], stride)
    dx = _native_call("dig_jax_depthwise_input_grad", g, kernel, x.shape, stride, pads)
    dk = _native_call(_KERNEL_GRAD, x, g, kernel.shape, stride, pads)
    return dx.astype(x.dtype), dk.astype(kernel.dtype)


native_depthwise_conv.defvjp(_native_fwd, _native_bwd)


@functools.partial(jax.custom_jvp, nondiff_argnums=(2,))
def native_depthwise_forward(x: jax.Array, kernel: jax.Array, stride: int = 1) -> jax.Array:
    """The C++ forward pass, differentiable in either mode: its tangent (and, transposed, its
    reverse-mode gradient) is that of XLA's grouped convolution."""
    out_hw, pads = _pads(x.shape, kernel.shape[0], stride)
    shape = (x.shape[0], *out_hw, x.shape[3])
    return _native_call("dig_jax_depthwise_forward", x, kernel, shape, stride, pads).astype(x.dtype)


@native_depthwise_forward.defjvp
def _native_forward_jvp(stride, primals, tangents):
    x, kernel = primals
    reference = functools.partial(depthwise_conv_reference, stride=stride)
    _, tangent = jax.jvp(reference, primals, tangents)
    return native_depthwise_forward(x, kernel, stride), tangent
