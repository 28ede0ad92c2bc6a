"""Per-compilation XLA options: the -O1 init gives the default compile's values to a few ulp."""

from __future__ import annotations

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from dig_jax.cpu import BatchNorm, Conv, switch
from dig_jax.cpu.xla_options import (
    init_compiler_options,
    predict_compiler_options,
    train_compiler_options,
)
from dig_jax.models.efficientnet_lite import DepthwiseConv
from dig_jax.train.config import base_config
from dig_jax.train.state import make_optimizer
from dig_jax.train.step import init_state


class _Layers(nn.Module):
    """One of each initialiser the segmenters use: lecun-normal kernels (dense, 1x1 as a
    product, depthwise), zeros and ones (BatchNorm), a Dense head."""

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False) -> jax.Array:
        x = Conv(8, (3, 3), strides=(2, 2), use_bias=False)(x)
        x = BatchNorm(use_running_average=not train)(x)
        x = DepthwiseConv(3)(x)
        x = Conv(12, (1, 1))(x)
        return nn.Dense(3)(x.mean(axis=(1, 2)))


def test_init_with_its_options_gives_the_default_values_to_a_few_ulp():
    config = base_config("tiny")
    tx = make_optimizer(config.optim, config.total_steps)
    init = functools.partial(init_state, _Layers(), tx, (2, 16, 16, 6))
    key = jax.random.key(3)
    fast = jax.jit(init, compiler_options=init_compiler_options("cpu"))(key)
    default = jax.jit(init)(key)
    fast, default = jax.device_get(fast), jax.device_get(default)
    leaves_fast, leaves_default = jax.tree.leaves(fast), jax.tree.leaves(default)
    assert len(leaves_fast) == len(leaves_default) > 8
    for a, b in zip(leaves_fast, leaves_default, strict=True):
        # The integer bit mixing is exact; the normal draws' inverse error function may round
        # its polynomial differently (LLVM contracts other multiply-adds at -O1): a few ulp.
        np.testing.assert_array_max_ulp(np.asarray(a), np.asarray(b), maxulp=4)
    assert float(jnp.abs(fast.params["Conv_0"]["kernel"]).sum()) > 0  # random, not zeros


def test_options_are_cpu_only_and_follow_the_switch(monkeypatch):
    monkeypatch.setenv(switch.SWITCH_ENV, "auto")
    assert init_compiler_options("cpu") == {"xla_backend_optimization_level": 1}
    monkeypatch.setenv(switch.SWITCH_ENV, "0")
    assert init_compiler_options("cpu") == train_compiler_options("cpu") == {}
    monkeypatch.setenv(switch.SWITCH_ENV, "auto")
    for backend in ("gpu", "tpu"):
        assert init_compiler_options(backend) == {}
        assert train_compiler_options(backend) == {}
        assert predict_compiler_options(backend) == {}
    assert "xla_cpu_experimental_ynn_fusion_type" in train_compiler_options("cpu")
