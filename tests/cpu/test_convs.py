"""`dig_jax.cpu.convs.Conv` equals `flax.linen.Conv`: same parameters, same outputs and
gradients (to float rounding) on the lowerings it replaces, and the plain path elsewhere.

The XLA lowerings are tested with the switch at "auto" (`xla_lowerings`, autouse: no C++
kernels); the native kernel's own tests set DIG_JAX_CPU=native."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dig_jax.cpu import convs, native, switch
from dig_jax.cpu.convs import (
    SMALL_BATCH,
    WIDE_INPUT,
    Conv,
    conv3x3,
    conv3x3_stride2,
    flipped_kernel,
    native_conv3x3,
    native_conv3x3_trainable,
    native_kernel_grad,
    padded_kernel_grad,
    phase_kernel,
    shifted_product_kernel_grad,
    space_to_depth_kernel_grad,
)

needs_native = pytest.mark.skipif(
    not native.load_kernels(), reason="no C++ compiler here: dig_jax.cpu.native did not build"
)


@pytest.fixture(autouse=True)
def xla_lowerings(monkeypatch):
    """The XLA lowerings under test, not the native forward pass (DIG_JAX_CPU=native)."""
    monkeypatch.setenv(switch.SWITCH_ENV, "auto")


@pytest.fixture
def native_on(monkeypatch):
    monkeypatch.setenv(switch.SWITCH_ENV, "native")


def _lax_stride2(x, kernel):
    return jax.lax.conv_general_dilated(
        x, kernel, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )


def _lax_stride1(x, kernel):
    return jax.lax.conv_general_dilated(
        x, kernel, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )


def _grads(fn, x, kernel, cotangent):
    return jax.vjp(fn, x, kernel)[1](cotangent)


def _assert_conv_matches(ours, reference, x_shape, cout, seed, atol=1e-5):
    """Values and both gradients of `ours` equal `reference` on random f32 inputs (values of
    order 1-30: `atol` covers a different summation order's rounding)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=x_shape).astype(np.float32)
    kernel = rng.normal(size=(3, 3, x_shape[-1], cout)).astype(np.float32)
    want = reference(x, kernel)
    np.testing.assert_allclose(ours(x, kernel), want, atol=atol)
    cotangent = rng.normal(size=want.shape).astype(np.float32)
    for got, expected in zip(
        _grads(ours, x, kernel, cotangent), _grads(reference, x, kernel, cotangent), strict=True
    ):  # fmt: skip
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=atol)


@settings(max_examples=8, deadline=None)
@given(
    batch=st.integers(1, SMALL_BATCH + 2), half_h=st.integers(1, 5), half_w=st.integers(1, 5),
    cin=st.integers(1, 4), cout=st.integers(1, 4), seed=st.integers(0, 2**16),
)  # fmt: skip
def test_stride2_gradients_equal_xla(batch, half_h, half_w, cin, cout, seed):
    """Below and above `SMALL_BATCH` (space-to-depth kernel gradient on CPU, then XLA's)."""
    shape = (batch, 2 * half_h, 2 * half_w, cin)
    _assert_conv_matches(conv3x3_stride2, _lax_stride2, shape, cout, seed)


@settings(max_examples=8, deadline=None)
@given(
    batch=st.integers(1, SMALL_BATCH + 2), height=st.integers(1, 9), width=st.integers(1, 9),
    cin=st.integers(1, 4), cout=st.integers(1, 4), seed=st.integers(0, 2**16),
)  # fmt: skip
def test_stride1_gradients_equal_xla(batch, height, width, cin, cout, seed):
    """Below and above `SMALL_BATCH` (padded kernel gradient on CPU, then XLA's), odd sizes."""
    _assert_conv_matches(conv3x3, _lax_stride1, (batch, height, width, cin), cout, seed)


