"""`materialize(x)`: an identity that XLA's CPU fusion cannot see through.

A residual network's block outputs form one elementwise chain: x_{k+1} = relu(bn(conv_k) + x_k).
XLA's CPU fusion duplicates cheap elementwise producers into every consumer fusion, so each
consumer that needs x_k in another layout (the transposed copies behind convolution weight
gradients, the ReLU and BatchNorm backward passes) recomputes the chain from many blocks back:
in the HRNet-18s train step, single fusions recomputed 13 BatchNorms and 5 modules' upsampling
for one 2 MiB transposed copy. `jax.lax.optimization_barrier` does not stop this on CPU (XLA
expands barriers before fusion); a conditional does: both branches return x (one as x * 1, so
XLA keeps them apart), and its result is a buffer that later fusions read instead of
recomputing. Placed at block outputs it made the HRNet-18s train step (batch 8 at 256²)
1.45x faster (`benchmarks/lowerings.py`).

Only where the CPU switch is on (on GPU a conditional reads its predicate on the host) and when
enabled (`fusion_breaks(False)` turns it off, for A/B benchmarks). Under `vmap` the conditional
becomes a select of equal values: the same numbers, no break.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import jax
import jax.numpy as jnp

from dig_jax.cpu import switch

_ENABLED = [True]


@contextlib.contextmanager
def fusion_breaks(enabled: bool) -> Iterator[None]:
    """Trace `materialize` as a plain identity inside the block when `enabled` is False (read
    when tracing: functions traced before keep what they were traced with)."""
    previous = _ENABLED[0]
    _ENABLED[0] = bool(enabled)
    try:
        yield
    finally:
        _ENABLED[0] = previous


def materialize(x: jax.Array) -> jax.Array:
    """x unchanged (same values, shape and dtype); on CPU XLA computes it once into a buffer
    instead of fusing its producers into every consumer."""
    if not _ENABLED[0] or not switch.active() or x.size == 0:
        return x
    # any runtime predicate will do (both branches are x); this one is one element read
    predicate = jnp.isnan(x.reshape(-1)[0])
    one = jnp.ones((), x.dtype)
    return jax.lax.cond(predicate, lambda v: v * one, lambda v: v, x)
