"""IoU and RICE: hand-made cases with known answers, properties, jnp/numpy agreement, bad input."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dig_jax.metrics import iou, rice, rice_scores


def _mask(rows: list[str]) -> np.ndarray:
    """'.' = 0, '#' = 1, 'v' = 255 (void)."""
    table = {".": 0, "#": 1, "v": 255}
    return np.array([[table[c] for c in row] for row in rows], dtype=np.uint8)


class TestIoU:
    def test_known_overlap(self):
        pred = _mask(["##..", "##..", "....", "...."])
        gt = _mask(["###.", "###.", "....", "...."])
        assert iou(pred, gt) == pytest.approx(4 / 6)

    def test_void_pixels_ignored_in_pred_and_gt(self):
        pred = _mask(["####", "....", "....", "...."])
        gt = _mask(["##vv", "....", "....", "...."])
        assert iou(pred, gt) == pytest.approx(1.0)
        gt_void_elsewhere = _mask(["##..", "vvvv", "....", "...."])
        assert iou(pred, gt_void_elsewhere) == pytest.approx(2 / 4)

    def test_empty_union_is_one(self):
        empty = np.zeros((3, 3), np.uint8)
        assert iou(empty, empty) == 1.0
        all_void = np.full((3, 3), 255, np.uint8)
        assert iou(np.ones((3, 3), np.uint8), all_void) == 1.0

    def test_disjoint_is_zero_and_bool_accepted(self):
        pred = _mask(["#...", "....", "....", "...."]).astype(bool)
        gt = _mask(["...#", "....", "....", "...."])
        assert iou(pred, gt) == 0.0

    def test_batched_leading_axes(self):
        rng = np.random.default_rng(0)
        pred = rng.integers(0, 2, (2, 3, 8, 8), dtype=np.uint8)
        gt = rng.integers(0, 2, (2, 3, 8, 8), dtype=np.uint8)
        out = iou(pred, gt)
        assert out.shape == (2, 3)
        assert out[1, 2] == pytest.approx(iou(pred[1, 2], gt[1, 2]))

    def test_bad_input_names_argument(self):
        gt = np.zeros((4, 4), np.uint8)
        with pytest.raises(ValueError, match="pred must hold values in"):
            iou(np.full((4, 4), 2, np.uint8), gt)
        with pytest.raises(ValueError, match="pred must be a bool or integer"):
            iou(np.zeros((4, 4), np.float32), gt)
        with pytest.raises(ValueError, match=r"shape mismatch: pred=.*gt="):
            iou(np.zeros((4, 5), np.uint8), gt)
        with pytest.raises(ValueError, match="gt must hold values in"):
            iou(gt, np.full((4, 4), 7, np.uint8))


class TestRice:
    @pytest.mark.parametrize(
        ("alpha", "beta", "expected"),
        [
            (0.9, 0.8, 0.5),  # half of the possible gain realised
            (0.4, 0.8, -0.5),  # lost half of what was there
            (0.8, 0.8, 0.0),
            (0.7, 0.0, 0.7),  # creation: RICE = IoU
            (0.0, 0.0, 0.0),
            (1.0, 1.0, 0.0),  # beta = 1 is defined
            (0.3, 1.0, -0.7),  # beta = 1: alpha - 1
            (1.0, 0.5, 1.0),
            (0.0, 0.5, -1.0),
        ],
    )
    def test_known_values(self, alpha, beta, expected):
        assert rice(alpha, beta) == pytest.approx(expected)
        assert float(rice(jnp.float32(alpha), jnp.float32(beta))) == pytest.approx(
            expected, abs=1e-6
        )

    @given(st.floats(0, 1), st.floats(0, 1))
    def test_range(self, alpha, beta):
        r = rice(alpha, beta)
        assert -1.0 <= r <= 1.0
        assert not np.isnan(r)

    @given(st.floats(0, 1))
    def test_no_change_is_zero(self, beta):
        assert rice(beta, beta) == 0.0

    @given(st.floats(0, 1), st.floats(0, 1), st.floats(0, 1))
    def test_monotone_in_alpha(self, a1, a2, beta):
        lo, hi = sorted((a1, a2))
        assert rice(lo, beta) <= rice(hi, beta) + 1e-12

    def test_jnp_gradients_finite_at_edges(self):
        grad = jax.grad(lambda a, b: rice(a, b), argnums=(0, 1))
        for a, b in [(0.0, 0.0), (1.0, 1.0), (0.5, 1.0), (0.0, 0.5), (1.0, 0.0)]:
            ga, gb = grad(jnp.float32(a), jnp.float32(b))
            assert np.isfinite(ga) and np.isfinite(gb)

    def test_rejects_out_of_range_and_nan(self):
        with pytest.raises(ValueError, match="alpha must lie in"):
            rice(1.5, 0.2)
        with pytest.raises(ValueError, match="beta contains NaN"):
            rice(0.5, float("nan"))


class TestRiceScores:
    def test_refinement_add_known(self):
        gt = _mask(["####", "####", "....", "...."])
        prev = _mask(["##..", "##..", "....", "...."])  # beta_global = 0.5
        local = _mask(["##vv", "##vv", "vvvv", "vvvv"])
        pred = gt.copy()
        out = rice_scores(pred, prev, gt, gt_local=gt)
        assert out["iou_global"] == 1.0
        assert out["rice_global"] == pytest.approx(1.0)
        worse = _mask(["#...", "#...", "....", "...."])  # alpha = 0.25 < beta
        out = rice_scores(worse, prev, gt, local)
        assert out["rice_global"] == pytest.approx(0.25 / 0.5 - 1)
        assert out["iou_local"] == pytest.approx(0.5)

    def test_creation_when_prev_none_or_zero(self):
        gt = _mask(["##..", "##..", "....", "...."])
        pred = _mask(["#...", "#...", "....", "...."])
        a = rice_scores(pred, None, gt, gt)
        b = rice_scores(pred, np.zeros_like(gt), gt, gt)
        for key in ("rice_global", "rice_local"):
            assert a[key] == pytest.approx(0.5)
            assert b[key] == pytest.approx(0.5)


masks = hnp.arrays(np.uint8, (6, 6), elements=st.sampled_from([0, 1]))
gts = hnp.arrays(np.uint8, (6, 6), elements=st.sampled_from([0, 1, 255]))


@given(masks, masks)
def test_iou_symmetric(a, b):
    assert iou(a, b) == iou(b, a)


_iou_jit = jax.jit(iou)
_rice_scores_jit = jax.jit(rice_scores)


@given(masks, masks, gts, gts)
def test_jnp_and_numpy_agree(pred, prev, gt_global, gt_local):
    ref = rice_scores(pred, prev, gt_global, gt_local)
    out = _rice_scores_jit(*map(jnp.asarray, (pred, prev, gt_global, gt_local)))
    for key, value in ref.items():
        np.testing.assert_allclose(np.asarray(out[key]), value, atol=1e-6)
    np.testing.assert_allclose(
        np.asarray(_iou_jit(jnp.asarray(pred), jnp.asarray(gt_global))),
        iou(pred, gt_global),
        atol=1e-6,
    )


def test_vmap_matches_batch():
    rng = np.random.default_rng(1)
    pred = rng.integers(0, 2, (4, 6, 6), dtype=np.uint8)
    gt = rng.integers(0, 2, (4, 6, 6), dtype=np.uint8)
    out = jax.vmap(iou)(jnp.asarray(pred), jnp.asarray(gt))
    np.testing.assert_allclose(np.asarray(out), iou(pred, gt), atol=1e-6)
