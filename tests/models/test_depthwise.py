"""The fast depthwise convolution against XLA's grouped convolution, in value and gradient."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dig_jax.models import depthwise
from dig_jax.models.depthwise import depthwise_conv, depthwise_conv_reference, same_padding
from dig_jax.models.efficientnet_lite import DepthwiseConv


@pytest.mark.parametrize("looped", [False, True], ids=["one-reduction", "row-blocks"])
@pytest.mark.parametrize(
    ("shape", "kernel", "stride"),
    [
        ((2, 9, 7, 3), 3, 1),
        ((2, 9, 7, 3), 3, 2),
        ((1, 8, 8, 5), 5, 2),
        ((2, 11, 6, 4), 5, 1),
        ((1, 4, 4, 2), 5, 1),  # kernel larger than the map
        ((1, 1, 3, 2), 3, 2),
    ],
)
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

    def grads(fn):
        return jax.grad(lambda x, w: jnp.sum(fn(x, w, stride) * g), argnums=(0, 1))(x, w)

    for got, want in zip(grads(depthwise_conv), grads(depthwise_conv_reference), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


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


def test_module_impls_agree_and_reject_unknown():
    x = jax.random.normal(jax.random.key(3), (1, 10, 10, 6))
    variables = DepthwiseConv(5, 2, "shift").init(jax.random.key(4), x)
    assert variables["params"]["kernel"].shape == (5, 5, 1, 6)
    shift = DepthwiseConv(5, 2, "shift").apply(variables, x)
    xla = DepthwiseConv(5, 2, "xla").apply(variables, x)
    np.testing.assert_allclose(shift, xla, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="impl must be"):
        DepthwiseConv(5, 1, "fft").apply(variables, x)
