"""`materialize` is an identity (values, gradients, dtypes, vmap) that shows up as a conditional
in the traced program on CPU, and not at all when disabled."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dig_jax.cpu import switch
from dig_jax.cpu.materialize import fusion_breaks, materialize


def _has_cond(x) -> bool:
    # a new function each time: traces are cached per function, the switch is read when tracing
    return "cond" in str(jax.make_jaxpr(lambda v: materialize(v))(x))


@pytest.mark.parametrize(
    "x",
    [
        np.array([[np.nan, 1.0], [np.inf, -0.0]], np.float32),  # NaN first: the other branch
        np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 5,
        np.arange(6, dtype=np.int32),
        np.array([True, False]),
        np.zeros((0, 3), np.float32),
    ],
)
def test_identity_on_values_and_dtypes(x):
    out = jax.jit(materialize)(x)
    assert out.dtype == x.dtype and out.shape == x.shape
    np.testing.assert_array_equal(np.asarray(out), x)


def test_gradient_is_identity_and_vmap_keeps_values():
    x = np.random.default_rng(0).normal(size=(3, 4, 5)).astype(np.float32)
    grad = jax.grad(lambda v: jnp.sum(jnp.sin(materialize(v))))(x)
    np.testing.assert_allclose(grad, np.cos(x), rtol=1e-6)
    np.testing.assert_array_equal(jax.vmap(materialize)(x), x)


def test_traced_as_a_conditional_only_when_enabled(monkeypatch):
    x = jnp.ones((2, 3))
    monkeypatch.setenv(switch.SWITCH_ENV, "auto")
    assert _has_cond(x) == (jax.default_backend() == "cpu")
    with fusion_breaks(False):
        assert not _has_cond(x)
    assert _has_cond(x) == (jax.default_backend() == "cpu")
    monkeypatch.setenv(switch.SWITCH_ENV, "0")
    assert not _has_cond(x)