@pytest.mark.parametrize("batch", [1, 2, 8])
def test_small_batch_kernel_gradients_equal_xla(batch):
    """Both rewritten kernel gradients, called directly at any batch, equal the lax ones."""
    rng = np.random.default_rng(batch)
    x = rng.normal(size=(batch, 6, 4, 3)).astype(np.float32)
    kernel = rng.normal(size=(3, 3, 3, 2)).astype(np.float32)
    for conv, rewritten, out_hw in [
        (_lax_stride1, padded_kernel_grad, (6, 4)),
        (_lax_stride2, space_to_depth_kernel_grad, (3, 2)),
    ]:
        cotangent = rng.normal(size=(batch, *out_hw, 2)).astype(np.float32)
        want = jax.vjp(lambda k, conv=conv: conv(x, k), kernel)[1](cotangent)[0]
        got = rewritten(x, cotangent, kernel.shape)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _valid_kernel_grad_lax(x, grad, kernel_hw):
    kernel = np.zeros((*kernel_hw, x.shape[-1], grad.shape[-1]), np.float32)
    valid = lambda k: jax.lax.conv_general_dilated(
        x, k, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )
    return jax.vjp(valid, kernel)[1](grad)[0]


@settings(max_examples=10, deadline=None)
@given(
    batch=st.integers(1, 3), height=st.integers(1, 7), width=st.integers(1, 7),
    kernel_h=st.integers(1, 3), kernel_w=st.integers(1, 3), cin=st.integers(1, 5),
    cout=st.integers(1, 3), seed=st.integers(0, 2**16),
)  # fmt: skip
def test_shifted_product_kernel_grad_equals_xla(
    batch, height, width, kernel_h, kernel_w, cin, cout, seed
):
    """Any VALID kernel size that fits, any widths: the product equals lax's kernel gradient."""
    kernel_h, kernel_w = min(kernel_h, height), min(kernel_w, width)
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(batch, height, width, cin)).astype(np.float32)
    out_hw = (height - kernel_h + 1, width - kernel_w + 1)
    grad = rng.normal(size=(batch, *out_hw, cout)).astype(np.float32)
    want = _valid_kernel_grad_lax(x, grad, (kernel_h, kernel_w))
    got = shifted_product_kernel_grad(jnp.asarray(x), jnp.asarray(grad))
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_shifted_product_kernel_grad_known_answer():
    """One input pixel of value 1 at (row 1, col 2), a cotangent of ones: tap (a, b) sees it
    from output pixel (1 - a, 2 - b) when that pixel exists."""
    x = np.zeros((1, 3, 4, 1), np.float32)
    x[0, 1, 2, 0] = 1.0
    grad = np.ones((1, 2, 3, 1), np.float32)  # a 2x2 VALID kernel
    got = np.asarray(shifted_product_kernel_grad(jnp.asarray(x), jnp.asarray(grad)))[..., 0, 0]
    np.testing.assert_array_equal(got, np.ones((2, 2), np.float32))
    grad[0, 1, 2, 0] = 0.0  # output pixel (1, 2) feeds tap (0, 0) only
    got = np.asarray(shifted_product_kernel_grad(jnp.asarray(x), jnp.asarray(grad)))[..., 0, 0]
    np.testing.assert_array_equal(got, np.array([[0, 1], [1, 1]], np.float32))


@pytest.mark.parametrize("stride", [1, 2])
def test_wide_input_layers_take_the_product_and_match_xla(monkeypatch, stride):
    """A small-batch layer with C >= WIDE_INPUT * O (after space-to-depth for stride 2) takes
    its kernel gradient from the shifted product, and both gradients still equal lax's."""
    taken = []
    original = convs.shifted_product_kernel_grad
    monkeypatch.setattr(
        convs, "shifted_product_kernel_grad", lambda *a: taken.append(a) or original(*a)
    )
    cin, cout = 2 * WIDE_INPUT, 2
    conv, reference = (conv3x3, _lax_stride1) if stride == 1 else (conv3x3_stride2, _lax_stride2)
    _assert_conv_matches(conv, reference, (2, 6, 4, cin), cout, seed=stride)
    assert len(taken) == 1
    _assert_conv_matches(conv, reference, (2, 6, 4, 2), 2 * cout, seed=stride)  # narrow: lax's
    assert len(taken) == 1


def test_small_batch_lowering_only_on_cpu_with_the_switch_on(monkeypatch):
    x = jnp.zeros((1, 6, 6, 3))
    assert Conv(4, (3, 3))._lowering(x) == "stride1"
    monkeypatch.setenv(switch.SWITCH_ENV, "0")
    assert Conv(4, (3, 3))._lowering(x) == "flax"
    monkeypatch.setenv(switch.SWITCH_ENV, "auto")
    monkeypatch.setattr(switch.jax, "default_backend", lambda: "gpu")
    assert Conv(4, (3, 3))._lowering(x) == "flax"


