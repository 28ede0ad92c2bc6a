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
