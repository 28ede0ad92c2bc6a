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
