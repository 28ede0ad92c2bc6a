"""RClicks metrics on hand-made NoC tables; merged shards equal one pass; bad inputs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dig_jax.metrics import RClicksTally, iou_auc, rclicks_table
from dig_jax.metrics.rclicks import N_GROUPS, instance_scores


def hand_made():
    """Instance A: G1..G5 need 2 clicks, G6..G10 need 4, the baseline 2; AUC 0.5 / 0.7.
    Instance B: every group needs 10 clicks, the baseline 5; every AUC 0."""
    at90 = np.array([[2] * 5 + [4] * 5, [10] * 10], float)
    noc_groups = np.stack([np.ones_like(at90), at90], axis=-1)  # thresholds (0.85, 0.90)
    noc_base = np.array([[1, 2], [1, 5]], float)
    auc = np.array([[0.5] * 5 + [0.7] * 5, [0.0] * 10])
    return noc_groups, noc_base, auc, np.array([0.6, 0.1])


def test_hand_made_table():
    m = RClicksTally.from_noc(*hand_made()).compute()
    assert m["n"] == 2
    assert m["sample_noc@90"] == pytest.approx((3 + 10) / 2)
    assert m["sample_noc_std@90"] == pytest.approx((1 + 0) / 2)
    assert m["base_noc@90"] == pytest.approx(3.5)
    assert m["dsb@90"] == pytest.approx(((3 - 2) / 2 + (10 - 5) / 5) / 2)
    assert m["dgr@90"] == pytest.approx(((2 - 4) / 4 + 0) / 2)
    assert m["dhh@90"] == pytest.approx(((2 - 4) / 4 + 0) / 2)
    assert m["dsb@85"] == 0 and m["dgr@85"] == 0 and m["sample_noc@85"] == 1
    assert m["sample_auc"] == pytest.approx(0.3)
    assert m["sample_auc_std"] == pytest.approx(0.05)
    assert m["base_auc"] == pytest.approx(0.35)
    assert np.isnan(m["nsr"])  # no first-round IoUs given: no NSR (never the AUCs' spread)
    assert m["sample_nof@90"] == pytest.approx(0.0)
    assert m["dsb_auc"] == pytest.approx((0.6 - 0.6 + 0.0 - 0.1) / 2)
    assert m["dgr_auc"] == pytest.approx((0.5 - 0.7 + 0.0) / 2)
    table = rclicks_table({"toy": m})
    assert "| toy | 2 | 6.50 ± 0.50 | 3.50 | 75.00 | -25.00 | -25.00 |" in table
    assert "saturates" not in rclicks_table({"toy": m}, max_clicks=10)


def test_table_says_when_noc_saturates():
    """Every trajectory at the click limit: the NoC columns read 20.00 / 0.00 and the table
    says so, pointing at the IoU-AUC columns."""
    noc = np.full((3, 10, 2), 20.0)  # thresholds (0.85, 0.90)
    auc = np.linspace(0.2, 0.4, 30).reshape(3, 10)
    m = RClicksTally.from_noc(noc, np.full((3, 2), 20.0), auc, np.full(3, 0.3)).compute()
    table = rclicks_table({"tiny": m}, max_clicks=20)
    assert "saturates at the 20-click limit in tiny" in table and "IoU-AUC" in table


def test_nsr_is_the_spread_of_first_round_ious():
    """NSR (RClicks) = std / mean over the groups of the IoU after the first click, per
    instance, then averaged: A's first clicks give 0.4 or 0.8 (std 0.2 / mean 0.6), B's none."""
    first = np.array([[0.4] * 5 + [0.8] * 5, [0.0] * 10])
    m = RClicksTally.from_noc(*hand_made(), first_groups=first).compute()
    assert m["nsr"] == pytest.approx((0.2 / 0.6 + 0.0) / 2)  # all-zero IoUs: NSR 0, not NaN
    t = np.arange(1, 21)
    group_ious = np.where(t >= 2, 0.95, np.linspace(0.3, 0.7, N_GROUPS)[:, None])[None]
    m = RClicksTally.from_ious(group_ious, np.full((1, 20), 0.9)).compute()
    first = np.linspace(0.3, 0.7, N_GROUPS)
    assert m["nsr"] == pytest.approx(first.std() / first.mean())


def test_dhh_pairs_groups_one_to_one():
    """ΔHH averages (G_k − G_{k+5}) / G_{k+5} over k, as the reference does."""
    groups = np.array([[1, 2, 3, 4, 5, 2, 2, 2, 2, 10]], float)[..., None]
    s = instance_scores(groups, np.array([[1.0]]), np.zeros((1, N_GROUPS)))
    expected = np.mean([(1 - 2) / 2, 0, (3 - 2) / 2, (4 - 2) / 2, (5 - 10) / 10])
    assert s["dhh"][0, 0] == pytest.approx(expected)


def test_from_ious_matches_noc_and_auc():
    t = 20
    first_hit = np.array([[3, 3, 3, 3, 3, 3, 3, 3, 3, 1]])  # per group, 1-based
    clicks = np.arange(1, t + 1)
    group_ious = np.where(clicks >= first_hit[..., None], 0.95, 0.5)
    base_ious = np.where(clicks >= 2, 0.92, 0.4)[None]
    m = RClicksTally.from_ious(group_ious, base_ious).compute()
    assert m["sample_noc@90"] == pytest.approx(2.8)
    assert m["base_noc@90"] == 2
    assert m["dgr@90"] == pytest.approx((3 - 1) / 1)
    assert m["base_auc"] == pytest.approx(iou_auc(base_ious[0]))


def test_iou_auc_trapezoid_over_19():
    assert iou_auc(np.ones(20)) == pytest.approx(1.0)
    assert iou_auc(np.linspace(0, 1, 20)) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="ious"):
        iou_auc(np.ones(1))
    with pytest.raises(ValueError, match="ious"):
        iou_auc(np.array([0.2, np.nan]))


@given(st.integers(1, 12), st.integers(1, 4), st.integers(0, 2**31 - 1))
def test_merge_equals_one_pass(n, n_chunks, seed):
    rng = np.random.default_rng(seed)
    groups = rng.integers(1, 21, (n, N_GROUPS, 2)).astype(float)
    base = rng.integers(1, 21, (n, 2)).astype(float)
    auc = rng.uniform(0, 1, (n, N_GROUPS))
    auc_base = rng.uniform(0, 1, n)
    first = rng.uniform(0, 1, (n, N_GROUPS))
    whole = RClicksTally.from_noc(groups, base, auc, auc_base, first_groups=first).compute()
    merged = RClicksTally.empty()
    for part in np.array_split(np.arange(n), n_chunks):
        tally = RClicksTally.from_noc(
            groups[part], base[part], auc[part], auc_base[part], first_groups=first[part]
        )
        merged = merged.merge(tally)
    assert merged.compute() == pytest.approx(whole)
    for key, value in whole.items():
        assert np.isfinite(value), key


def test_empty_tally_is_nan_and_thresholds_must_match():
    assert np.isnan(RClicksTally.empty().compute()["sample_noc@90"])
    with pytest.raises(ValueError, match="thresholds differ"):
        RClicksTally.empty().merge(RClicksTally.empty(thresholds=(0.9,)))


@pytest.mark.parametrize(
    ("args", "name"),
    [
        ((np.zeros((1, 10, 2)), np.ones((1, 2)), np.zeros((1, 10))), "noc_groups"),
        ((np.ones((1, 9, 2)), np.ones((1, 2)), np.zeros((1, 10))), "noc_groups"),
        ((np.ones((1, 10, 2)), np.full((1, 2), 21.0), np.zeros((1, 10))), "noc_base"),
        ((np.ones((1, 10, 2)), np.ones((1, 2)), np.full((1, 10), np.nan)), "auc_groups"),
        ((np.ones((1, 10, 2)), np.ones((1, 2)), np.zeros((1, 3))), "auc_groups"),
    ],
)
def test_bad_tables_raise_naming_the_argument(args, name):
    with pytest.raises(ValueError, match=name):
        RClicksTally.from_noc(*args)
