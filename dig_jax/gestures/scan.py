"""Scans of bool masks that gesture simulation needs: the k-th marked pixel, the tight box.

Both read the mask as 64-bit words (eight pixels at a time; a bool byte is 0 or 1, so a word's
marked pixels are the sum of its bytes, `(word * 0x0101...01) >> 56`) in numba kernels, and
return what numpy would (`np.flatnonzero(mask)[k]`, `metrics.tight_box`) in one pass or less
over the mask instead of numpy's several: the bulk of a click's or a rectangle's simulation
time at 512² (`benchmarks/gestures.py`). Words are read little-endian (x86, ARM).
"""

from __future__ import annotations

import sys

import numpy as np

from dig_jax import _numba

_ONES = np.uint64(0x0101010101010101)
_BIG_ENDIAN = sys.byteorder != "little"  # byte order inside words: such machines skip them


def _words(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(uint64 words of the bytes of a bool mask in raster order, uint8 tail of under 8 bytes)."""
    flat = np.ascontiguousarray(mask).reshape(-1).view(np.uint8)
    full = len(flat) // 8 * 8
    return flat[:full].view(np.uint64), flat[full:]


_LOW_BYTES = np.uint64(0x00FF00FF00FF00FF)
_CHUNK = 255  # words summed lane-wise before a byte lane (at most 1 per word) could overflow


_HIGH_BITS = np.uint64(0xFEFEFEFEFEFEFEFE)  # set in a word iff one of its bytes is not 0 or 1


@_numba.njit(cache=True, nogil=True)
def _chunk_counts(words) -> tuple[np.ndarray, int, bool]:
    """(marked pixels per chunk of `_CHUNK` words, int64[ceil(len(words) / _CHUNK)], their
    total, whether every byte is 0 or 1): each chunk's words are added as eight byte lanes (a
    lane gains at most 1 per word, for bytes that are 0 or 1), then the lanes summed; the
    words are ORed on the way, which says whether a byte was neither."""
    n = words.shape[0]
    out = np.empty((n + _CHUNK - 1) // _CHUNK, np.int64)
    ors = np.uint64(0)
    total = 0
    for k in range(out.shape[0]):
        acc, chunk_or = np.uint64(0), np.uint64(0)
        start = k * _CHUNK
        # A trip count set before the loop (not a min() in its bound) lets LLVM vectorise it:
        # 10.6 against 19.5 µs for a 512² mask.
        size = _CHUNK if start + _CHUNK <= n else n - start
        for i in range(size):
            word = words[start + i]
            acc += word
            chunk_or |= word
        ors |= chunk_or
        pairs = (acc & _LOW_BYTES) + ((acc >> np.uint64(8)) & _LOW_BYTES)
        out[k] = int((pairs * np.uint64(0x0001000100010001)) >> np.uint64(48))
        total += out[k]
    return out, total, (ors & _HIGH_BITS) == 0


@_numba.njit(cache=True, nogil=True)
def _nth(words, tail, chunks, queries) -> np.ndarray:
    """Flat indices int64[Q] of the marked pixels number `queries` (int64[Q], each < count):
    chunks are skipped on their counts, the chunk holding a query is walked word by word."""
    order = np.argsort(queries, kind="mergesort")
    nq = order.shape[0]
    out = np.empty(nq, np.int64)
    q, seen = 0, 0
    n_words = words.shape[0]
    for k in range(chunks.shape[0]):
        if q == nq:
            return out
        if queries[order[q]] >= seen + chunks[k]:
            seen += chunks[k]
            continue
        for i in range(k * _CHUNK, min((k + 1) * _CHUNK, n_words)):
            word = words[i]
            in_word = int((word * _ONES) >> np.uint64(56))
            while q < nq and queries[order[q]] < seen + in_word:
                rank = queries[order[q]] - seen  # the rank-th marked byte of this word
                for b in range(8):
                    if (word >> np.uint64(8 * b)) & np.uint64(1):
                        if rank == 0:
                            out[order[q]] = 8 * i + b
                            break
                        rank -= 1
                q += 1
            seen += in_word
    for t in range(tail.shape[0]):
        if tail[t]:
            while q < nq and queries[order[q]] == seen:
                out[order[q]] = 8 * n_words + t
                q += 1
            seen += 1
    return out


class MarkedPixels:
    """The marked pixels of a bool mask [H, W] in raster order, counted per chunk of 2040
    pixels in one pass, without listing them: `count`, and `at(k)` = `np.nonzero(mask)`
    indexed at k. `binary`: whether every byte of the mask is 0 or 1 (the same pass), so a
    uint8 or int8 mask can be read as its bool view and checked at once."""

    def __init__(self, mask: np.ndarray):
        self.words, self.tail = _words(mask)
        self.chunks, count, binary = _chunk_counts(self.words)
        self.binary, self.count = bool(binary), int(count)
        if len(self.tail):  # W * H not a multiple of 8
            self.binary = self.binary and bool(np.all(self.tail <= 1))
            self.count += int(np.count_nonzero(self.tail))
        self.width = mask.shape[1]

    def at(self, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rows, cols) int64[Q] of the marked pixels number `queries` (ints in [0, count))."""
        queries = np.asarray(queries, np.int64).reshape(-1)
        if _BIG_ENDIAN:  # the word scan reads bytes in little-endian order
            flat = np.flatnonzero(np.concatenate([self.words.view(np.uint8), self.tail]))[queries]
        else:
            flat = _nth(self.words, self.tail, self.chunks, queries)
        return flat // self.width, flat % self.width


def count_marked(mask: np.ndarray) -> int:
    """Number of marked pixels of a bool mask [H, W]."""
    return int(np.count_nonzero(mask))