def test_stride2_input_gradient_known_answer():
    """One output pixel, one channel: its gradient lands on the 3x3 window at rows/cols
    0..2 (SAME padding of an even size pads after), weighted by the kernel."""
    kernel = np.arange(1, 10, dtype=np.float32).reshape(3, 3, 1, 1)
    cotangent = np.zeros((1, 2, 2, 1), np.float32)
    cotangent[0, 0, 0, 0] = 1.0
    grad_x, _ = _grads(conv3x3_stride2, np.zeros((1, 4, 4, 1), np.float32), kernel, cotangent)
    want = np.zeros((4, 4), np.float32)
    want[:3, :3] = kernel[..., 0, 0]
    np.testing.assert_array_equal(np.asarray(grad_x)[0, ..., 0], want)


def test_phase_kernel_holds_each_tap_once():
    kernel = np.arange(1, 1 + 9 * 2 * 3, dtype=np.float32).reshape(3, 3, 2, 3)
    phases = np.asarray(phase_kernel(kernel))
    assert phases.shape == (2, 2, 3, 8)
    assert sorted(phases[phases != 0].tolist()) == sorted(kernel.ravel().tolist())


def test_stride2_vmaps_and_jits():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 1, 6, 4, 2)).astype(np.float32)
    kernel = rng.normal(size=(3, 3, 2, 2)).astype(np.float32)
    loss = lambda fn: jax.jit(jax.vmap(jax.grad(lambda x, k: fn(x, k).sum(), (0, 1)), (0, None)))
    for got, want in zip(
        loss(conv3x3_stride2)(x, kernel), loss(_lax_stride2)(x, kernel), strict=True
    ):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


CASES = [
    ("pointwise", dict(features=5, kernel_size=(1, 1)), (2, 6, 6, 3)),
    ("pointwise", dict(features=5, kernel_size=(1, 1), use_bias=False), (1, 5, 7, 3)),
    ("stride2", dict(features=4, kernel_size=(3, 3), strides=(2, 2)), (2, 8, 6, 3)),
    ("stride2", dict(features=4, kernel_size=(3, 3), strides=2, use_bias=False), (1, 4, 4, 2)),
    ("flax", dict(features=4, kernel_size=(3, 3), strides=(2, 2)), (1, 7, 6, 3)),  # odd height
    ("stride2", dict(features=4, kernel_size=(3, 3), strides=2), (SMALL_BATCH + 1, 4, 6, 2)),
    ("stride1", dict(features=4, kernel_size=(3, 3)), (1, 6, 5, 3)),
    ("stride1", dict(features=4, kernel_size=(3, 3), use_bias=False), (SMALL_BATCH, 4, 4, 2)),
    ("flax", dict(features=4, kernel_size=(3, 3)), (SMALL_BATCH + 1, 6, 6, 3)),
    ("flax", dict(features=4, kernel_size=(3, 3), padding="VALID"), (1, 6, 6, 3)),
    ("flax", dict(features=4, kernel_size=(1, 1), strides=(2, 2)), (1, 6, 6, 3)),
    ("flax", dict(features=3, kernel_size=(1, 1), feature_group_count=3), (1, 6, 6, 3)),
    ("flax", dict(features=4, kernel_size=(1, 1)), (6, 6, 3)),  # no batch axis
]


