"""Adam on attack parameters through a model: one step function, two drivers.

`adam_search` runs the steps in `lax.scan` (for callers inside their own jit). `HostSearch`
runs the same step as one compiled call per step from a Python loop, plus a compiled start and
finish, each `vmap`ped over instances when batched. On CPU that is the fast driver: XLA lowers
the convolutions inside a loop body to its generic convolution, which made the scanned attack
~1.8x the cost of its 50 forward+backward passes (`benchmarks/breps.py`); the host loop costs
the passes plus a dispatch per step. Both drivers compute the same steps (tested).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from dig_jax import cpu
from dig_jax.metrics import iou

# params -> (loss, (logits f32[H, W], shown)); `shown` is what the model saw (a box, points).
Objective = Callable[[Any], tuple[jax.Array, tuple[jax.Array, Any]]]


class SearchSetup(NamedTuple):
    """One instance's search: objective, start params, GT for the hard IoU, Adam step size,
    whether the worst (lowest-IoU) step is kept, and the projection after every step."""

    objective: Objective
    params: Any
    gt: jax.Array
    lr: jax.Array
    find_min: Any
    project: Callable[[Any], Any] = lambda p: p


_ADAM = optax.scale_by_adam()


def _step(setup: SearchSetup, carry: Any) -> tuple[Any, tuple[Any, jax.Array, jax.Array]]:
    """One Adam step from carry (params, adam state): new carry, (shown, hard IoU, loss)."""
    params, state = carry
    grad_fn = jax.value_and_grad(setup.objective, has_aux=True)
    with cpu.reverse_mode_only():  # the gradient is only ever taken in reverse mode
        (loss, (logits, shown)), grad = grad_fn(params)
    grad = jax.tree.map(lambda g: jnp.nan_to_num(g, nan=0.0, posinf=0.0, neginf=0.0), grad)
    updates, state = _ADAM.update(grad, state)
    params = setup.project(jax.tree.map(lambda p, u: p - setup.lr * u, params, updates))
    return (params, state), (shown, iou(logits > 0, setup.gt), loss)


def _finish(setup: SearchSetup, last: Any, shown: Any, ious: jax.Array, losses: jax.Array):
    """Append the last params' evaluation to the stacked history; pick the best step."""
    last_loss, (last_logits, last_shown) = setup.objective(last)
    shown = jax.tree.map(lambda a, b: jnp.concatenate([a, b[None]]), shown, last_shown)
    ious = jnp.concatenate([ious, iou(last_logits > 0, setup.gt)[None]])
    losses = jnp.concatenate([losses, last_loss[None]])
    best = jnp.where(setup.find_min, jnp.argmin(ious), jnp.argmax(ious)).astype(jnp.int32)
    return shown, ious, losses, best


def adam_search(
    objective: Objective,
    params: Any,
    gt: jax.Array,
    *,
    lr: jax.Array,
    steps: int,
    find_min: Any,
    project: Callable[[Any], Any] = lambda p: p,
) -> tuple[Any, jax.Array, jax.Array, jax.Array]:
    """Adam (optax.scale_by_adam, step `lr`) on `objective(params) -> (loss, (logits, shown))`,
    `project` after every step, `lax.scan` over `steps`. Returns (shown [S+1, ...], hard IoUs
    [S+1] of logits > 0 vs gt, losses [S+1], best step: first argmin (find_min, may be traced)
    or argmax of the IoUs, step 0 included)."""
    setup = SearchSetup(objective, params, gt, lr, find_min, project)
    (last, _), (shown, ious, losses) = jax.lax.scan(
        lambda carry, _: _step(setup, carry), (params, _ADAM.init(params)), None, length=steps
    )
    return _finish(setup, last, shown, ious, losses)


class HostSearch:
    """`adam_search` for `make_setup(*args) -> SearchSetup`, one compiled call per step.

    `batched`: every function is vmapped with `in_axes` over `args` (the carry and history
    along axis 0). `step_options`: XLA compiler options of the step (a gradient). Calling it
    returns `result(shown, ious, losses, best)` (default the tuple itself, as `adam_search`
    returns it), with a leading instance axis when batched. Compiles once per argument shapes
    (jax.jit's cache).
    """

    def __init__(
        self,
        make_setup: Callable[..., SearchSetup],
        steps: int,
        batched: bool = False,
        in_axes: tuple[Any, ...] | None = None,
        step_options: dict[str, Any] | None = None,
        result: Callable[..., Any] = lambda *outputs: outputs,
    ):
        if int(steps) < 1:
            raise ValueError(f"steps must be >= 1, got {steps}")
        self.steps = int(steps)

        def start(*args):
            params = make_setup(*args).params
            return params, _ADAM.init(params)

        def step(carry, *args):
            return _step(make_setup(*args), carry)

        def finish(carry, history, *args):
            shown, ious, losses = jax.tree.map(lambda *xs: jnp.stack(xs), *history)
            return result(*_finish(make_setup(*args), carry[0], shown, ious, losses))

        if batched:
            start = jax.vmap(start, in_axes=in_axes)
            step = jax.vmap(step, in_axes=(0, *in_axes))
            finish = jax.vmap(finish, in_axes=(0, 0, *in_axes))
        self._start = jax.jit(start)
        self._step = jax.jit(step, compiler_options=step_options or None)
        self._finish = jax.jit(finish)

    def __call__(self, *args: Any) -> Any:
        return self._run(self._start, self._step, self._finish, *args)

    def compile(self, *args: Any) -> Callable[..., Any]:
        """Ahead of time for these argument shapes: a callable running the compiled functions."""
        start = self._start.lower(*args).compile()
        carry = jax.eval_shape(self._start, *args)
        step = self._step.lower(carry, *args).compile()
        one = jax.eval_shape(self._step, carry, *args)[1]
        finish = self._finish.lower(carry, [one] * self.steps, *args).compile()
        return functools.partial(self._run, start, step, finish)

    def _run(self, start, step, finish, *args):
        args = jax.device_put(args)  # once, not at every step
        carry = start(*args)
        history = []
        for _ in range(self.steps):
            carry, record = step(carry, *args)
            history.append(record)
        return finish(carry, history, *args)
