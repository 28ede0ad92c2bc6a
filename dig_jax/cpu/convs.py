"""`Conv`: `flax.linen.Conv` with faster CPU lowerings of common cases (same parameters, same
values to float rounding), where the switch is on (`dig_jax.cpu.switch`; plain `nn.Conv`
otherwise). The cases that change only the backward pass (custom VJPs) apply in
reverse-mode-only traces; elsewhere the forward pass is plain (or, for the C++ kernel,
forward-mode aware), so `jax.jvp` works through every model.

Measured on the 2-core CPU (`benchmarks/lowerings.py`):

- **1x1, stride 1**: a matrix product over the flattened pixels. XLA lowers a 1x1 convolution's
  weight gradient to a convolution over transposed copies of both operands, and YNNPACK's 1x1
  forward convolution is slower than its matrix product; as `dot_general` the weight gradient is
  one product xᵀ·g over [B·H·W, C] views.
- **3x3, stride 2, SAME, even height and width**: the forward pass and the weight gradient stay
  XLA's; the input gradient, which XLA computes as a convolution over the 2x-dilated output
  gradient (three quarters of its products are with inserted zeros), is one 2x2 stride-1
  convolution with 4·C output channels (one per output phase) followed by depth-to-space.

- **3x3 weight gradients at small batch on CPU** (batch <= `SMALL_BATCH`): XLA's CPU weight
  gradient of a SAME convolution is a convolution whose feature axis is the batch; with two
  images it ran 1.9-5.5x slower than torch's oneDNN. The same gradient taken from a VALID
  convolution of the explicitly padded input (stride 1; the same sums, equal bits in the cases
  checked) or from a 2x2 stride-1 convolution of the input's space-to-depth (stride 2; the four
  pixel phases as channels, whose taps are the 3x3 kernel's; equal to float rounding) was
  1.4-2.4x (stride 1) and 1.1-2x (stride 2) faster on HRNet-18s's layers at batch 2. At batch 8
  XLA's own was as fast or faster, so it stays there (and on other backends). Where the input
  is at least `WIDE_INPUT` times wider than the output (HRNet-18s's 256 -> 18 and 256 -> 36
  transition layers), that VALID kernel gradient is one matrix product against shifted copies
  of the narrow cotangent instead (`shifted_product_kernel_grad`): XLA's form transposes the
  wide input to put the batch last, a copy that ran at ~0.7 GB/s and cost ~47 ms per layer
  in the HRNet-18s train step at batch 2 x 512²; that step 1.02-1.04x faster (alternating calls
  in one process, five runs).

- **3x3 convolutions on CPU** (`DIG_JAX_CPU=native`, where `dig_jax.cpu.native` builds; float32):
  SAME 3x3 convolutions at stride 1 or 2 run forward as the C++ kernel of `dig_jax.cpu.native`
  (`conv.cc`, a register-tiled direct convolution), and so does the stride-1 input gradient
  (the forward convolution of the output gradient with the flipped, transposed kernel); their
  kernel gradients are `conv.cc`'s too; the stride-2 input gradient keeps the phase form.
  YNNPACK, XLA's CPU convolution, ran HRNet-18s's narrow layers 1.5-3x slower than torch's
  oneDNN (18 -> 18 channels at 64² x 8 images: 5.3-6.4 against 2.6 ms; the kernel 2.8-3.2)
  on the machine they were written on; on others they were slower (docs/speed.md), so they are
  opt-in.

Every other configuration is `flax.linen.Conv` unchanged. The class is named `Conv` so Flax's
automatic names (`Conv_0`, ...) and the parameter tree do not change.
"""

from __future__ import annotations

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from dig_jax.cpu import switch
from dig_jax.cpu.depthwise import same_padding
from dig_jax.cpu.materialize import materialize
from dig_jax.cpu.native import load_kernels

_NHWC = ("NHWC", "HWIO", "NHWC")
SMALL_BATCH = 4  # images; up to this batch the CPU weight gradients below are used
NATIVE_INPUT_GRAD = True  # native 3x3: the stride-1 input gradient natively too
NATIVE_KERNEL_GRAD = True  # native 3x3: the kernel gradients natively too

