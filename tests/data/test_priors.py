"""Previous segmentations in the IoU band, corrections and refinement targets."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dig_jax.data.priors import (
    COARSE_OVER,
    IOU_BAND,
    PriorUnreachableError,
    coarse_prior,
    find_corrections,
    refinement_local,
    refinement_targets,
    synthesize_prior,
)
from dig_jax.data.regions import VOID, extract_regions
from dig_jax.data.sources.benchmark_folder import benchmark_folder
from dig_jax.data.sources.procedural import procedural
from dig_jax.data.sources.record import resize_loaded
from dig_jax.gestures.types import Context
from dig_jax.metrics import iou


def _gt_with_void(mask, void):
    return np.where(void > 0, VOID, mask).astype(np.uint8)


@pytest.fixture(scope="module")
def procedural_regions():
    out = []
    for rec in procedural(3, 6, size=128):
        loaded = rec.load()
        out += [(loaded, r) for r in extract_regions(loaded.instances)]
    return out


def test_priors_in_band_and_deterministic(procedural_regions):
    assert len(procedural_regions) >= 10
    for loaded, region in procedural_regions:
        a = synthesize_prior(loaded.image, region.mask, np.random.default_rng(5), void=loaded.void)
        b = synthesize_prior(loaded.image, region.mask, np.random.default_rng(5), void=loaded.void)
        assert a.dtype == np.uint8 and set(np.unique(a)) <= {0, 1}
        assert np.array_equal(a, b)
        value = float(iou(a, _gt_with_void(region.mask, loaded.void)))
        assert IOU_BAND[0] <= value <= IOU_BAND[1]


def test_priors_in_band_on_real_photos_with_void(shared_data):
    records = benchmark_folder(shared_data / "grabcut")[:6]
    for k, rec in enumerate(records):
        loaded = resize_loaded(rec.load(), (160, 160))
        for region in extract_regions(loaded.instances):
            prior = synthesize_prior(
                loaded.image, region.mask, np.random.default_rng(k), void=loaded.void
            )
            value = float(iou(prior, _gt_with_void(region.mask, loaded.void)))
            assert IOU_BAND[0] <= value <= IOU_BAND[1], rec.image_id


def test_coarse_priors_leave_one_large_error_and_are_deterministic(procedural_regions):
    kinds = set()
    for k, (loaded, region) in enumerate(procedural_regions):
        obj = (region.mask > 0) & ~(loaded.void > 0)
        a = coarse_prior(loaded.image, region.mask, np.random.default_rng(k), void=loaded.void)
        b = coarse_prior(loaded.image, region.mask, np.random.default_rng(k), void=loaded.void)
        assert a.dtype == np.uint8 and set(np.unique(a)) <= {0, 1} and np.array_equal(a, b)
        prior, area = a > 0, int(obj.sum())
        if obj[~prior].sum() == 0:  # over: the whole region and a blob of background
            extra = int((prior & ~(region.mask > 0)).sum())
            assert 0 < extra <= 1.5 * (COARSE_OVER[1] + 0.3) * area
            kinds.add("over")
        else:  # under: a piece of the region (whole superpixels: a little background too)
            kept = int((prior & obj).sum())
            assert 0 < kept < 0.9 * area  # U(COARSE_UNDER) of it, and one superpixel more
            assert (prior & obj).sum() >= 0.5 * prior.sum()
            kinds.add("under")
        assert float(iou(a, _gt_with_void(region.mask, loaded.void))) < IOU_BAND[0] + 0.1
    assert kinds == {"over", "under"}
    with pytest.raises(ValueError, match="gt: empty"):
        coarse_prior(np.zeros((10, 10, 3), np.uint8), np.zeros((10, 10)), np.random.default_rng(0))
    with pytest.raises(ValueError, match="gt: shape"):
        coarse_prior(np.zeros((10, 10, 3), np.uint8), np.ones((9, 10)), np.random.default_rng(0))


def test_wider_coarse_over_segmentations_take_in_more_background(procedural_regions):
    """`over` sets how much background an over-segmenting coarse prior takes in; the default
    range gives the bytes of a call without it; a bad range is named."""
    extras = {COARSE_OVER: [], (3.0, 4.0): []}
    for k, (loaded, region) in enumerate(procedural_regions):
        obj = (region.mask > 0) & ~(loaded.void > 0)
        plain = coarse_prior(loaded.image, region.mask, np.random.default_rng(k), void=loaded.void)
        for over, found in extras.items():
            rng = np.random.default_rng(k)
            prior = coarse_prior(loaded.image, region.mask, rng, void=loaded.void, over=over) > 0
            if over == COARSE_OVER:
                assert np.array_equal(prior, plain > 0)
            if obj[~prior].sum() == 0:  # an over-segmentation
                found.append((prior & ~(region.mask > 0)).sum() / obj.sum())
    assert extras[COARSE_OVER] and extras[(3.0, 4.0)]
    assert np.median(extras[(3.0, 4.0)]) > 1.5 * np.median(extras[COARSE_OVER])
    loaded, region = procedural_regions[0]
    for bad in [(2.0, 1.0), (-0.1, 1.0), (0.3, float("inf"))]:
        with pytest.raises(ValueError, match="over: expected finite 0 <= low <= high"):
            coarse_prior(loaded.image, region.mask, np.random.default_rng(0), over=bad)


def test_unreachable_band_gives_a_clear_error():
    image = np.full((40, 40, 3), 128, np.uint8)
    gt = np.zeros((40, 40), np.uint8)
    gt[20, 20] = 1  # any flip moves IoU to 0 or <= 0.5
    with pytest.raises(PriorUnreachableError, match="no prior with IoU"):
        synthesize_prior(image, gt, np.random.default_rng(0), max_tries=3)


def test_prior_bad_input():
    image = np.zeros((10, 10, 3), np.uint8)
    with pytest.raises(ValueError, match="gt: empty"):
        synthesize_prior(image, np.zeros((10, 10)), np.random.default_rng(0))
    with pytest.raises(ValueError, match="gt: shape"):
        synthesize_prior(image, np.ones((9, 10)), np.random.default_rng(0))


def test_corrections_known_answer():
    gt = np.zeros((64, 64), np.uint8)
    gt[10:50, 10:50] = 1
    prev = gt.copy()
    prev[10:20, 10:25] = 0  # 150 px missing -> ADD
    prev[55:63, 0:15] = 1  # 120 px extra -> REMOVE
    prev[40:50, 40:45] = 0  # 50 px missing: below 100 px, not a correction
    corrections = find_corrections(prev, gt)
    assert [(c.context, c.area) for c in corrections] == [(Context.ADD, 150), (Context.REMOVE, 120)]
    local, target = refinement_targets(prev, gt, corrections[1])
    assert local[55:63, 0:15].sum() == 0 and local[10:20, 10:25].sum() == 0
    assert np.all(target[10:20, 10:25] == VOID) and np.all(target[40:50, 40:45] == VOID)
    void = np.zeros_like(gt)
    void[10:20, 10:25] = 1  # the ADD component is void: no longer a correction
    assert [c.context for c in find_corrections(prev, gt, void)] == [Context.REMOVE]


@given(
    gt_box=st.tuples(
        st.integers(0, 20), st.integers(0, 20), st.integers(15, 40), st.integers(15, 40)
    ),
    prev_box=st.tuples(
        st.integers(0, 20), st.integers(0, 20), st.integers(15, 40), st.integers(15, 40)
    ),
)
def test_local_and_global_gt_relations(gt_box, prev_box):
    gt = np.zeros((48, 48), np.uint8)
    prev = np.zeros((48, 48), np.uint8)
    r, c, h, w = gt_box
    gt[r : r + h, c : c + w] = 1
    r, c, h, w = prev_box
    prev[r : r + h, c : c + w] = 1
    for corr in find_corrections(prev, gt):
        comp = corr.mask > 0
        assert corr.area >= 100
        assert np.all(gt[comp] == (corr.context == Context.ADD))
        assert np.all(prev[comp] == (corr.context == Context.REMOVE))
        local, target = refinement_targets(prev, gt, corr)
        # local GT = prev with exactly this component corrected
        assert np.array_equal(local != prev, comp)
        assert np.array_equal(local[comp], gt[comp])
        known = target != VOID
        assert np.array_equal(target[known], gt[known])
        assert np.array_equal(known, (prev == gt) | comp)


def test_priors_on_random_ellipses_mostly_land_in_the_band():
    # A prior that always raised would pass an "in band or a clear failure" check: count them.
    master = np.random.default_rng(2024)
    successes, draws = 0, 24
    for _ in range(draws):
        rng = np.random.default_rng(int(master.integers(2**16)))
        image = cv2.GaussianBlur(rng.integers(0, 256, (64, 64, 3)).astype(np.uint8), (7, 7), 2)
        gt = np.zeros((64, 64), np.uint8)
        centre, axes = master.integers(16, 49, 2), master.integers(8, 25, 2)
        cv2.ellipse(
            gt, tuple(int(v) for v in centre), tuple(int(v) for v in axes), 0, 0, 360, 1, -1
        )
        try:
            prior = synthesize_prior(image, gt, rng)
        except PriorUnreachableError:
            continue
        assert IOU_BAND[0] <= float(iou(prior, gt)) <= IOU_BAND[1]
        successes += 1
    assert successes >= 0.9 * draws


def _square_scene():
    rng = np.random.default_rng(0)
    image = cv2.GaussianBlur(rng.integers(0, 256, (64, 64, 3)).astype(np.uint8), (7, 7), 2)
    gt = np.zeros((64, 64), np.uint8)
    gt[12:44, 12:44] = 1
    return image, gt


def test_gt_255_is_void_not_object():
    image, gt = _square_scene()
    only_void = np.where(gt > 0, VOID, 0).astype(np.uint8)
    with pytest.raises(ValueError, match="gt: empty mask"):  # 255 is not object
        synthesize_prior(image, only_void, np.random.default_rng(0))
    with_void = gt.copy()
    with_void[30:56, 30:56] = VOID  # overlaps the object and the background
    a = synthesize_prior(image, with_void, np.random.default_rng(1))
    b = synthesize_prior(image, with_void == 1, np.random.default_rng(1), void=with_void == VOID)
    assert np.array_equal(a, b)  # gt == 255 behaves exactly like the `void` argument
    assert IOU_BAND[0] <= float(iou(a, with_void)) <= IOU_BAND[1]


def test_prior_validates_gt_values_void_shape_and_image():
    image, gt = _square_scene()
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"gt: values must be in \{0, 1, 255\}, got \[2\]"):
        synthesize_prior(image, gt * 2, rng)
    with pytest.raises(ValueError, match="gt: values"):
        synthesize_prior(image, gt * 0.5, rng)
    with pytest.raises(ValueError, match=r"void: shape \(64, 63\) differs from gt shape"):
        synthesize_prior(image, gt, rng, void=np.zeros((64, 63), np.uint8))
    with pytest.raises(ValueError, match=r"image: expected RGB \[H, W, 3\], got shape \(64, 64\)"):
        synthesize_prior(image[..., 0], gt, rng)
    with pytest.raises(ValueError, match="image: expected uint8, got float32"):
        synthesize_prior(image.astype(np.float32) / 255, gt, rng)
    assert synthesize_prior(image, gt > 0, rng).dtype == np.uint8  # bool gt is fine


@given(st.integers(0, 2**31 - 1), st.integers(1, 50), st.integers(1, 50), st.floats(0.05, 0.95))
def test_boundary_band_matches_ndimage_morphology(seed, h, w, density):
    """The band is OpenCV dilation minus erosion (speed); scipy's binary morphology decides."""
    from scipy import ndimage

    from dig_jax.data.priors import _boundary_band

    mask = np.random.default_rng(seed).random((h + 2, w + 2)) < density
    mask = mask[1:, 2:]  # a strided view, as the prior's crops are
    expected = ndimage.binary_dilation(mask, iterations=2) & ~ndimage.binary_erosion(
        mask, iterations=2
    )
    np.testing.assert_array_equal(_boundary_band(mask, 2), expected)


def test_refinement_local_inverts_the_training_target():
    """The local GT (eq. 6) read back from the void-bearing training target and the prior."""
    gt = np.zeros((30, 40), np.uint8)
    gt[5:25, 5:35] = 1
    prev = gt.copy()
    prev[5:15, 5:15] = 0  # missing: targeted
    prev[25:30, 30:40] = 1  # extra: untargeted
    void = np.zeros_like(gt)
    void[0:2, 0:2] = 1
    (correction,) = [c for c in find_corrections(prev, gt, void) if c.context == 1]
    local, target = refinement_targets(prev, gt, correction, void)
    for region, photo_void in ((gt, void), (gt, None), (None, void)):
        got, got_void = refinement_local(target, prev, region, photo_void)
        np.testing.assert_array_equal(got[void == 0], local[void == 0] > 0)
        np.testing.assert_array_equal(got_void, void > 0)
