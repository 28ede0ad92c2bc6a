"""The fused BatchNorm(+ReLU) against flax's nn.BatchNorm + nn.relu: values, running statistics
and gradients; finite differences through all three outputs of the custom VJP."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from dig_jax.cpu import switch
from dig_jax.cpu.batchnorm import BatchNorm, batch_norm_train


class FlaxBN(nn.Module):
    relu: bool
    train: bool

    @nn.compact
    def __call__(self, x):
        y = nn.BatchNorm(use_running_average=not self.train, momentum=0.9, epsilon=1e-5)(x)
        return nn.relu(y) if self.relu else y


class FusedBN(nn.Module):
    relu: bool
    train: bool

    @nn.compact
    def __call__(self, x):
        return BatchNorm(not self.train, momentum=0.9, epsilon=1e-5, relu=self.relu)(x)


def _inputs(seed: int = 0):
    rng = np.random.default_rng(seed)
    x = jnp.asarray(rng.normal(0.3, 2.0, (4, 5, 6, 7)), jnp.float32)
    return x, jnp.asarray(rng.normal(size=x.shape), jnp.float32)


@pytest.mark.parametrize("lean", [True, False], ids=["reverse-mode-only", "plain"])
@pytest.mark.parametrize("relu", [False, True])
def test_same_values_statistics_and_gradients_as_flax(relu, lean):
    """With the custom VJPs (a reverse-mode-only trace) and without (plain differentiable ops,
    also what forward mode sees)."""
    x, weights = _inputs()
    ref, new = FlaxBN(relu, True), FusedBN(relu, True)
    variables = ref.init(jax.random.key(0), x)
    rng = np.random.default_rng(1)
    params = jax.tree.map(lambda p: p + jnp.asarray(rng.normal(0, 0.5, p.shape), p.dtype),
                          variables["params"])  # fmt: skip
    assert jax.tree.structure(new.init(jax.random.key(0), x)) == jax.tree.structure(variables)

    def loss(module, params, x):
        y, updates = module.apply({"params": params, "batch_stats": variables["batch_stats"]}, x,
                                  mutable=["batch_stats"])  # fmt: skip
        return jnp.sum(y * weights), (y, updates["batch_stats"])

    results = []
    for module in (ref, new):
        grad_fn = jax.value_and_grad(
            lambda p, x, m=module: loss(m, p, x), argnums=(0, 1), has_aux=True
        )
        if lean:
            with switch.reverse_mode_only():
                (_, (y, stats)), grads = grad_fn(params, x)
        else:
            (_, (y, stats)), grads = grad_fn(params, x)
        results.append((y, stats, grads))
    (y0, s0, g0), (y1, s1, g1) = results
    np.testing.assert_allclose(y1, y0, rtol=1e-5, atol=1e-5)
    for a, b in zip(jax.tree.leaves((s1, g1)), jax.tree.leaves((s0, g0)), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
    # Inference mode reads the running statistics, as flax does.
    trained = {"params": params, "batch_stats": s0}
    inferred = FusedBN(relu, False).apply(trained, x)
    expected = FlaxBN(relu, False).apply(trained, x)
    np.testing.assert_allclose(inferred, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("relu", [False, True])
def test_custom_vjp_matches_finite_differences_through_every_output(relu):
    x, weights = _inputs(2)
    x = x.astype(jnp.float64) if jax.config.jax_enable_x64 else x
    scale = jnp.linspace(0.5, 1.5, x.shape[-1], dtype=x.dtype)
    bias = jnp.linspace(-0.2, 0.3, x.shape[-1], dtype=x.dtype)

    def f(x, scale, bias):
        y, mean, var = batch_norm_train(x, scale, bias, 1e-5, relu)
        return jnp.sum(y * weights) + jnp.sum(mean * 3.0) - jnp.sum(var * 0.5)

    check_grads(f, (x, scale, bias), order=1, modes=("rev",), atol=5e-2, rtol=5e-2, eps=1e-2)
    # Against JAX differentiating the same forward arithmetic.
    from dig_jax.cpu.batchnorm import _forward

    def g(x, scale, bias):
        y, mean, var = _forward(x, scale, bias, 1e-5, relu)
        return jnp.sum(y * weights) + jnp.sum(mean * 3.0) - jnp.sum(var * 0.5)

    for a, b in zip(jax.grad(f, (0, 1, 2))(x, scale, bias), jax.grad(g, (0, 1, 2))(x, scale, bias),
                    strict=True):  # fmt: skip
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


def test_relu_keeps_values_and_gradients_of_nn_relu():
    from dig_jax.cpu.batchnorm import relu

    x = jnp.asarray([-2.0, -0.0, 0.0, 1e-30, 3.0, np.inf, -np.inf])
    np.testing.assert_array_equal(relu(x), nn.relu(x))
    w = jnp.arange(1.0, 8.0)
    want = jax.grad(lambda v: jnp.sum(nn.relu(v) * w))(x)
    np.testing.assert_array_equal(jax.grad(lambda v: jnp.sum(relu(v) * w))(x), want)
    with switch.reverse_mode_only():  # the lean backward pass
        np.testing.assert_array_equal(jax.grad(lambda v: jnp.sum(relu(v) * w))(x), want)
