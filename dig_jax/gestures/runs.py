"""Row runs of binary masks and their connected components (numba), shared by hole filling
(`contours.fill_holes`), disc dilation (`edt.within`) and region labelling
(`dig_jax.data.regions`).

A mask's pixels of one value are cut into maximal runs per row, in raster order; two runs of
consecutive rows belong to one 4-connected component when they share a column, to one
8-connected component when their columns are at most one apart. Working per run instead of
per pixel is what makes these passes several times faster than OpenCV's labelling here.
"""

from __future__ import annotations

import sys

import numpy as np

from dig_jax import _numba

_word_at = _numba.intrinsic("word_at")
_trailing_zeros = _numba.intrinsic("trailing_zeros")
_LITTLE_ENDIAN = sys.byteorder == "little"
_ONES = np.uint64(0x0101010101010101)  # the low bit of every byte
_ZERO = np.uint64(0)
_SHIFTS = (np.uint64(1), np.uint64(2), np.uint64(3), np.uint64(4), np.uint64(8), np.uint64(56))


@_numba.njit(cache=True, nogil=True)
def row_runs(marked):
    """Runs of nonzero pixels of uint8 [H, W] `marked`, in raster order: (starts, stops
    int64[R] (columns, stop exclusive), row_first int64[H + 1]: the runs of row r are
    row_first[r]:row_first[r + 1]). Room for 4 (H + W) runs first, the pass rerun with 4x the
    room when a mask has more (at most ceil(W / 2) per row). `checked_row_runs` below."""
    starts, stops, row_first, _ = checked_row_runs(marked)
    return starts, stops, row_first


