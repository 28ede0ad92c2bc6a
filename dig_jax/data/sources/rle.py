"""COCO RLE masks checked before pycocotools decodes them.

pycocotools trusts its input: counts that sum past the mask, negative counts, characters outside
its string alphabet or an absurd size give "Invalid RLE mask representation", a bare
OverflowError, or a huge allocation. `rle_counts` reads both count forms (a list of ints, or
COCO's compressed string) into a checked integer array first: every count >= 0, summing to
exactly H*W, with H*W at most `MAX_PIXELS`. Errors are one-line ValueErrors naming `field`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pycocotools import mask as mask_utils

MAX_PIXELS = 1 << 28  # 16384 x 16384: far above any photo here, far below a memory bomb
_MAX_CHARS_PER_COUNT = 11  # 55 bits: COCO's encoder never needs more than 7


def check_size(size: Any, field: str = "size") -> tuple[int, int]:
    """(H, W) from an RLE `size`: two integers >= 1 whose product is at most `MAX_PIXELS`."""
    ok = isinstance(size, (list, tuple)) and len(size) == 2
    ok = ok and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in size)
    if not ok or min(size) < 1 or int(size[0]) * int(size[1]) > MAX_PIXELS:
        raise ValueError(
            f"{field} must be [H, W], integers >= 1 with H*W <= {MAX_PIXELS}, got {size!r:.60}"
        )
    return int(size[0]), int(size[1])


def string_counts(text: str | bytes, field: str = "counts") -> np.ndarray:
    """The run lengths of COCO's compressed RLE string (pycocotools' `rleFrString`), int64."""
    raw = text.encode("ascii", "replace") if isinstance(text, str) else bytes(text)
    chars = np.frombuffer(raw, np.uint8).astype(np.int64) - 48
    if chars.size and (chars.min() < 0 or chars.max() > 63):
        raise ValueError(f"{field}: compressed counts hold characters outside '0'..'o'")
    ends = np.flatnonzero((chars & 0x20) == 0)
    if chars.size and (ends.size == 0 or ends[-1] != chars.size - 1):
        raise ValueError(f"{field}: compressed counts are cut short")
    starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64)
    lengths = ends - starts + 1
    if lengths.size and lengths.max() > _MAX_CHARS_PER_COUNT:
        raise ValueError(f"{field}: a compressed count is {lengths.max()} characters long")
    position = np.arange(chars.size) - np.repeat(starts, lengths)
    values = np.zeros(ends.size, np.int64)
    np.add.at(values, np.repeat(np.arange(ends.size), lengths), (chars & 0x1F) << (5 * position))
    negative = (chars[ends] & 0x10) != 0
    values[negative] -= np.int64(1) << (5 * lengths[negative])
    values[1::2] = np.cumsum(values[1::2])  # counts from the third on are deltas
    values[2::2] = np.cumsum(values[2::2])
    return values


def rle_counts(rle: Any, field: str = "rle") -> tuple[np.ndarray, tuple[int, int]]:
    """(run lengths int64, (H, W)) of a COCO RLE dict, checked: ValueError naming `field` for
    a non-dict, a bad size, counts of another type, a negative count, or counts that do not
    sum to H*W."""
    if not isinstance(rle, dict) or "counts" not in rle or "size" not in rle:
        raise ValueError(f"{field} is not a COCO RLE dict {{size, counts}}: {rle!r:.60}")
    h, w = check_size(rle["size"], f"{field} size")
    counts = rle["counts"]
    if isinstance(counts, (str, bytes)):
        values = string_counts(counts, field)
    elif isinstance(counts, list) and all(
        isinstance(c, (int, np.integer)) and not isinstance(c, bool) for c in counts
    ):
        if len(counts) > h * w + 1:
            raise ValueError(f"{field}: {len(counts)} counts for {h * w} pixels")
        values = np.array([min(max(int(c), -1), h * w + 1) for c in counts], np.int64)
    else:
        raise ValueError(f"{field}: counts must be a string or a list of integers")
    if values.size and values.min() < 0:
        raise ValueError(f"{field}: counts hold a negative run length")
    if int(values.sum()) != h * w:
        raise ValueError(f"{field}: counts sum to {int(values.sum())}, not H*W = {h}*{w}")
    return values, (h, w)


def decode_rle(rle: Any, field: str = "rle") -> np.ndarray:
    """COCO RLE (str, bytes or list counts) -> uint8[H, W] {0,1}, checked by `rle_counts`."""
    values, (h, w) = rle_counts(rle, field)
    counts = rle["counts"]
    if isinstance(counts, (str, bytes)):  # checked: decode the string as it is
        encoded = {"size": [h, w], "counts": counts.encode() if isinstance(counts, str) else counts}
    else:
        encoded = mask_utils.frPyObjects({"size": [h, w], "counts": values.tolist()}, h, w)
    return np.ascontiguousarray(mask_utils.decode(encoded), dtype=np.uint8)
