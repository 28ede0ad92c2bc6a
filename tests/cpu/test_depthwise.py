"""The fast depthwise convolution against XLA's grouped convolution, in value and gradient."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dig_jax.cpu import depthwise, native, switch
from dig_jax.cpu.depthwise import (
    depthwise_conv_reference,
    native_depthwise_conv,
    same_padding,
)
from dig_jax.cpu.depthwise import shift_depthwise_conv as depthwise_conv
from dig_jax.models.efficientnet_lite import DepthwiseConv

needs_native = pytest.mark.skipif(
    not native.load_kernels(), reason="no C++ compiler here: dig_jax.cpu.native did not build"
)
CASES = [
    ((2, 9, 7, 3), 3, 1),
    ((2, 9, 7, 3), 3, 2),
    ((1, 8, 8, 5), 5, 2),
    ((2, 11, 6, 4), 5, 1),
    ((1, 4, 4, 2), 5, 1),  # kernel larger than the map
    ((1, 1, 3, 2), 3, 2),
    ((3, 10, 10, 16), 3, 2),  # even size, stride 2: TF's extra pixel at the end only
]


def _grads(fn, x, w, g, stride):
    return jax.grad(lambda x, w: jnp.sum(fn(x, w, stride) * g), argnums=(0, 1))(x, w)


@pytest.mark.parametrize("looped", [False, True], ids=["one-reduction", "row-blocks"])
@pytest.mark.parametrize(("shape", "kernel", "stride"), CASES)
def test_values_and_gradients_match_xla(shape, kernel, stride, looped, monkeypatch):
    # Both kernel-gradient paths: one reduction over the batch, and the loop over row blocks
    # (forced with a tiny size threshold and blocks of a few rows).
    if looped:
        monkeypatch.setattr(depthwise, "SMALL_GRAD_BYTES", 0)
        monkeypatch.setattr(depthwise, "CHUNK_BYTES", 4 * 2 * shape[2] * shape[3])
    kx, kw, kg = jax.random.split(jax.random.key(0), 3)
    x = jax.random.normal(kx, shape)
    w = jax.random.normal(kw, (kernel, kernel, shape[-1]))
    fast = depthwise_conv(x, w, stride)
    ref = depthwise_conv_reference(x, w, stride)
    assert fast.shape == ref.shape == (shape[0], -(-shape[1] // stride), -(-shape[2] // stride),
                                       shape[3])  # fmt: skip
    np.testing.assert_allclose(fast, ref, rtol=1e-5, atol=1e-5)
    g = jax.random.normal(kg, ref.shape)
    got, want = (
        _grads(depthwise_conv, x, w, g, stride),
        _grads(depthwise_conv_reference, x, w, g, stride),
    )
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


# The native kernels' register-blocked interior runs whole 16-channel blocks of kernels 3 and 5
# at strides 1 and 2 (rows wider than its block of 4 outputs, plus a tail); the channels past
# the last block, the border columns and other kernel sizes take the per-pixel path.
NATIVE_CASES = [
    *CASES,
    ((2, 12, 19, 24), 3, 1),
    ((1, 9, 16, 32), 3, 2),
    ((1, 13, 22, 40), 5, 1),
    ((2, 14, 21, 17), 5, 2),
    ((1, 10, 12, 16), 7, 1),
    # Rows narrower than the kernel at stride 2: taps that start past the row's end (a kernel
    # gradient once read them from the next row, C++ division truncating towards zero).
    ((2, 3, 1, 5), 3, 2),
    ((2, 2, 2, 3), 3, 2),
    ((2, 2, 2, 18), 5, 2),
]


@needs_native
@pytest.mark.parametrize(("shape", "kernel", "stride"), NATIVE_CASES)
def test_native_values_and_gradients_match_xla(shape, kernel, stride):
    kx, kw, kg = jax.random.split(jax.random.key(5), 3)
    x = jax.random.normal(kx, shape)
    w = jax.random.normal(kw, (kernel, kernel, shape[-1]))
    got = jax.jit(native_depthwise_conv, static_argnums=2)(x, w, stride)
    want = depthwise_conv_reference(x, w, stride)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    g = jax.random.normal(kg, want.shape)
    got_grads = jax.jit(_grads, static_argnums=(0, 4))(native_depthwise_conv, x, w, g, stride)
    for a, b in zip(got_grads, _grads(depthwise_conv_reference, x, w, g, stride), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


@needs_native
def test_native_kernel_gradient_is_deterministic():
    # More output rows than the kernel gradient's fixed blocks, so several partial sums.
    x = jax.random.normal(jax.random.key(6), (4, 24, 20, 8))
    w = jax.random.normal(jax.random.key(7), (3, 3, 8))
    grad = jax.jit(jax.grad(lambda w, x: jnp.sum(native_depthwise_conv(x, w, 1) ** 2)))
    first, second = grad(w, x), grad(w, x)
    assert np.asarray(first).tobytes() == np.asarray(second).tobytes()


@needs_native
@pytest.mark.parametrize("stride", [1, 2])
def test_native_vmap_matches_a_loop_over_the_mapped_axis(stride):
    # The batching rule folds a mapped axis into the batch axis (images only) or the channels
    # (kernels mapped, and every kernel gradient); values and gradients equal a Python loop.
    xs = jax.random.normal(jax.random.key(8), (3, 2, 9, 10, 5))
    ws = jax.random.normal(jax.random.key(9), (3, 3, 3, 5))
    gs = jax.random.normal(jax.random.key(10), (3, 2, -(-9 // stride), -(-10 // stride), 5))

    def loss(fn, x, w, g):
        return jnp.sum(fn(x, w, stride) * g)

    def per_element(fn, x, w, g):  # value and both gradients of one element
        return fn(x, w, stride), *jax.grad(loss, argnums=(1, 2))(fn, x, w, g)

    native = functools.partial(per_element, native_depthwise_conv)
    reference = functools.partial(per_element, depthwise_conv_reference)
    cases = {
        "images": (jax.vmap(native, in_axes=(0, None, 0)), lambda i: (xs[i], ws[0], gs[i])),
        "kernels": (jax.vmap(native, in_axes=(None, 0, 0)), lambda i: (xs[0], ws[i], gs[i])),
        "both": (jax.vmap(native, in_axes=(0, 0, 0)), lambda i: (xs[i], ws[i], gs[i])),
    }
    for name, (batched, element) in cases.items():
        args = [xs if name != "kernels" else xs[0], ws if name != "images" else ws[0], gs]
        got = jax.jit(batched)(*args)
        for i in range(3):
            for a, b in zip(got, reference(*element(i)), strict=True):
                np.testing.assert_allclose(a[i], b, rtol=1e-4, atol=1e-4, err_msg=name)
    # Nested: the inner rule's call is itself batched by the outer vmap.
    nested = jax.vmap(jax.vmap(lambda x: native_depthwise_conv(x, ws[0], stride)))
    np.testing.assert_allclose(
        nested(xs[:, :, None]),
        jax.vmap(jax.vmap(lambda x: depthwise_conv_reference(x, ws[0], stride)))(xs[:, :, None]),
        rtol=1e-5, atol=1e-5,
    )  # fmt: skip


def test_jit_and_second_call_agree():
    x = jax.random.normal(jax.random.key(1), (2, 16, 16, 8))
    w = jax.random.normal(jax.random.key(2), (3, 3, 8))
    jitted = jax.jit(jax.value_and_grad(lambda w: depthwise_conv(x, w, 2).sum()))
    v1, g1 = jitted(w)
    v2, g2 = jitted(w)
    assert float(v1) == float(v2) and np.array_equal(g1, g2)


def test_same_padding_is_tensorflows():
    assert same_padding(224, 3, 2) == (112, 0, 1)  # the extra pixel at the end
    assert same_padding(7, 5, 1) == (7, 2, 2)
    assert same_padding(1, 3, 2) == (1, 1, 1)


@pytest.mark.parametrize("setting", ["0", "auto", "native"])
def test_module_forms_agree_in_value_and_both_modes(setting, monkeypatch):
    """The switch picks the form (XLA's grouped conv, shifted sums, C++ kernels); values,
    reverse-mode gradients and forward-mode tangents are the grouped convolution's."""
    monkeypatch.setenv(switch.SWITCH_ENV, setting)
    x = jax.random.normal(jax.random.key(3), (1, 10, 10, 6))
    variables = DepthwiseConv(5, 2).init(jax.random.key(4), x)
    assert variables["params"]["kernel"].shape == (5, 5, 1, 6)
    kernel = variables["params"]["kernel"][:, :, 0, :]
    out = lambda a: DepthwiseConv(5, 2).apply(variables, a)
    reference = lambda a: depthwise_conv_reference(a, kernel, 2)
    np.testing.assert_allclose(out(x), reference(x), rtol=1e-5, atol=1e-5)
    tangent = jax.random.normal(jax.random.key(5), x.shape)
    got, want = jax.jvp(out, (x,), (tangent,))[1], jax.jvp(reference, (x,), (tangent,))[1]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    with switch.reverse_mode_only():
        got = jax.grad(lambda a: jnp.sum(jnp.sin(out(a))))(x)
    want = jax.grad(lambda a: jnp.sum(jnp.sin(reference(a))))(x)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_custom_vjps_only_in_reverse_mode_only_traces_and_nothing_when_off(monkeypatch):
    x = jnp.ones((1, 8, 8, 4))
    w = jnp.ones((3, 3, 4))
    text = lambda: str(jax.make_jaxpr(lambda a: depthwise.depthwise_conv(a, w, 1))(x))
    monkeypatch.setenv(switch.SWITCH_ENV, "auto")
    assert "custom_vjp" not in text() and "feature_group_count" not in text()
    with switch.reverse_mode_only():
        assert "custom_vjp" in text()
    monkeypatch.setenv(switch.SWITCH_ENV, "0")
    with switch.reverse_mode_only():
        assert "custom_vjp" not in text() and "feature_group_count=4" in text()


def test_native_loader_reports_a_missing_or_failing_compiler(monkeypatch, tmp_path, caplog):
    monkeypatch.setenv(native.CACHE_ENV, str(tmp_path))
    monkeypatch.setenv("CXX", "no-such-compiler-dig-jax")
    with pytest.raises(native.NativeBuildError, match="no C\\+\\+ compiler"):
        native._compiler()
    assert native.load_kernels.__wrapped__() is False
    assert "native kernels (depthwise, 3x3) unavailable" in caplog.text
    monkeypatch.setenv("CXX", "false")  # on PATH, exits 1: a failed build, nothing left behind
    assert native.load_kernels.__wrapped__() is False
    assert list(tmp_path.iterdir()) == []


def test_native_build_error_names_the_compiler_error_not_header_warnings(tmp_path):
    compiler = tmp_path / "fake-c++"
    compiler.write_text(
        "#!/bin/sh\n"
        "echo 'ffi.h:772: warning: always_inline function might not be inlinable' >&2\n"
        "echo 'depthwise.cc:254: error: CheckTaps was not declared in this scope' >&2\n"
        "echo 'api.h:179: warning: control reaches end of non-void function' >&2\n"
        "exit 1\n"
    )
    compiler.chmod(0o755)
    with pytest.raises(
        native.NativeBuildError, match=r"depthwise\.cc:254: error: CheckTaps"
    ) as info:
        native.build(str(compiler), tmp_path / "out" / "depthwise.so")
    assert "warning" not in str(info.value)
    assert list((tmp_path / "out").iterdir()) == []  # the scratch file is removed


@needs_native
def test_native_build_writes_a_loadable_library(tmp_path, monkeypatch):
    import ctypes

    compiler = native._compiler()
    # Unoptimised (-O0: ~1/3 of the compiler's time at -O3): checked here is what `build`
    # leaves behind; the kernels' values are checked on `load_kernels`' -O3 library.
    monkeypatch.setattr(native, "FLAGS", tuple("-O0" if f == "-O3" else f for f in native.FLAGS))
    path = native.build(compiler, tmp_path / "depthwise.so")
    library = ctypes.cdll.LoadLibrary(str(path))
    assert all(hasattr(library, symbol) for symbol in native.TARGETS.values())
    assert [p.name for p in tmp_path.iterdir()] == ["depthwise.so"]  # no scratch file left
    # The cache key follows the source, the compiler and the CPU: same inputs, same path.
    assert native.library_path(compiler) == native.library_path(compiler)


@needs_native
def test_native_under_a_sharded_jit_matches_the_reference():
    # XLA cannot split a custom call across devices: it gathers the batch, and the values
    # stay right (the tests run on 4 simulated CPU devices).
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    devices = np.array(jax.devices()[:4])
    if devices.size < 2:
        pytest.skip("one device only: nothing to shard")
    mesh = Mesh(devices, ("data",))
    x = jax.random.normal(jax.random.key(8), (devices.size * 2, 8, 8, 8))
    w = jax.random.normal(jax.random.key(9), (3, 3, 8))
    x = jax.device_put(x, NamedSharding(mesh, PartitionSpec("data")))
    loss = jax.jit(jax.value_and_grad(lambda w, x: jnp.sum(native_depthwise_conv(x, w, 2) ** 2)))
    want = jax.value_and_grad(lambda w, x: jnp.sum(depthwise_conv_reference(x, w, 2) ** 2))
    (value, grad), (ref_value, ref_grad) = loss(w, x), want(w, np.asarray(x))
    np.testing.assert_allclose(value, ref_value, rtol=1e-5)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-4, atol=1e-4)
