"""Forward-mode autodiff through both segmenters (HRNet-18s and EfficientNet-Lite0): `jax.jvp`,
`jax.jacfwd` and a Hessian-vector product give the values of plain Flax / lax (the CPU switch
off) with the CPU lowerings on and with the C++ kernels; with the switch off the program holds
no custom VJP and no FFI call."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from tiny_models import TINY_MODEL

from dig_jax.cpu import native, switch
from dig_jax.models.interactive import build_segmenter

SIZE = 32
MODELS = {
    "hrnet18s": dict(TINY_MODEL, widths=(4, 8), stage_modules=(1,), aux_hidden=(8,)),
    "efficientnet_lite0": dict(TINY_MODEL, backbone="efficientnet_lite0", fine_head=True,
                               widths=(4, 8), stage_modules=(1,), aux_hidden=(8,)),
}  # fmt: skip
SETTINGS = ["auto", "native"] if native.load_kernels() else ["auto"]


def _setup(name: str):
    model = build_segmenter(ml_collections.ConfigDict(MODELS[name]))
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.uniform(0, 1, (1, SIZE, SIZE, 6)) * [255, 255, 255, 1, 1, 1], jnp.float32)
    variables = model.init(jax.random.key(0), x)
    logits = lambda a: model.apply(variables, a, train=False)["mask"]
    tangent = jnp.asarray(rng.normal(size=x.shape), jnp.float32)
    return logits, x, tangent


def _derivatives(logits, x, tangent) -> list[np.ndarray]:
    """jvp of the logits, jacfwd of a 2-parameter prompt change, and an HVP of a scalar loss
    (one compiled program: op-by-op dispatch of these is slower than compiling them)."""
    return [np.asarray(v) for v in jax.jit(functools.partial(_three, logits))(x, tangent)]


def _three(logits, x, tangent):
    _, jvp = jax.jvp(logits, (x,), (tangent,))

    def shifted(theta):  # the gesture and previous-mask channels scaled by theta
        scale = jnp.concatenate([jnp.ones(3), theta[0] * jnp.ones(2), theta[1] * jnp.ones(1)])
        return logits(x * scale).mean(axis=(1, 2))

    jacobian = jax.jacfwd(shifted)(jnp.ones(2))
    loss = lambda a: jnp.sum(jnp.sin(logits(a)))
    _, hvp = jax.jvp(jax.grad(loss), (x,), (tangent,))
    return jvp, jacobian, hvp


@pytest.mark.slow  # three derivative programs per CPU setting
@pytest.mark.parametrize("name", sorted(MODELS))
def test_forward_mode_matches_plain_lax_with_every_cpu_setting(name, monkeypatch):
    monkeypatch.setenv(switch.SWITCH_ENV, "0")
    logits, x, tangent = _setup(name)
    want = _derivatives(logits, x, tangent)
    for setting in SETTINGS:
        monkeypatch.setenv(switch.SWITCH_ENV, setting)
        logits, x, tangent = _setup(name)  # fresh closures: traced under this setting
        got = _derivatives(logits, x, tangent)
        for a, b in zip(got, want, strict=True):
            scale = float(np.abs(b).max()) + 1e-6
            np.testing.assert_allclose(a, b, rtol=2e-3, atol=2e-4 * scale, err_msg=setting)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_switch_off_programs_hold_no_custom_vjp_or_ffi_call(name, monkeypatch):
    monkeypatch.setenv(switch.SWITCH_ENV, "0")
    logits, x, _ = _setup(name)
    with switch.reverse_mode_only():  # even where a train step would take them
        text = str(jax.make_jaxpr(logits)(x))
    assert "custom_vjp" not in text and "ffi_call" not in text
    monkeypatch.setenv(switch.SWITCH_ENV, "auto")
    logits, x, _ = _setup(name)
    # fresh lambdas: traces are cached per function, and the switch is read when tracing
    assert "custom_vjp" not in str(jax.make_jaxpr(lambda a: logits(a))(x))  # forward-mode safe
    with switch.reverse_mode_only():
        assert "custom_vjp" in str(jax.make_jaxpr(lambda a: logits(a))(x))
