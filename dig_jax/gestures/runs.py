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
def row_runs(marked):
    """Runs of nonzero pixels of uint8 [H, W] `marked`, in raster order: (starts, stops
    int64[R] (columns, stop exclusive), row_first int64[H + 1]: the runs of row r are
    row_first[r]:row_first[r + 1]). Room for 4 (H + W) runs first, the pass rerun with 4x the
    room when a mask has more (at most ceil(W / 2) per row).

    Per row, a branch-free (vectorised) pass marks where a pixel differs from the one before
    (column 0 against an unmarked pixel before the row, column W against one after it); those
    flips, read eight at a time through a word view, are the runs' ends (2x faster than
    walking the pixels on a lasso's crop)."""
    h, w = marked.shape
    n_words = (w + 1 + 7) // 8
    flips = np.zeros(n_words * 8, np.uint8)
    flip_words = flips.view(np.uint64)
    most = h * ((w + 1) // 2)
    capacity = min(4 * (h + w) + 64, most)
    while True:
        starts, stops = np.empty(capacity, np.int64), np.empty(capacity, np.int64)
        row_first = np.empty(h + 1, np.int64)
        n = 0
        full = False
        for r in range(h):
            row_first[r] = n
            row = marked[r]
            if w == 0:
                continue
            flips[0] = row[0] != 0
            for c in range(1, w):
                flips[c] = (row[c] != 0) ^ (row[c - 1] != 0)
            flips[w] = row[w - 1] != 0
            inside = False  # flips alternate: a run's start, then its stop
            for j in range(n_words):
                if flip_words[j] == 0:
                    continue
                for c in range(8 * j, min(8 * j + 8, w + 1)):
                    if not flips[c]:
                        continue
                    if inside:
                        stops[n] = c
                        n += 1
                    elif n == capacity:
                        full = True
                        break
                    else:
                        starts[n] = c
                    inside = not inside
                if full:
                    break
            if full:
                break
        if not full:
            row_first[h] = n
            return starts[:n], stops[:n], row_first
        capacity = min(4 * capacity, most)


@_numba.njit(cache=True, nogil=True)
def gap_runs(starts, stops, row_first, width):
    """The runs of the zero pixels, from the nonzero ones' `row_runs` of a mask `width` wide:
    the gaps before, between and after each row's runs (same layout)."""
    h = row_first.shape[0] - 1
    gap_starts = np.empty(starts.shape[0] + h, np.int64)  # a row has one gap more than runs
    gap_stops = np.empty_like(gap_starts)
    gap_first = np.empty(h + 1, np.int64)
    n = 0
    for r in range(h):
        gap_first[r] = n
        c = 0
        for k in range(row_first[r], row_first[r + 1]):
            if starts[k] > c:
                gap_starts[n], gap_stops[n] = c, starts[k]
                n += 1
            c = stops[k]
        if c < width:
            gap_starts[n], gap_stops[n] = c, width
            n += 1
    gap_first[h] = n
    return gap_starts[:n], gap_stops[:n], gap_first


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