@_numba.njit(cache=True, nogil=True)
def checked_row_runs(marked):
    """(`row_runs(marked)`, whether every byte is 0 or 1), in one pass.

    Rows of contiguous bytes (any crop of a C-contiguous mask) are read eight pixels per
    (unaligned) word: a word's nonzero bytes, XORed with the same shifted by one pixel, mark
    where a run starts or stops, found by counting trailing zeros; words of eight unmarked
    pixels after an unmarked one, or of eight 1 bytes after a marked one, are skipped at once.
    Other layouts and big-endian machines go byte by byte."""
    h, w = marked.shape
    by_words = _LITTLE_ENDIAN and w > 0 and marked.strides[1] == 1
    one, two, three, four, eight, last = _SHIFTS
    binary = True
    most = h * ((w + 1) // 2)
    capacity = min(4 * (h + w) + 64, most)
    while True:
        starts, stops = np.empty(capacity, np.int64), np.empty(capacity, np.int64)
        row_first = np.empty(h + 1, np.int64)
        n = 0
        full = False
        for r in range(h):
            row_first[r] = n
            if not by_words:
                n, row_binary = _byte_runs(marked[r], starts, stops, n)
                binary = binary and row_binary
                full = n < 0
                if full:
                    break
                continue
            address = marked.ctypes.data + r * marked.strides[0]
            carry = _ZERO  # 1 when the pixel before the word is marked
            inside = False  # the flips alternate: a run's start, then its stop
            n_words, j = w // 8, 0
            while j <= n_words:  # word j; j == n_words: the row's last w % 8 pixels
                if j < n_words:
                    same = _ONES if carry else _ZERO  # a word with no flip
                    # four words (32 pixels) as the pixel before: skipped in one test
                    while j + 4 <= n_words:
                        at = address + 8 * j
                        if (
                            (_word_at(at) ^ same)
                            | (_word_at(at + 8) ^ same)
                            | (_word_at(at + 16) ^ same)
                            | (_word_at(at + 24) ^ same)
                        ):
                            break
                        j += 4
                    if j == n_words:
                        continue
                    word = _word_at(address + 8 * j)
                    if word == same:
                        j += 1
                        continue
                else:  # the last w % 8 pixels, then an unmarked one after the row
                    word = _ZERO
                    for b in range(w % 8):
                        word |= np.uint64(marked[r, 8 * j + b]) << np.uint64(8 * b)
                binary = binary and (word & ~_ONES) == 0  # skipped words are 0s or 1s
                spread = word | (word >> four)
                spread |= spread >> two
                spread |= spread >> one
                marks = spread & _ONES  # 1 in each nonzero byte
                flips = marks ^ ((marks << eight) | carry)
                carry = marks >> last
                while flips:
                    c = 8 * j + int(_trailing_zeros(flips) >> three)
                    if c > w:
                        break
                    if inside:
                        stops[n] = c
                        n += 1
                    elif n == capacity:
                        full = True
                        break
                    else:
                        starts[n] = c
                    inside = not inside
                    flips &= flips - one
                if full:
                    break
                j += 1
            if full:
                break
        if not full:
            row_first[h] = n
            return starts[:n], stops[:n], row_first, binary
        capacity = min(4 * capacity, most)


@_numba.njit(cache=True, nogil=True)
def _byte_runs(row, starts, stops, n):
    """Append the runs of `row` (any layout) from index n, pixel by pixel: (the new count, or
    -1 without room; whether its bytes are all 0 or 1)."""
    capacity = starts.shape[0]
    inside, binary = False, True
    for c in range(row.shape[0]):
        binary = binary and row[c] <= 1
        if (row[c] != 0) != inside:
            if inside:
                stops[n] = c
                n += 1
            elif n == capacity:
                return -1, binary
            else:
                starts[n] = c
            inside = not inside
    if inside:
        stops[n] = row.shape[0]
        n += 1
    return n, binary


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


@_numba.njit(cache=True, nogil=True)
def grown(a: np.ndarray, n: int) -> np.ndarray:
    """A copy of a[:n] (int64) with room for 4x as many (at least 64): for output run lists
    whose length is not known in advance."""
    bigger = np.empty(max(4 * a.shape[0], 64), np.int64)
    bigger[:n] = a[:n]
    return bigger


@_numba.njit(cache=True, nogil=True)
def filled_runs(starts, stops, row_first, width):
    """The runs of `fill_holes` of a mask `width` wide, from the mask's `row_runs`: each row
    minus its gaps that a 4-connected path of gaps joins to the mask's edge (union-find over
    the gaps' runs), in the same layout."""
    h = row_first.shape[0] - 1
    gap_starts, gap_stops, gap_first = gap_runs(starts, stops, row_first, width)
    parent = join_runs(gap_starts, gap_stops, gap_first, 0)
    outside = np.zeros(gap_starts.shape[0], np.bool_)
    for r in range(h):
        for k in range(gap_first[r], gap_first[r + 1]):
            if r == 0 or r == h - 1 or gap_starts[k] == 0 or gap_stops[k] == width:
                outside[union_root(parent, k)] = True
    # the filled runs are the gaps between the outside's runs
    kept_starts = np.empty(gap_starts.shape[0], np.int64)
    kept_stops = np.empty(gap_starts.shape[0], np.int64)
    kept_first = np.empty(h + 1, np.int64)
    n = 0
    for r in range(h):
        kept_first[r] = n
        for k in range(gap_first[r], gap_first[r + 1]):
            if outside[union_root(parent, k)]:
                kept_starts[n], kept_stops[n] = gap_starts[k], gap_stops[k]
                n += 1
    kept_first[h] = n
    return gap_runs(kept_starts[:n], kept_stops[:n], kept_first, width)


@_numba.njit(cache=True, nogil=True)
def paint_runs(starts, stops, row_first, out, row_offset, col_offset) -> None:
    """Set the runs' pixels of `out` to 1, row r's at out[r + row_offset] and column c at
    c + col_offset (the caller makes room)."""
    for r in range(row_first.shape[0] - 1):
        row = out[r + row_offset]
        for k in range(row_first[r], row_first[r + 1]):
            row[starts[k] + col_offset : stops[k] + col_offset] = 1
