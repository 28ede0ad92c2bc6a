"""`longest_contour` against scikit-image's `find_contours` (the lasso outline's source)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from skimage import measure

from dig_jax.gestures.contours import longest_contour


def _skimage_longest(image: np.ndarray) -> np.ndarray:
    contours = measure.find_contours(image.astype(np.uint8), 0.5, fully_connected="high")
    lengths = [np.linalg.norm(np.diff(c, axis=0), axis=1).sum() for c in contours]
    return contours[int(np.argmax(lengths))]


@given(
    st.integers(0, 2**31 - 1), st.integers(3, 48), st.integers(3, 48), st.floats(0.02, 0.95)
)  # fmt: skip
def test_equals_find_contours_longest(seed, h, w, density):
    # Noise masks have many contours, holes, diagonal touches and equal-length ties.
    image = np.zeros((h, w), np.uint8)
    image[1:-1, 1:-1] = np.random.default_rng(seed).random((h - 2, w - 2)) < density
    image[h // 2, w // 2] = 1
    got = longest_contour(image)
    want = _skimage_longest(image)
    assert got.dtype == np.float64 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_known_answers():
    one = np.zeros((3, 3), bool)
    one[1, 1] = True  # a diamond through the four edge midpoints, closed
    got = longest_contour(one)
    np.testing.assert_array_equal(got, _skimage_longest(one))
    assert got.shape == (5, 2) and np.array_equal(got[0], got[-1])
    assert {tuple(p) for p in got} == {(0.5, 1.0), (1.0, 0.5), (1.5, 1.0), (1.0, 1.5)}
    # Three equal squares: the first listed (top-left) one wins, as with find_contours.
    three = np.zeros((20, 40), np.uint8)
    three[3:8, 20:25] = three[3:8, 3:8] = three[12:17, 10:15] = 1
    got = longest_contour(three)
    np.testing.assert_array_equal(got, _skimage_longest(three))
    assert got[:, 1].max() < 10


@pytest.mark.parametrize(
    ("image", "message"),
    [
        (np.ones((4, 4), np.uint8), "border"),
        (np.zeros((4, 4), np.uint8), "no marked pixel"),
        (np.full((4, 4), 2, np.uint8), r"\{0, 1\}"),
        (np.zeros((1, 4), np.uint8), "2x2"),
        (np.zeros((2, 2, 2), np.uint8), "2-D"),
    ],
)
def test_bad_input_is_named(image, message):
    with pytest.raises(ValueError, match=message):
        longest_contour(image)


def _reference_box_outline(region: np.ndarray, radius: int) -> tuple[np.ndarray, np.ndarray]:
    """`box_outline` from scipy and scikit-image: fill the holes, dilate by the disc (exact
    EDT), trace the longest contour in the zero-padded crop around the region, as (x, y)."""
    from scipy import ndimage

    from dig_jax.gestures.simulate import loose_dilation_radius

    rows, cols = np.nonzero(region)
    y1, y2, x1, x2 = rows.min(), rows.max() + 1, cols.min(), cols.max() + 1
    if radius < 0:
        radius = loose_dilation_radius(int(region.sum()))
    margin = radius + 1
    r0, r1 = max(y1 - margin, 0), min(y2 + margin, region.shape[0])
    c0, c1 = max(x1 - margin, 0), min(x2 + margin, region.shape[1])
    crop = np.zeros((r1 - r0, c1 - c0), bool)
    crop[y1 - r0 : y2 - r0, x1 - c0 : x2 - c0] = ndimage.binary_fill_holes(region[y1:y2, x1:x2])
    if radius > 0:
        crop = ndimage.distance_transform_edt(~crop) <= radius
    contour = _skimage_longest(np.pad(crop, 1))
    outline = np.stack([contour[:, 1] - 1 + c0, contour[:, 0] - 1 + r0], axis=1)
    arc = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(outline, axis=0), axis=1))])
    return outline, arc


@given(
    st.integers(0, 2**31 - 1), st.integers(2, 50), st.integers(2, 50),
    st.sampled_from([0.05, 0.3, 0.7]), st.sampled_from([-1, 0, 1, 2, 5, 9]),
)  # fmt: skip
def test_box_outline_equals_scipy_and_skimage(seed, h, w, density, radius):
    """The run-based outline (fill, dilate and trace on runs) against the pixel pipeline it
    replaces, on regions with holes and several pieces that often touch the image's edges
    (where the crop's margin is cut), for every dilation a lasso uses (-1: the loose rule)."""
    from dig_jax.gestures.contours import box_outline
    from dig_jax.gestures.scan import tight_box

    rng = np.random.default_rng(seed)
    region = rng.random((h, w)) < density
    region[rng.integers(h), rng.integers(w)] = True
    outline, arc = box_outline(region.view(np.uint8), tight_box(region), radius)
    want_outline, want_arc = _reference_box_outline(region, radius)
    np.testing.assert_array_equal(outline, want_outline)
    np.testing.assert_array_equal(arc, want_arc)


def test_loose_radius_rounds_as_python():
    """The compiled loose rule equals `loose_dilation_radius`, also where 0.1 sqrt(area) is
    a half (round half to even: 6.5 -> 6, 7.5 -> 8) and around the clip at 6 and 30."""
    from dig_jax.gestures.contours import loose_radius
    from dig_jax.gestures.simulate import loose_dilation_radius

    halves = [(10 * k + 5) ** 2 + d for k in range(40) for d in (-1, 0, 1)]
    areas = halves + list(range(0, 5000, 7)) + [10**6, 10**7, 2**40]
    for area in areas:
        assert loose_radius(area) == loose_dilation_radius(area), area
    assert loose_radius(65**2) == 6 and loose_radius(75**2) == 8


def test_mask_outline_checks_the_mask_and_equals_box_outline():
    from dig_jax.gestures import contours
    from dig_jax.gestures.contours import box_outline, mask_outline
    from dig_jax.gestures.scan import tight_box

    rng = np.random.default_rng(5)
    for h, w in [(1, 1), (1, 9), (7, 1), (33, 45), (64, 64)]:
        for radius in (-1, 0, 3):
            region = (rng.random((h, w)) < 0.3).astype(np.uint8)
            region[rng.integers(h), rng.integers(w)] = 1
            status, outline, arc = mask_outline(region, radius)
            want_outline, want_arc = box_outline(region, tight_box(region), radius)
            assert status == contours.MASK_OK
            np.testing.assert_array_equal(outline, want_outline)
            np.testing.assert_array_equal(arc, want_arc)
    assert mask_outline(np.zeros((5, 9), np.uint8), 0)[0] == contours.MASK_EMPTY
    bad = np.zeros((5, 9), np.uint8)
    bad[2, 7] = 2  # in the last, partial word of its row
    assert mask_outline(bad, -1)[0] == contours.MASK_NOT_BINARY
    bad = np.zeros((5, 16), np.uint8)
    bad[1, 3] = 255  # in a whole word
    assert mask_outline(bad, 0)[0] == contours.MASK_NOT_BINARY