# Phase p of the input gradient along one axis, as taps of a 2-wide window over the output
# gradient padded by one in front: {window tap: kernel tap}. With SAME padding on an even size
# (pad 0 before, 1 after), x[2r] feeds y[r] through tap 0 and y[r-1] through tap 2, x[2r+1]
# feeds y[r] through tap 1.
_PHASE_TAPS = ({0: 2, 1: 0}, {1: 1})


def _conv3x3_stride2(x: jax.Array, kernel: jax.Array) -> jax.Array:
    return jax.lax.conv_general_dilated(x, kernel, (2, 2), "SAME", dimension_numbers=_NHWC)


def _conv3x3(x: jax.Array, kernel: jax.Array) -> jax.Array:
    return jax.lax.conv_general_dilated(x, kernel, (1, 1), "SAME", dimension_numbers=_NHWC)


def _small_batch_on_cpu(x: jax.Array) -> bool:
    return x.shape[0] <= SMALL_BATCH and switch.active()


def _kernel_grad_of(conv, x: jax.Array, kernel_shape: tuple[int, ...], grad: jax.Array):
    """The kernel cotangent of `conv(x, kernel)` for output cotangent `grad`."""
    zeros = jnp.zeros(kernel_shape, grad.dtype)
    return jax.vjp(lambda k: conv(x, k), zeros)[1](grad)[0]


def _valid(x: jax.Array, kernel: jax.Array) -> jax.Array:
    return jax.lax.conv_general_dilated(x, kernel, (1, 1), "VALID", dimension_numbers=_NHWC)


def shifted_product_kernel_grad(x: jax.Array, grad: jax.Array) -> jax.Array:
    """Kernel gradient f32[K, L, C, O] of the VALID stride-1 convolution of f32[B, H, W, C] for
    output cotangent f32[B, H - K + 1, W - L + 1, O], as one matrix product: the K·L copies of
    the cotangent shifted into x's frame (zero filled) against x, over all B·H·W pixels,
    dW[a, b] = Σ_p x[p]ᵀ · grad[p - (a, b)].

    Used where C ≥ `WIDE_INPUT`·O: XLA's convolution form transposes x to put the batch last
    (a transposed copy of the wide operand, ~0.7 GB/s on this CPU), while the shifted copies
    are of the narrow one."""
    batch, height, width, channels = x.shape
    rows, cols, outputs = height - grad.shape[1] + 1, width - grad.shape[2] + 1, grad.shape[-1]
    grad = materialize(grad)  # else XLA fuses its producers into each of the K·L copies
    shifted = jnp.stack([
        jnp.pad(grad, ((0, 0), (a, rows - 1 - a), (b, cols - 1 - b), (0, 0)))
        for a in range(rows) for b in range(cols)
    ], axis=3).reshape(batch * height * width, rows * cols * outputs)  # fmt: skip
    product = jax.lax.dot_general(x.reshape(-1, channels), shifted, (((0,), (0,)), ((), ())))
    return product.reshape(channels, rows, cols, outputs).transpose(1, 2, 0, 3)


# Input channels (after space-to-depth for stride 2) per output channel from which the shifted
# product is the faster kernel gradient at batch 2 (HRNet-18s's 256->18 stride-1 layer at 128²:
# 75 -> 50 ms, 256->36 stride 2: 54 -> 33 ms; equal widths 0.9-1.1x, 6->64 at 512² 0.5x).
WIDE_INPUT = 8


def _valid_kernel_grad(x: jax.Array, grad: jax.Array, kernel_shape: tuple[int, ...]):
    if x.shape[-1] >= WIDE_INPUT * grad.shape[-1]:
        return shifted_product_kernel_grad(x, grad)
    return _kernel_grad_of(_valid, x, kernel_shape, grad)


