"""The train step itself: `init_state` and `train_step` (pure; jit them), with its NaN guard.

Kept apart from the loop (`dig_jax.train.train`) so that a process that only steps (a benchmark,
a notebook, another loop) imports the model, loss and optimizer, not the data pipeline,
checkpointing and evaluation (orbax, grain, OpenCV, scikit-image: ~130 MiB of resident memory).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax

from dig_jax import cpu
from dig_jax.prompts.encode import batch_to_input
from dig_jax.train.losses import total_loss
from dig_jax.train.state import TrainState


def init_state(model: Any, tx: optax.GradientTransformation, input_shape: tuple, key) -> TrainState:
    variables = model.init(key, jnp.zeros(input_shape, jnp.float32), train=False)
    return TrainState.create(variables["params"], variables.get("batch_stats", {}), tx)


def train_step(state: TrainState, batch: dict, *, model, input_kind: str, loss_config) -> tuple:
    """One AdamW step on a global batch; returns (new state, scalar metrics). Traced in
    `cpu.reverse_mode_only()`: the CPU lowerings' custom VJPs apply to it."""
    with cpu.reverse_mode_only():
        return _train_step(state, batch, model, input_kind, loss_config)


def _train_step(state: TrainState, batch: dict, model, input_kind: str, loss_config) -> tuple:
    x = batch_to_input(batch, input_kind)

    def loss_fn(params):
        variables = {"params": params, "batch_stats": state.batch_stats}
        outputs, updates = model.apply(variables, x, train=True, mutable=["batch_stats"])
        loss, parts = total_loss(outputs, batch, loss_config)
        return loss, (parts, updates["batch_stats"])

    (loss, (parts, batch_stats)), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
    new_state = state.apply_gradients(grads, batch_stats)
    grad_norm = optax.global_norm(grads)
    finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm) & tree_all_finite(new_state)
    return new_state, {"loss": loss, **parts, "grad_norm": grad_norm, "finite": finite}


def tree_all_finite(tree: Any) -> jax.Array:
    """Scalar bool: no NaN/Inf in any floating-point leaf of `tree` (jnp, inside jit).

    One reduction over the raveled leaves: one check per leaf would add a fusion per parameter
    and optimizer moment to the train step. XLA materialises the concatenation (44 MiB for
    HRNet-18s's params, statistics and Adam moments) after the backward pass, when the
    activations are freed: the step's temporaries grew by 15 MiB in all with the flat optimizer.
    """
    leaves = [
        jnp.ravel(x).astype(jnp.float32)
        for x in jax.tree.leaves(tree)
        if jnp.issubdtype(jnp.result_type(x), jnp.inexact)
    ]
    return jnp.all(jnp.isfinite(jnp.concatenate(leaves))) if leaves else jnp.asarray(True)
