"""`dig_jax.gestures.edt`: scipy's exact EDT, squared and capped, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import ndimage

from dig_jax.gestures.edt import edt_lookup, squared_edt, within


def expected(marked: np.ndarray, cap: int) -> np.ndarray:
    if not marked.any():
        return np.full(marked.shape, cap * cap, np.int64)
    _, (rows, cols) = ndimage.distance_transform_edt(~marked, return_indices=True)
    y, x = np.indices(marked.shape)
    return np.minimum((y - rows) ** 2 + (x - cols) ** 2, cap * cap)  # exact integers


@given(
    seed=st.integers(0, 2**32 - 1),
    height=st.integers(1, 70),
    width=st.integers(1, 70),
    density=st.sampled_from([0.0, 0.002, 0.02, 0.3, 0.95]),
    cap=st.integers(1, 80),
)
def test_equals_scipy_squared_and_capped(seed, height, width, density, cap):
    marked = np.random.default_rng(seed).random((height, width)) < density
    got = squared_edt(marked, cap)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, expected(marked, cap))
    # the run-based disc dilation marks exactly the pixels the transform puts within cap - 1
    dilated = within(marked, cap - 1)
    assert dilated.dtype == bool and dilated.shape == marked.shape
    np.testing.assert_array_equal(dilated, got <= (cap - 1) ** 2)


def test_within_hand_made_case_and_bad_radius():
    marked = np.zeros((7, 7), bool)
    marked[3, 3] = True
    disc = within(marked, 2)  # the 13 pixel centres within 2 px of (3, 3)
    assert disc.sum() == 13 and disc[1, 3] and disc[3, 5] and not disc[1, 2]
    np.testing.assert_array_equal(within(marked, 0), marked)
    with pytest.raises(ValueError, match="radius"):
        within(marked, -1)


def test_hand_made_case():
    marked = np.zeros((3, 5), bool)
    marked[0, 0] = True
    np.testing.assert_array_equal(
        squared_edt(marked, 10),
        [[0, 1, 4, 9, 16], [1, 2, 5, 10, 17], [4, 5, 8, 13, 20]],
    )
    np.testing.assert_array_equal(squared_edt(marked, 3)[2], [4, 5, 8, 9, 9])  # capped at 3²
    assert (squared_edt(np.zeros((2, 2)), 7) == 49).all()  # nothing marked: the cap everywhere


def test_long_distances_on_a_large_map():
    marked = np.zeros((600, 733), bool)
    marked[[5, 590], [700, 3]] = True
    np.testing.assert_array_equal(squared_edt(marked, 1000), expected(marked, 1000))


def test_lookup_equals_indexing_the_squared_map():
    marked = np.random.default_rng(0).random((40, 50)) < 0.01
    table = np.arange(26, dtype=np.float32)[::-1] * 2
    np.testing.assert_array_equal(edt_lookup(marked, 5, table), table[squared_edt(marked, 5)])


@pytest.mark.parametrize(
    ("marked", "cap", "message"),
    [
        (np.zeros(4, bool), 3, r"expected a 2-D map"),
        (np.zeros((4, 4), bool), 0, r"cap: expected 1\.\.46340"),
        (np.zeros((4, 4), bool), 50000, r"cap: expected 1\.\.46340"),
    ],
)
def test_bad_input_is_named(marked, cap, message):
    with pytest.raises(ValueError, match=message):
        squared_edt(marked, cap)
    with pytest.raises(ValueError, match="table: expected shape"):
        edt_lookup(np.zeros((4, 4), bool), 3, np.zeros(3))