def padded_kernel_grad(x: jax.Array, grad: jax.Array, kernel_shape: tuple[int, ...]):
    """Kernel gradient f32[3, 3, C, O] of the SAME 3x3 stride-1 convolution of f32[B, H, W, C]
    for output cotangent f32[B, H, W, O], as that of a VALID convolution of x padded by one."""
    padded = jnp.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    return _valid_kernel_grad(padded, grad, kernel_shape)


# Stride 2, SAME, even size (pad 0 before, 1 after): input row 2r + t feeds output row r through
# tap t; as phase t % 2 of the space-to-depth input at row r + t // 2, i.e. 2x2 tap t // 2.
_S2D_TAP = ((0, 0), (0, 1), (1, 0))  # 3x3 tap t -> (2x2 tap, phase)


def space_to_depth_kernel_grad(x: jax.Array, grad: jax.Array, kernel_shape: tuple[int, ...]):
    """Kernel gradient f32[3, 3, C, O] of the SAME 3x3 stride-2 convolution of f32[B, H, W, C]
    (H, W even) for output cotangent f32[B, H/2, W/2, O], from the 2x2 stride-1 convolution of
    x's space-to-depth (channels ordered row phase, column phase, channel)."""
    batch, height, width, channels = x.shape
    phases = x.reshape(batch, height // 2, 2, width // 2, 2, channels).transpose(0, 1, 3, 2, 4, 5)
    phases = phases.reshape(batch, height // 2, width // 2, 4 * channels)
    phases = jnp.pad(phases, ((0, 0), (0, 1), (0, 1), (0, 0)))
    cout = kernel_shape[-1]
    taps = _valid_kernel_grad(phases, grad, (2, 2, 4 * channels, cout))
    taps = taps.reshape(2, 2, 2, 2, channels, cout)  # [row tap, col tap, row phase, col phase]
    return jnp.stack([
        jnp.stack([taps[a, b, p, q] for b, q in _S2D_TAP]) for a, p in _S2D_TAP
    ])  # fmt: skip


def _ffi_conv(target: str, x: jax.Array, second: jax.Array, out_shape: tuple[int, ...],
              stride: int) -> jax.Array:  # fmt: skip
    """One call of a `conv.cc` target on image x f32[B, H, W, C] and the kernel or output
    gradient, with TF SAME's top / left offsets for a 3x3 window at `stride`."""
    _, top, _ = same_padding(x.shape[1], 3, stride)
    _, left, _ = same_padding(x.shape[2], 3, stride)
    ffi = jax.ffi.ffi_call(target, jax.ShapeDtypeStruct(out_shape, x.dtype))
    return ffi(x, second, stride=np.int64(stride), top=np.int64(top), left=np.int64(left))


def native_conv3x3(x: jax.Array, kernel: jax.Array, stride: int) -> jax.Array:
    """SAME 3x3 convolution of f32[B, H, W, C] with f32[3, 3, C, O] at `stride` (1 or 2) ->
    f32[B, ⌈H/s⌉, ⌈W/s⌉, O], forward only, by `dig_jax.cpu.native`'s kernel (CPU; call only where
    `load_kernels()` is True). Under `vmap` a mapped image axis joins the batch axis (one call);
    a mapped kernel falls back to XLA's convolution."""
    out_shape = (x.shape[0], -(-x.shape[1] // stride), -(-x.shape[2] // stride), kernel.shape[-1])

    @jax.custom_batching.custom_vmap
    def call(x: jax.Array, kernel: jax.Array) -> jax.Array:
        return _ffi_conv("dig_jax_conv_forward", x, kernel, out_shape, stride)

    @call.def_vmap
    def _(size: int, in_batched: list[bool], x: jax.Array, kernel: jax.Array):
        x_batched, kernel_batched = in_batched
        if kernel_batched:
            xla = functools.partial(_xla_conv3x3, stride=stride)
            return jax.vmap(xla, in_axes=(0 if x_batched else None, 0))(x, kernel), True
        merged = native_conv3x3(x.reshape(-1, *x.shape[2:]), kernel, stride)
        return merged.reshape(size, *out_shape), True

    return call(x, kernel)


def native_kernel_grad(x: jax.Array, grad: jax.Array, stride: int) -> jax.Array:
    """Kernel gradient f32[3, 3, C, O] of the SAME 3x3 convolution of f32[B, H, W, C] at
    `stride` for output cotangent f32[B, ⌈H/s⌉, ⌈W/s⌉, O], by `dig_jax.cpu.native`'s kernel (CPU;
    call only where `load_kernels()` is True; deterministic: fixed blocks of output rows summed
    in order). Under `vmap` (one kernel gradient per mapped element) XLA's is taken."""
    out_shape = (3, 3, x.shape[-1], grad.shape[-1])

    @jax.custom_batching.custom_vmap
    def call(x: jax.Array, grad: jax.Array) -> jax.Array:
        return _ffi_conv("dig_jax_conv_kernel_grad", x, grad, out_shape, stride)

    @call.def_vmap
    def _(size: int, in_batched: list[bool], x: jax.Array, grad: jax.Array):
        xla = lambda a, g: _kernel_grad_of(
            functools.partial(_xla_conv3x3, stride=stride), a, out_shape, g
        )  # fmt: skip
        return jax.vmap(xla, in_axes=tuple(0 if b else None for b in in_batched))(x, grad), True

    return call(x, grad)


def _xla_conv3x3(x: jax.Array, kernel: jax.Array, stride: int) -> jax.Array:
    strides = (stride, stride)
    return jax.lax.conv_general_dilated(x, kernel, strides, "SAME", dimension_numbers=_NHWC)


def _use_native(*dtypes: object) -> bool:
    """Whether a 3x3 convolution runs natively: every dtype (inputs, parameters, computation)
    float32, `DIG_JAX_CPU=native` on the CPU backend, and the kernels built."""
    return (
        all(jnp.dtype(d) == jnp.float32 for d in dtypes)
        and switch.native_requested() and load_kernels()
    )  # fmt: skip


def flipped_kernel(kernel: jax.Array) -> jax.Array:
    """f32[3, 3, C, O] -> f32[3, 3, O, C]: the kernel whose SAME stride-1 convolution of an
    output gradient is the input gradient (taps reversed, channels swapped)."""
    return kernel[::-1, ::-1].transpose(0, 1, 3, 2)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def native_conv3x3_trainable(x: jax.Array, kernel: jax.Array, stride: int) -> jax.Array:
    """`native_conv3x3` with gradients: the stride-1 input gradient by the same kernel (the
    flipped kernel's forward), the kernel gradient by `native_kernel_grad`, the stride-2 input
    gradient in phases as `conv3x3_stride2` takes it (XLA's at odd sizes). `NATIVE_INPUT_GRAD`
    and `NATIVE_KERNEL_GRAD` (read when the gradient is traced) switch to XLA's forms."""
    return native_conv3x3(x, kernel, stride)


def _native_fwd(x, kernel, stride):
    return native_conv3x3(x, kernel, stride), (x, kernel)


def _native_bwd(stride, residuals, grad):
    x, kernel = residuals
    even = x.shape[1] % 2 == 0 and x.shape[2] % 2 == 0
    if stride == 1 and NATIVE_INPUT_GRAD:
        grad_x = native_conv3x3(grad, flipped_kernel(kernel), 1)
    elif stride == 2 and even:
        grad_x = _stride2_input_grad(x.shape, kernel, grad)
    else:  # XLA's (stride 1 with NATIVE_INPUT_GRAD off; stride 2 at odd sizes)
        grad_x = jax.vjp(lambda inputs: _xla_conv3x3(inputs, kernel, stride), x)[1](grad)[0]
    if NATIVE_KERNEL_GRAD:
        grad_kernel = native_kernel_grad(x, grad, stride)
    elif stride == 1 or even:
        grad_kernel = _kernel_grad(x, grad, kernel.shape, stride)
    else:
        xla = functools.partial(_xla_conv3x3, stride=2)
        grad_kernel = _kernel_grad_of(xla, x, kernel.shape, grad)
    return grad_x, grad_kernel


native_conv3x3_trainable.defvjp(_native_fwd, _native_bwd)


@functools.partial(jax.custom_jvp, nondiff_argnums=(2,))
def native_conv3x3_forward(x: jax.Array, kernel: jax.Array, stride: int) -> jax.Array:
    """`native_conv3x3`, differentiable in either mode: its tangent (and, transposed, its
    reverse-mode gradient) is XLA's convolution's."""
    return native_conv3x3(x, kernel, stride)


@native_conv3x3_forward.defjvp
def _native_forward_jvp(stride, primals, tangents):
    x, kernel = primals
    _, tangent = jax.jvp(functools.partial(_xla_conv3x3, stride=stride), primals, tangents)
    # the primal through this function again: derivatives of any order (Hessian-vector
    # products are forward over reverse) see a differentiable primal
    return native_conv3x3_forward(x, kernel, stride), tangent


@jax.custom_vjp
def conv3x3(x: jax.Array, kernel: jax.Array) -> jax.Array:
    """SAME 3x3 stride-1 convolution of f32[B, H, W, C] with f32[3, 3, C, O] -> f32[B, H, W, O];
    its kernel gradient comes from the padded input (module docstring)."""
    return _conv3x3(x, kernel)


def _conv3x3_fwd(x, kernel):
    return _conv3x3(x, kernel), (x, kernel)


def _kernel_grad(x: jax.Array, grad: jax.Array, kernel_shape: tuple[int, ...], stride: int):
    """Kernel gradient of the SAME 3x3 convolution at `stride` (2: even H, W only): the CPU
    form for small batches on the CPU, else XLA's."""
    if _small_batch_on_cpu(x):
        cpu_form = padded_kernel_grad if stride == 1 else space_to_depth_kernel_grad
        return cpu_form(x, grad, kernel_shape)
    conv = _conv3x3 if stride == 1 else _conv3x3_stride2
    return _kernel_grad_of(conv, x, kernel_shape, grad)


def _conv3x3_bwd(residuals, grad):
    x, kernel = residuals
    _, input_vjp = jax.vjp(lambda inputs: _conv3x3(inputs, kernel), x)
    return input_vjp(grad)[0], padded_kernel_grad(x, grad, kernel.shape)


conv3x3.defvjp(_conv3x3_fwd, _conv3x3_bwd)


def phase_kernel(kernel: jax.Array) -> jax.Array:
    """f32[3, 3, C, O] stride-2 kernel -> f32[2, 2, O, 4·C]: the input gradient's four phases
    (row phase, column phase, channel; row-major) as one 2x2 convolution of the output
    gradient."""
    cin, cout = kernel.shape[2:]
    phases = jnp.zeros((2, 2, cout, 2, 2, cin), kernel.dtype)
    for p, row_taps in enumerate(_PHASE_TAPS):
        for q, col_taps in enumerate(_PHASE_TAPS):
            for u, a in row_taps.items():
                for v, b in col_taps.items():
                    phases = phases.at[u, v, :, p, q, :].set(kernel[a, b].T)
    return phases.reshape(2, 2, cout, 4 * cin)


@jax.custom_vjp
def conv3x3_stride2(x: jax.Array, kernel: jax.Array) -> jax.Array:
    """SAME 3x3 stride-2 convolution of f32[B, H, W, C] (H, W even) with f32[3, 3, C, O] ->
    f32[B, H/2, W/2, O]; its input gradient is computed per output phase (module docstring)."""
    return _conv3x3_stride2(x, kernel)


def _conv3x3_stride2_fwd(x, kernel):
    return _conv3x3_stride2(x, kernel), (x, kernel)


def _stride2_input_grad(x_shape: tuple[int, ...], kernel: jax.Array, grad: jax.Array):
    """Input gradient of `conv3x3_stride2` (even H, W): all four phases as one 2x2 convolution
    of the output gradient, then depth-to-space."""
    batch, height, width, channels = x_shape
    phases = jax.lax.conv_general_dilated(
        grad, phase_kernel(kernel), (1, 1), ((1, 0), (1, 0)), dimension_numbers=_NHWC
    )
    grad_x = phases.reshape(batch, height // 2, width // 2, 2, 2, channels)
    return grad_x.transpose(0, 1, 3, 2, 4, 5).reshape(x_shape)


def _conv3x3_stride2_bwd(residuals, grad):
    x, kernel = residuals
    return _stride2_input_grad(x.shape, kernel, grad), _kernel_grad(x, grad, kernel.shape, 2)


conv3x3_stride2.defvjp(_conv3x3_stride2_fwd, _conv3x3_stride2_bwd)


def _pair(value, default: int = 1) -> tuple[int, ...]:
    if value is None:
        return (default, default)
    return tuple(value) if isinstance(value, (tuple, list)) else (value, value)


class Conv(nn.Conv):
    """`flax.linen.Conv` (same attributes and parameters) with the CPU lowerings described in
    the module docstring where the switch is on."""

    def _plain(self, x: jax.Array) -> bool:
        return (
            not switch.active()
            or x.ndim != 4
            or self.feature_group_count != 1
            or self.mask is not None
            or not self.shared_weights
            or self.conv_general_dilated is not None
            or self.conv_general_dilated_cls is not None
            or _pair(self.kernel_dilation) != (1, 1)
            or _pair(self.input_dilation) != (1, 1)
        )

    def _lowering(self, x: jax.Array) -> str:
        if self._plain(x):
            return "flax"
        kernel, strides = tuple(self.kernel_size), _pair(self.strides)
        if kernel == (1, 1) and strides == (1, 1) and self.padding in ("SAME", "VALID", 0):
            return "pointwise"
        if (
            kernel == (3, 3) and strides in ((1, 1), (2, 2)) and self.padding == "SAME"
            and self.precision is None
            and _use_native(x.dtype, self.param_dtype, self.dtype or jnp.float32)
        ):  # fmt: skip
            return f"native{strides[0]}"
        if (
            kernel == (3, 3) and strides == (2, 2) and self.padding == "SAME"
            and x.shape[1] % 2 == 0 and x.shape[2] % 2 == 0 and self.precision is None
        ):  # fmt: skip
            return "stride2"
        if (
            kernel == (3, 3) and strides == (1, 1) and self.padding == "SAME"
            and self.precision is None and _small_batch_on_cpu(x)
        ):  # fmt: skip
            return "stride1"
        return "flax"

    @nn.compact
    def __call__(self, inputs: jax.Array) -> jax.Array:
        lowering = self._lowering(inputs)
        if lowering in ("stride1", "stride2") and not switch.in_reverse_mode_only():
            lowering = "flax"  # these change only the backward pass (custom VJPs)
        if lowering == "flax":
            return super().__call__(inputs)
        cin = inputs.shape[-1]
        kernel = self.param(
            "kernel", self.kernel_init, (*self.kernel_size, cin, self.features), self.param_dtype
        )
        bias = (
            self.param("bias", self.bias_init, (self.features,), self.param_dtype)
            if self.use_bias
            else None
        )
        inputs, kernel, bias = self.promote_dtype(inputs, kernel, bias, dtype=self.dtype)
        if lowering == "pointwise":
            y = jax.lax.dot_general(
                inputs.reshape(-1, cin), kernel.reshape(cin, self.features),
                (((1,), (0,)), ((), ())), precision=self.precision,
            )  # fmt: skip
            y = y.reshape(*inputs.shape[:-1], self.features)
        elif lowering == "stride1":
            y = conv3x3(inputs, kernel)
        elif lowering.startswith("native"):
            reverse = switch.in_reverse_mode_only()
            native = native_conv3x3_trainable if reverse else native_conv3x3_forward
            y = native(inputs, kernel, int(lowering[-1]))
        else:
            y = conv3x3_stride2(inputs, kernel)
        return y if bias is None else y + bias
