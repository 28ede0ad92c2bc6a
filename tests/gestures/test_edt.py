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


def _blobs(rng: np.random.Generator, height: int, width: int, count: int) -> np.ndarray:
    """A union of `count` random ellipses and rectangles: rows of one run each, mostly
    overlapping their neighbours (the dilation's fast path), with corners, gaps between
    blobs and rows of two runs where blobs sit side by side (its fallback)."""
    y, x = np.indices((height, width))
    marked = np.zeros((height, width), bool)
    for _ in range(count):
        cy, cx = rng.uniform(0, height), rng.uniform(0, width)
        ry, rx = rng.uniform(0.5, height / 2), rng.uniform(0.5, width / 2)
        if rng.random() < 0.5:
            marked |= ((y - cy) / ry) ** 2 + ((x - cx) / rx) ** 2 <= 1
        else:
            marked |= (np.abs(y - cy) <= ry) & (np.abs(x - cx) <= rx)
    return marked


@given(
    seed=st.integers(0, 2**32 - 1),
    height=st.integers(1, 70),
    width=st.integers(1, 70),
    count=st.integers(0, 4),
    radius=st.integers(0, 30),
)
def test_within_blobs_equals_scipy(seed, height, width, count, radius):
    """Blob-shaped regions (what a loose lasso dilates): scipy's exact decision."""
    marked = _blobs(np.random.default_rng(seed), height, width, count)
    want = ndimage.distance_transform_edt(~marked) <= radius if marked.any() else marked
    np.testing.assert_array_equal(within(marked, radius), want)


def test_within_keeps_the_gap_between_staggered_blocks():
    """Rows of one run each, but a block's runs do not overlap the next block's: rows near
    both blocks get two intervals, not the span between them."""
    marked = np.zeros((20, 60), bool)
    marked[:10, :6] = True
    marked[10:, 50:] = True
    dilated = within(marked, 2)
    np.testing.assert_array_equal(dilated, ndimage.distance_transform_edt(~marked) <= 2)
    assert dilated[9, :8].all() and dilated[9, 49:].all() and not dilated[9, 8:49].any()


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


def test_disc_widths_are_exact_integer_square_roots():
    import math

    from dig_jax.gestures.edt import disc_widths

    for radius in [*range(0, 80), 1000, 46340]:
        widths = disc_widths(radius)
        assert len(widths) == 2 * radius + 1 and not widths.flags.writeable
        dys = np.arange(-radius, radius + 1)
        picks = dys if radius < 80 else dys[:: max(radius // 97, 1)]
        for dy in picks:
            assert widths[dy + radius] == math.isqrt(radius * radius - int(dy) * int(dy))


def test_within_wide_rows_grow_the_room_for_runs():
    """Rows far wider than the frame is tall hold more runs than the first room (2 H + 64)."""
    marked = np.zeros((3, 1200), bool)
    marked[1, ::4] = True  # 300 single pixels, 300 runs in every row at radius 1
    got = within(marked, 1)
    np.testing.assert_array_equal(got, ndimage.distance_transform_edt(~marked) <= 1)
    assert got[0].sum() == 300 and got[1].sum() == 899  # the first pixel has no left side