@pytest.mark.parametrize("lowering,attrs,shape", CASES)
def test_conv_matches_flax_conv(lowering, attrs, shape):
    rng = np.random.default_rng(1)
    x = rng.normal(size=shape).astype(np.float32)
    ours, theirs = Conv(**attrs), nn.Conv(**attrs)
    assert ours._lowering(jnp.asarray(x)) == lowering
    variables = theirs.init(jax.random.key(0), x)
    assert jax.tree.map(np.shape, ours.init(jax.random.key(0), x)) == jax.tree.map(
        np.shape, variables
    )
    np.testing.assert_allclose(
        ours.apply(variables, x), theirs.apply(variables, x), rtol=1e-5, atol=1e-5
    )

    def loss(module, variables, x):
        return jnp.sum(jnp.sin(module.apply(variables, x)))

    with switch.reverse_mode_only():  # the custom VJPs of the lowerings
        grads = [jax.grad(loss, (1, 2))(m, variables, x) for m in (ours, theirs)]
    for got, want in zip(jax.tree.leaves(grads[0]), jax.tree.leaves(grads[1]), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    tangent = rng.normal(size=shape).astype(np.float32)  # forward mode, outside that block
    got = jax.jvp(lambda a: ours.apply(variables, a), (x,), (tangent,))[1]
    want = jax.jvp(lambda a: theirs.apply(variables, a), (x,), (tangent,))[1]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_conv_keeps_flax_names_inside_a_model():
    class Net(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = Conv(3, (3, 3), strides=2)(x)
            return Conv(2, (1, 1))(x)

    params = Net().init(jax.random.key(0), jnp.zeros((1, 4, 4, 1)))["params"]
    assert sorted(params) == ["Conv_0", "Conv_1"]
    assert params["Conv_0"]["kernel"].shape == (3, 3, 1, 3)


def _lax(stride):
    return _lax_stride1 if stride == 1 else _lax_stride2


@needs_native
@settings(max_examples=12, deadline=None)
@given(
    batch=st.integers(1, 3), height=st.integers(1, 11), width=st.integers(1, 19),
    cin=st.integers(1, 20), cout=st.integers(1, 40), stride=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**16),
)  # fmt: skip
def test_native_forward_and_gradients_equal_xla(batch, height, width, cin, cout, stride, seed):
    """Any size (odd, narrower than a tile, 1 px), channel counts off the 16-lane blocks."""
    ours = lambda x, k: native_conv3x3_trainable(x, k, stride)
    _assert_conv_matches(ours, _lax(stride), (batch, height, width, cin), cout, seed, atol=1e-4)


@needs_native
def test_native_forward_known_answer():
    """All-ones 4x5 image, 2 channels, all-ones kernel: each output is 2 x the number of its
    3x3 taps inside the image (4 at corners, 6 on edges, 9 inside). Stride 2, SAME: the even
    height is padded after (output rows see input rows 0-2 and 2-3), the odd width on both
    sides (output columns see 0-1, 1-3 and 3-4)."""
    x = np.ones((1, 4, 5, 2), np.float32)
    kernel = np.ones((3, 3, 2, 1), np.float32)
    taps_1d = lambda n: np.minimum(np.arange(n) + 2, n + 1 - np.arange(n)).clip(max=3)
    want = 2.0 * np.outer(taps_1d(4), taps_1d(5))
    np.testing.assert_array_equal(np.asarray(native_conv3x3(x, kernel, 1))[0, ..., 0], want)
    got2 = np.asarray(native_conv3x3(x, kernel, 2))[0, ..., 0]
    np.testing.assert_array_equal(got2, 2.0 * np.outer([3, 2], [2, 3, 2]))


@needs_native
@pytest.mark.parametrize("stride", [1, 2])
def test_native_value_does_not_depend_on_the_tile_that_computed_it(stride):
    """Widths change the row's tiling (and the last tile's overlap) and channel counts the
    grouping of 16-lane blocks; a pixel whose taps are unchanged keeps its bits."""
    rng = np.random.default_rng(stride)
    x = rng.normal(size=(2, 5, 40, 7)).astype(np.float32)
    kernel = rng.normal(size=(3, 3, 7, 70)).astype(np.float32)
    full = np.asarray(native_conv3x3(x, kernel, stride))
    for width in (10, 16, 26) if stride == 2 else (9, 16, 27):  # even: the same SAME offsets
        crop = np.asarray(native_conv3x3(x[:, :, :width], kernel, stride))
        keep = (width - 2) // stride  # columns whose taps all lie in the crop
        np.testing.assert_array_equal(crop[:, :, :keep], full[:, :, :keep])
    narrow = np.asarray(native_conv3x3(x, kernel[..., :20], stride))  # other block groups
    np.testing.assert_array_equal(narrow, full[..., :20])


@needs_native
def test_native_input_gradient_is_the_flipped_kernels_forward():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(2, 6, 7, 3)).astype(np.float32)
    kernel = rng.normal(size=(3, 3, 3, 4)).astype(np.float32)
    cotangent = rng.normal(size=(2, 6, 7, 4)).astype(np.float32)
    grad_x = jax.vjp(lambda a: _lax_stride1(a, kernel), x)[1](cotangent)[0]
    np.testing.assert_allclose(
        _lax_stride1(cotangent, flipped_kernel(kernel)), grad_x, rtol=1e-5, atol=1e-5
    )


