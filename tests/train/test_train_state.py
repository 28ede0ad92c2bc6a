"""Learning-rate schedules of the optimizer (known values)."""

from __future__ import annotations

import math

import ml_collections
import numpy as np
import pytest

from dig_jax.train.state import make_schedule


def optim(schedule: str, lr: float = 1e-3, warmup_steps: int = 10) -> ml_collections.ConfigDict:
    return ml_collections.ConfigDict({"schedule": schedule, "lr": lr, "warmup_steps": warmup_steps})


def test_warmup_then_cosine_to_one_percent():
    schedule = make_schedule(optim("warmup_cosine"), total_steps=110)
    lr, end = 1e-3, 1e-5
    # linear warm-up from 0 over 10 steps
    for step, expected in ((0, 0.0), (1, 1e-4), (5, 5e-4), (10, lr)):
        assert float(schedule(step)) == pytest.approx(expected, rel=1e-5, abs=1e-12)
    # cosine over the remaining 100 steps: end + (lr - end) * (1 + cos(pi * t)) / 2
    for step in (35, 60, 85, 110):
        t = (step - 10) / 100
        expected = end + (lr - end) * (1 + math.cos(math.pi * t)) / 2
        assert float(schedule(step)) == pytest.approx(expected, rel=1e-5)
    assert float(schedule(60)) == pytest.approx((lr + end) / 2, rel=1e-5)
    assert float(schedule(500)) == pytest.approx(end, rel=1e-5)  # stays at the end value
    values = np.array([float(schedule(s)) for s in range(10, 111)])
    assert (np.diff(values) <= 1e-12).all()  # monotone decay after the warm-up


def test_constant_and_unknown_schedules():
    schedule = make_schedule(optim("constant", lr=3e-4), total_steps=50)
    assert [float(schedule(s)) for s in (0, 25, 50)] == pytest.approx([3e-4] * 3)
    with pytest.raises(ValueError, match=r"optim\.schedule"):
        make_schedule(optim("linear"), total_steps=50)


def _optim_config(flat: bool, mult: float, clip: float) -> ml_collections.ConfigDict:
    return ml_collections.ConfigDict(
        {
            "schedule": "warmup_cosine",
            "lr": 1e-2,
            "warmup_steps": 2,
            "weight_decay": 1e-2,
            "grad_clip": clip,
            "backbone_lr_mult": mult,
            "flat": flat,
        }
    )


@pytest.mark.parametrize(("mult", "clip"), [(1.0, 0.0), (1.0, 0.5), (0.1, 0.5), (0.1, 0.0)])
def test_flat_optimizer_makes_the_per_leaf_updates(mult, clip):
    """optax.flatten changes the program, not the arithmetic: five steps of the flat optimizer
    give the per-leaf optimizer's parameters (up to the global norm's summation order)."""
    import jax
    import optax

    from dig_jax.train.state import make_optimizer

    rng = np.random.default_rng(0)
    params = {
        "backbone": {"conv": {"kernel": rng.normal(size=(3, 3, 2, 4)).astype(np.float32)}},
        "head": {
            "bias": rng.normal(size=(4,)).astype(np.float32),
            "kernel": rng.normal(size=(4, 1)).astype(np.float32),
        },
    }
    results = {}
    for flat in (False, True):
        tx = make_optimizer(_optim_config(flat, mult, clip), total_steps=20)
        p, state = params, tx.init(params)
        for step in range(5):
            grads = jax.tree.map(lambda x, s=step: np.sin(x * (s + 1)) * 3.0, p)
            updates, state = tx.update(grads, state, p)
            p = optax.apply_updates(p, updates)
        results[flat] = p
    assert jax.tree.structure(results[True]) == jax.tree.structure(results[False])
    for a, b in zip(jax.tree.leaves(results[True]), jax.tree.leaves(results[False]), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    moved = [np.abs(a - b).max() for a, b in zip(jax.tree.leaves(results[True]),
                                                 jax.tree.leaves(params), strict=True)]  # fmt: skip
    assert min(moved) > 1e-4  # every group was updated


def test_tree_all_finite_finds_one_bad_value_in_any_leaf():
    import jax.numpy as jnp

    from dig_jax.train.step import tree_all_finite

    tree = {"a": jnp.ones((3, 4)), "b": [jnp.zeros(5), jnp.ones((), jnp.bfloat16)],
            "step": jnp.asarray(7, jnp.int32)}  # fmt: skip
    assert bool(tree_all_finite(tree))
    for bad in (np.nan, np.inf, -np.inf):
        assert not bool(tree_all_finite({**tree, "a": tree["a"].at[2, 1].set(bad)}))
        half = jnp.asarray(bad, jnp.bfloat16)
        assert not bool(tree_all_finite({**tree, "b": [tree["b"][0], half]}))
    assert bool(tree_all_finite({"step": jnp.asarray(1)}))  # no float leaf: nothing to check


def test_a_config_without_flat_keeps_per_leaf_states():
    """Workdirs written before `optim.flat` existed keep their optimizer-state layout."""
    import jax

    from dig_jax.train.config import base_config
    from dig_jax.train.state import make_optimizer

    params = {"a": np.zeros((2, 3), np.float32), "b": np.zeros(4, np.float32)}
    old = _optim_config(True, 1.0, 0.5)
    del old["flat"]
    per_leaf = make_optimizer(old, total_steps=10).init(params)
    flat = make_optimizer(_optim_config(True, 1.0, 0.5), total_steps=10).init(params)
    assert max(x.size for x in jax.tree.leaves(per_leaf)) == 6  # one moment per parameter leaf
    assert max(x.size for x in jax.tree.leaves(flat)) == 10  # one raveled vector
    assert base_config("tiny").optim.flat is True
