"""Row runs of binary masks and their connected components (numba), shared by hole filling
(`contours.fill_holes`), disc dilation (`edt.within`) and region labelling
(`dig_jax.data.regions`).

A mask's pixels of one value are cut into maximal runs per row, in raster order; two runs of
consecutive rows belong to one 4-connected component when they share a column, to one
8-connected component when their columns are at most one apart. Working per run instead of
per pixel is what makes these passes several times faster than OpenCV's labelling here.
"""

from __future__ import annotations

import numpy as np

from dig_jax import _numba


@_numba.njit(cache=True, nogil=True)
def row_runs(mask, value):
    """Runs of pixels equal to `value` in uint8 [H, W] `mask`, in raster order:
    (starts, stops int64[R] (columns, stop exclusive), row_first int64[H + 1]: the runs of row
    r are row_first[r]:row_first[r + 1])."""
    h, w = mask.shape
    starts = np.empty(h * ((w + 1) // 2) + 1, np.int64)  # at most ceil(w / 2) runs per row
    stops = np.empty_like(starts)
    row_first = np.empty(h + 1, np.int64)
    n = 0
    for r in range(h):
        row_first[r] = n
        row = mask[r]
        c = 0
        while c < w:
            if row[c] != value:
                c += 1
                continue
            starts[n] = c
            while c < w and row[c] == value:
                c += 1
            stops[n] = c
            n += 1
    row_first[h] = n
    return starts[:n], stops[:n], row_first


@_numba.njit(cache=True, nogil=True)
def union_root(parent: np.ndarray, k: int) -> int:
    """Root of k's tree in the union-find forest `parent` (int64[N]), halving the path."""
    while parent[k] != k:
        parent[k] = parent[parent[k]]
        k = parent[k]
    return k


@_numba.njit(cache=True, nogil=True)
def join_runs(starts, stops, row_first, reach):
    """Union-find forest int64[R] over the runs: runs of consecutive rows are joined when
    starts[i] < stops[j] + reach and starts[j] < stops[i] + reach (reach 0: 4-connected,
    1: 8-connected); every root is the lowest run of its tree."""
    parent = np.arange(starts.shape[0])
    for r in range(row_first.shape[0] - 2):  # rows r and r + 1, two pointers
        i, j = row_first[r], row_first[r + 1]
        while i < row_first[r + 1] and j < row_first[r + 2]:
            if starts[i] < stops[j] + reach and starts[j] < stops[i] + reach:
                a, b = union_root(parent, i), union_root(parent, j)
                parent[max(a, b)] = min(a, b)
            if stops[i] < stops[j]:
                i += 1
            else:
                j += 1
    return parent