@needs_native
def test_native_vmaps_over_images_and_kernels():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 2, 6, 4, 2)).astype(np.float32)
    kernels = rng.normal(size=(3, 3, 3, 2, 5)).astype(np.float32)
    for stride in (1, 2):
        ours = lambda a, k, s=stride: native_conv3x3_trainable(a, k, s)
        loss = lambda fn, axes: jax.jit(
            jax.vmap(jax.grad(lambda a, k: jnp.sin(fn(a, k)).sum(), (0, 1)), axes)
        )  # fmt: skip
        for args, axes in (((x, kernels[0]), (0, None)), ((x, kernels), (0, 0))):
            for got, want in zip(
                loss(ours, axes)(*args), loss(_lax(stride), axes)(*args), strict=True
            ):
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@needs_native
def test_conv_module_takes_the_native_forward_on_cpu_only(monkeypatch, native_on):
    x = jnp.zeros((SMALL_BATCH + 1, 6, 5, 3))
    assert Conv(4, (3, 3))._lowering(x) == "native1"
    assert Conv(4, (3, 3), strides=2)._lowering(x) == "native2"
    assert Conv(4, (3, 3), dtype=jnp.bfloat16)._lowering(x) == "flax"  # float32 only
    assert Conv(4, (3, 3), padding="VALID")._lowering(x) == "flax"
    assert Conv(4, (1, 1))._lowering(x) == "pointwise"
    monkeypatch.setattr(switch.jax, "default_backend", lambda: "gpu")
    assert Conv(4, (3, 3))._lowering(x) == "flax"
    monkeypatch.setattr(switch.jax, "default_backend", lambda: "cpu")
    variables = nn.Conv(4, (3, 3), strides=2).init(jax.random.key(0), x)
    x = jax.random.normal(jax.random.key(1), x.shape)
    ours, theirs = Conv(4, (3, 3), strides=2), nn.Conv(4, (3, 3), strides=2)
    np.testing.assert_allclose(
        ours.apply(variables, x), theirs.apply(variables, x), rtol=1e-5, atol=1e-5
    )
    # Outside reverse-mode-only traces the native forward pass has forward-mode derivatives.
    tangent = jax.random.normal(jax.random.key(2), x.shape)
    got = jax.jvp(lambda a: ours.apply(variables, a), (x,), (tangent,))
    want = jax.jvp(lambda a: theirs.apply(variables, a), (x,), (tangent,))
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


@needs_native
@pytest.mark.parametrize(
    "shape,cout,stride",
    [
        ((9, 64, 6, 18), 18, 1),
        ((2, 33, 40, 20), 70, 1),
        ((3, 34, 20, 7), 16, 2),
        ((1, 1, 1, 3), 2, 2),
    ],
)
def test_native_kernel_gradient_is_deterministic_and_matches_xla(shape, cout, stride):
    """Many output rows (several fixed row blocks, passes), channel counts off the 16-lane
    blocks and the tile widths, a 1-pixel image: XLA's values, the same bits every call."""
    rng = np.random.default_rng(7)
    x = rng.normal(size=shape).astype(np.float32)
    out = np.asarray(_lax(stride)(x, np.zeros((3, 3, shape[-1], cout), np.float32)))
    grad = rng.normal(size=out.shape).astype(np.float32)
    want = _grads(_lax(stride), x, np.zeros((3, 3, shape[-1], cout), np.float32), grad)[1]
    got = np.asarray(native_kernel_grad(x, grad, stride))
    scale = np.sqrt(np.prod(out.shape[:3]))  # a sum of that many unit-variance products
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * scale)
    np.testing.assert_array_equal(np.asarray(native_kernel_grad(x, grad, stride)), got)


@needs_native
@pytest.mark.parametrize("stride,shape", [(1, (2, 6, 5, 3)), (2, (2, 6, 8, 3)), (2, (1, 7, 5, 2))])
def test_native_forward_with_xla_gradients_still_matches(monkeypatch, stride, shape):
    """`NATIVE_INPUT_GRAD` / `NATIVE_KERNEL_GRAD` off: the native forward with XLA's (or this
    module's) gradient forms, at even and odd sizes."""
    monkeypatch.setattr(convs, "NATIVE_INPUT_GRAD", False)
    monkeypatch.setattr(convs, "NATIVE_KERNEL_GRAD", False)
    ours = lambda x, k: native_conv3x3_trainable(x, k, stride)
    _assert_conv_matches(ours, _lax(stride), shape, 4, seed=stride, atol=1e-4)
