"""IoU-Tight/Min/Max/Δ aggregation."""

from __future__ import annotations

import numpy as np
import pytest

from dig_jax.metrics.breps import breps_metrics, breps_table


def test_known_values():
    m = breps_metrics([0.8, 0.6], [0.5, 0.2], [0.9, 0.7])
    assert m["n"] == 2
    assert m["iou_tight"] == pytest.approx(0.7)
    assert m["iou_min"] == pytest.approx(0.35)
    assert m["iou_max"] == pytest.approx(0.8)
    assert m["iou_delta"] == pytest.approx(0.45)
    table = breps_table({("grabcut", "dig"): m})
    assert "| grabcut | dig | 2 | 0.700 | 0.350 | 0.800 | 0.450 |" in table


def test_delta_equals_mean_max_minus_mean_min():
    rng = np.random.default_rng(0)
    tight = rng.uniform(0.2, 0.8, 50)
    lo, hi = tight - rng.uniform(0, 0.2, 50), tight + rng.uniform(0, 0.2, 50)
    m = breps_metrics(tight, lo, hi)
    assert m["iou_delta"] == pytest.approx(m["iou_max"] - m["iou_min"])


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (([0.5], [0.6], [0.7]), "iou_min exceeds"),
        (([0.5], [0.4], [0.3]), "iou_max is below"),
        (([0.5], [0.4], [1.3]), "iou_max must be"),
        (([0.5, 0.5], [0.4], [0.6]), "differ in length"),
        (([np.nan], [0.4], [0.6]), "iou_tight must be"),
    ],
)
def test_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        breps_metrics(*args)
