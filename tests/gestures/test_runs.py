"""`dig_jax.gestures.runs`: row runs (and their gaps) as numpy finds them, room grown on demand."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from dig_jax.gestures.runs import checked_row_runs, gap_runs, row_runs


def _numpy_runs(mask: np.ndarray) -> list[tuple[int, int, int]]:
    """(row, start, stop) of every run of nonzero pixels, in raster order."""
    out = []
    for r, row in enumerate(mask):
        edges = np.flatnonzero(np.diff(np.concatenate([[0], row > 0, [0]]).astype(np.int8)))
        out += [(r, int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True)]
    return out


def _as_list(starts, stops, row_first) -> list[tuple[int, int, int]]:
    rows = np.repeat(np.arange(len(row_first) - 1), np.diff(row_first))
    return [(int(r), int(a), int(b)) for r, a, b in zip(rows, starts, stops, strict=True)]


@given(st.integers(0, 2**31 - 1), st.integers(1, 50), st.integers(1, 50), st.floats(0.0, 1.0))
def test_runs_and_gaps_equal_numpy(seed, h, w, density):
    mask = (np.random.default_rng(seed).random((h, w)) < density).astype(np.uint8)
    runs = row_runs(mask)
    assert _as_list(*runs) == _numpy_runs(mask)
    assert _as_list(*gap_runs(*runs, w)) == _numpy_runs(1 - mask)


def test_a_checkerboard_outgrows_the_first_room():
    """ceil(W / 2) runs in every row: four times the first room's 4 (H + W) + 64."""
    mask = (np.indices((300, 301)).sum(axis=0) % 2).astype(np.uint8)
    starts, stops, row_first = row_runs(mask)
    assert len(starts) == 300 * 150 + 150 > 4 * (300 + 301) + 64
    assert _as_list(starts, stops, row_first) == _numpy_runs(mask)


@given(st.integers(0, 2**31 - 1), st.integers(1, 30), st.integers(1, 90), st.integers(1, 255))
def test_runs_of_any_nonzero_value_and_long_runs(seed, h, w, value):
    """Long runs crossing the 8-column words the flips are read in, any nonzero value."""
    rng = np.random.default_rng(seed)
    mask = np.zeros((h, w), np.uint8)
    for r in range(h):
        for _ in range(int(rng.integers(0, 4))):
            a, b = np.sort(rng.integers(0, w + 1, 2))
            mask[r, a:b] = value
    assert _as_list(*row_runs(mask)) == _numpy_runs(mask)


@given(
    st.integers(0, 2**31 - 1), st.integers(1, 20), st.integers(1, 40), st.integers(0, 9),
    st.sampled_from([1, 2, 3]), st.floats(0.0, 1.0),
)  # fmt: skip
def test_runs_of_crops_at_any_column_and_strided_views(seed, h, w, offset, step, density):
    """Crops of a larger mask start at any byte (the rows are read in unaligned words);
    column steps other than 1 take the byte-by-byte path; any nonzero byte is marked."""
    rng = np.random.default_rng(seed)
    big = rng.integers(1, 256, (h + 2, offset + w * step + 9)).astype(np.uint8)
    big[rng.random(big.shape) >= density] = 0
    view = big[1 : 1 + h, offset : offset + w * step : step]
    assert _as_list(*row_runs(view)) == _numpy_runs(view)
    if rng.random() < 0.5:
        view = np.minimum(view, 1)  # {0, 1} bytes: reported binary
    *runs, binary = checked_row_runs(view)
    assert _as_list(*runs) == _numpy_runs(view)
    assert binary == bool((view <= 1).all())
