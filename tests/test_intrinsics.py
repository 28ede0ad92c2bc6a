"""The LLVM-level building blocks of `dig_jax._intrinsics`: array views of raw addresses,
unaligned word loads and trailing-zero counts."""

from __future__ import annotations

import numpy as np

from dig_jax import _numba

bytes_at = _numba.intrinsic("bytes_at")
words_at = _numba.intrinsic("words_at")


def test_views_at_an_address_read_the_array_there():
    mask = np.arange(35, dtype=np.uint8).reshape(5, 7)
    np.testing.assert_array_equal(bytes_at(mask.ctypes.data, 5, 7), mask)
    words = np.array([3, 2**63 + 1, 7], np.uint64)
    np.testing.assert_array_equal(words_at(words.ctypes.data, 3), words)


def test_word_at_any_offset_and_trailing_zeros():
    import numba

    word_at = _numba.intrinsic("word_at").value
    trailing_zeros = _numba.intrinsic("trailing_zeros").value

    @numba.njit
    def read(raw, offset):
        word = word_at(raw.ctypes.data + offset)
        return word, trailing_zeros(word)

    raw = np.random.default_rng(0).integers(0, 256, 40).astype(np.uint8)
    raw[16:24] = 0
    for offset in range(32):
        word, zeros = read(raw, offset)
        want = int(np.frombuffer(raw[offset : offset + 8].tobytes(), np.uint64)[0])
        assert word == want
        assert zeros == (64 if want == 0 else (want & -want).bit_length() - 1)