def nth_marked(mask: np.ndarray, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols) int64[Q] of the marked pixels number `queries` in raster order:
    `np.nonzero(mask)` indexed at `queries` (int array, each in [0, count))."""
    return MarkedPixels(mask).at(queries)


@_numba.njit(cache=True, nogil=True)
def _box_of_words(words) -> tuple[int, int, int, int]:
    """(first row, last row, first column, last column, binary) of the marks in a uint8 mask
    read as words uint64[H, W / 8] (little-endian: column 8j + b is byte b of word j); all
    -1 when nothing is marked. Rows are ORed word by word, and all rows' words into one,
    whose bytes also say whether every byte was 0 or 1 (`binary`)."""
    h, n = words.shape
    top, bottom = -1, -1
    acc = np.zeros(n, np.uint64)
    for r in range(h):
        any_word = np.uint64(0)
        for j in range(n):  # one vectorised pass: the row's OR and the columns' ORs
            word = words[r, j]
            any_word |= word
            acc[j] |= word
        if any_word:
            if top < 0:
                top = r
            bottom = r
    first, last = -1, -1
    binary = True
    for j in range(n * 8):
        byte = (acc[j // 8] >> np.uint64(8 * (j % 8))) & np.uint64(0xFF)
        if byte:
            if first < 0:
                first = j
            last = j
            binary = binary and byte == 1
    return top, bottom, first, last, binary


@_numba.njit(cache=True, nogil=True)
def _box_of_bytes(marked) -> tuple[int, int, int, int]:
    """`_box_of_words` for a uint8 [H, W] of any width: byte ORs (vectorised)."""
    h, w = marked.shape
    top, bottom = -1, -1
    acc = np.zeros(w, np.uint8)
    for r in range(h):
        row = marked[r]
        any_byte = np.uint8(0)
        for c in range(w):
            any_byte |= row[c]
        if any_byte:
            if top < 0:
                top = r
            bottom = r
            for c in range(w):
                acc[c] |= row[c]
    first, last = -1, -1
    binary = True
    for c in range(w):
        if acc[c]:
            if first < 0:
                first = c
            last = c
            binary = binary and acc[c] == 1
    return top, bottom, first, last, binary


def tight_box(mask: np.ndarray) -> np.ndarray:
    """f64[4] (x1, y1, x2, y2) = (cmin, rmin, cmax + 1, rmax + 1) of the nonzero pixels of a
    bool or uint8 mask [H, W] ((-1, -1, 0, 0) when it has none); eight pixels at a time when
    rows fall on word boundaries (W % 8 == 0)."""
    return checked_box(mask)[0]


def checked_box(mask: np.ndarray) -> tuple[np.ndarray, bool]:
    """(`tight_box(mask)`, whether every byte of the mask is 0 or 1), in the same pass."""
    h, w = mask.shape
    marked = np.ascontiguousarray(mask).view(np.uint8)
    if w % 8 or _BIG_ENDIAN:
        top, bottom, first, last, binary = _box_of_bytes(marked)
    else:
        words = marked.view(np.uint64).reshape(h, w // 8)
        top, bottom, first, last, binary = _box_of_words(words)
    return np.array([first, top, last + 1, bottom + 1], np.float64), bool(binary)


# Many masks in one compiled call: masks given by the addresses of their bytes (uint8[h, w],
# C-contiguous, all one shape; the caller keeps them alive), for `simulate_many`.
_bytes_at = _numba.intrinsic("bytes_at")
_words_at = _numba.intrinsic("words_at")


@_numba.njit(cache=True, nogil=True)
def counts_at(addresses, h, w, chunks, counts, binary):
    """For mask i at addresses[i]: its `_chunk_counts` into chunks[i] (int64[B, C]), its
    marked pixels into counts[i] and whether every byte is 0 or 1 into binary[i]."""
    n_words = h * w // 8
    for i in range(addresses.shape[0]):
        per_chunk, total, ok = _chunk_counts(_words_at(addresses[i], n_words))
        chunks[i, :] = per_chunk
        tail = _bytes_at(addresses[i] + 8 * n_words, 1, h * w - 8 * n_words)[0]
        for t in range(tail.shape[0]):
            total += tail[t]
            ok = ok and tail[t] <= 1
        counts[i], binary[i] = total, ok


@_numba.njit(cache=True, nogil=True)
def nth_at(addresses, h, w, chunks, queries, n_queries):
    """Flat indices int64[B, Q] of mask i's marked pixels number queries[i, :n_queries[i]]
    (each < its count; the rest of the row is left 0)."""
    n_words = h * w // 8
    out = np.zeros(queries.shape, np.int64)
    for i in range(addresses.shape[0]):
        tail = _bytes_at(addresses[i] + 8 * n_words, 1, h * w - 8 * n_words)[0]
        found = _nth(_words_at(addresses[i], n_words), tail, chunks[i], queries[i, : n_queries[i]])
        out[i, : n_queries[i]] = found
    return out


@_numba.njit(cache=True, nogil=True)
def boxes_at(addresses, h, w, boxes, binary):
    """For mask i at addresses[i]: (first row, last row, first column, last column) of its
    marks into boxes[i] (int64[B, 4], all -1 when none) and whether every byte is 0 or 1
    into binary[i] (`checked_box`'s scans; eight pixels at a time when W % 8 == 0)."""
    for i in range(addresses.shape[0]):
        if w % 8 == 0 and not _BIG_ENDIAN:
            words = _words_at(addresses[i], h * w // 8).reshape((h, w // 8))
            top, bottom, first, last, ok = _box_of_words(words)
        else:
            top, bottom, first, last, ok = _box_of_bytes(_bytes_at(addresses[i], h, w))
        boxes[i, 0], boxes[i, 1], boxes[i, 2], boxes[i, 3] = top, bottom, first, last
        binary[i] = ok
