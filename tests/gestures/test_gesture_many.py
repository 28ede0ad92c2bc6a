"""The batch host path: `simulate_many` is the loop of `simulate_creation`, `rasterize_many`
with a reused buffer and threads is `rasterize` of each gesture, and the fused mask checks."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from skimage.draw import ellipse

from dig_jax.gestures import (
    Gesture,
    GestureKind,
    rasterize,
    rasterize_many,
    simulate_creation,
    simulate_many,
)
from dig_jax.gestures.scan import MarkedPixels, checked_box, tight_box
from dig_jax.gestures.threads import map_chunked, map_in_order

SHAPE = (72, 88)


def _targets(n: int, seed: int) -> list[np.ndarray]:
    """n masks of mixed dtypes (bool, uint8, int8, int64) and two shapes, some with holes."""
    rng = np.random.default_rng(seed)
    targets = []
    for i in range(n):
        shape = SHAPE if i % 3 else (61, 45)  # a width off word boundaries too
        mask = np.zeros(shape, np.uint8)
        for _ in range(int(rng.integers(1, 3))):
            r, c = rng.integers(8, min(shape) - 8, 2)
            rr, cc = ellipse(r, c, rng.integers(3, 14), rng.integers(3, 14), shape)
            mask[rr, cc] = 1
        if i % 4 == 1:
            mask[r, max(c - 1, 0) : c + 2] = 0  # a hole (or a notch)
        targets.append(mask.astype([np.uint8, bool, np.int8, np.int64][i % 4]))
    return targets


@pytest.mark.parametrize("kind", list(GestureKind))
@pytest.mark.parametrize("workers", [1, 2, None])
def test_simulate_many_is_the_loop(kind, workers):
    targets = _targets(9, seed=int(kind))
    loop_rng, many_rng = np.random.default_rng(11), np.random.default_rng(11)
    expected = [simulate_creation(kind, t, loop_rng) for t in targets]
    got = simulate_many(kind, targets, many_rng, workers=workers)
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        assert a == b and a.kind == kind
    assert many_rng.random() == loop_rng.random()  # the generator ends where the loop leaves it


def test_simulate_many_names_the_bad_target():
    targets = _targets(4, seed=3)
    targets[2] = np.zeros(SHAPE, np.uint8)
    for kind in (GestureKind.CLICK, GestureKind.RECTANGLE, GestureKind.TIGHT_LASSO):
        with pytest.raises(ValueError, match=r"targets\[2\]: target is empty"):
            simulate_many(kind, targets, np.random.default_rng(0), workers=2)
    targets[2] = np.full(SHAPE, 2, np.uint8)
    with pytest.raises(ValueError, match=r"targets\[2\]: target must hold only 0 and 1"):
        simulate_many(GestureKind.SCRIBBLE, targets, np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"numpy\.random\.Generator"):
        simulate_many(GestureKind.CLICK, targets[:1], None)
    with pytest.raises(ValueError, match="workers"):
        simulate_many(GestureKind.CLICK, targets[:2], np.random.default_rng(0), workers=0)
    assert simulate_many(GestureKind.CLICK, [], np.random.default_rng(0)) == []


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("width", [64, 45])
def test_fused_scans_check_bytes(dtype, width):
    """The scans that count pixels or find the box also say whether every byte is 0 or 1,
    tail bytes (past the last whole word) and negative int8 values included."""
    mask = np.zeros((9, width), dtype)
    mask[2:5, 3:7] = 1
    pixels = MarkedPixels(mask.view(bool))
    assert pixels.binary and pixels.count == 12
    box, binary = checked_box(mask.view(np.uint8))
    assert binary and np.array_equal(box, tight_box(mask)) and np.array_equal(box, [3, 2, 7, 5])
    for r, c, value in [(8, width - 1, 2), (0, 0, -1 if dtype == np.int8 else 255), (3, 4, 3)]:
        bad = mask.copy()
        bad[r, c] = value
        assert not MarkedPixels(bad.view(bool)).binary
        assert not checked_box(bad.view(np.uint8))[1]
    for kind in (GestureKind.CLICK, GestureKind.RECTANGLE):
        with pytest.raises(ValueError, match="must hold only 0 and 1"):
            simulate_creation(kind, bad, np.random.default_rng(0))


@pytest.mark.parametrize("workers", [1, 3])
def test_rasterize_many_into_a_reused_buffer(workers):
    gestures = simulate_many(GestureKind.SCRIBBLE, _targets(5, seed=9), np.random.default_rng(2))
    shape = (61, 45)
    out = np.full((len(gestures), *shape), 7, np.uint8)  # stale bytes are cleared
    got = rasterize_many(gestures, shape, out=out, workers=workers)
    assert got is out
    for image, gesture in zip(out, gestures, strict=True):
        np.testing.assert_array_equal(image, rasterize(gesture, shape))
    with pytest.raises(ValueError, match=r"out must be uint8\[5, 61, 45\]"):
        rasterize_many(gestures, shape, out=np.zeros((4, *shape), np.uint8))
    with pytest.raises(ValueError, match="out must be uint8"):
        rasterize_many(gestures, shape, out=np.zeros((5, *shape), bool))
    with pytest.raises(ValueError, match="C-contiguous"):
        rasterize_many(gestures, shape, out=np.zeros((5, 45, 61), np.uint8).transpose(0, 2, 1))


def test_map_chunked_keeps_order_threads_and_the_first_error():
    names = map_chunked(lambda x: (x, threading.current_thread().name), range(10), workers=3)
    assert [x for x, _ in names] == list(range(10))
    main = threading.current_thread().name
    assert [name == main for _, name in names] == [True] * 3 + [False] * 7
    assert len({name for _, name in names}) == 3  # one thread per chunk
    assert map_chunked(lambda x: x * 2, [4], workers=8) == [8]

    def fail(x: int) -> int:
        if x in (4, 8):
            raise KeyError(x)
        return x

    with pytest.raises(KeyError, match="4"):
        map_chunked(fail, range(10), workers=3)


def test_map_in_order_runs_then_in_order_in_the_calling_thread():
    main = threading.current_thread().name
    seen = []

    def slow_first(x: int) -> tuple[int, str]:
        if x == 0:
            time.sleep(0.05)  # the other threads finish later items meanwhile
        return x, threading.current_thread().name

    def then(found: tuple[int, str]) -> int:
        seen.append((found[0], threading.current_thread().name))
        return found[0] * 10

    for workers in (1, 2, 3):
        seen.clear()
        assert map_in_order(slow_first, then, range(12), workers) == [x * 10 for x in range(12)]
        assert seen == [(x, main) for x in range(12)]
    assert map_in_order(lambda x: x, lambda x: -x, [], 4) == []

    def fail(x: int) -> int:
        if x in (4, 8):
            raise KeyError(x)
        return x

    seen.clear()
    with pytest.raises(KeyError, match="4"):
        map_in_order(fail, lambda x: seen.append(x), range(10), 3)
    assert seen == [0, 1, 2, 3]  # `then` ran on the items before the first error, in order


def _mixed_gestures(shape: tuple[int, int], seed: int) -> list:
    """Clicks (marked in place), rectangles and lassos (drawn in the scratch map), a stroke
    leaving the image and a one-row stroke: both of `mark_gestures`' ways."""
    targets = [t for t in _targets(12, seed) if t.shape == SHAPE][:6]
    rng = np.random.default_rng(seed)
    gestures = []
    for kind in (GestureKind.CLICK, GestureKind.RECTANGLE, GestureKind.TIGHT_LASSO):
        gestures += simulate_many(kind, targets, rng)
    gestures.append(Gesture(GestureKind.SCRIBBLE, np.array([[-30.0, 5.0], [200.0, 60.0]]), False))
    gestures.append(Gesture(GestureKind.SCRIBBLE, np.array([[2.0, 70.0], [80.0, 70.0]]), False))
    return gestures


@pytest.mark.parametrize("offset", [0, 3, 64])
def test_rasterize_many_on_a_misaligned_stale_buffer(offset):
    """Maps whose bytes start off cache-line boundaries (the streaming stores' head and tail)
    and hold stale values: every map is `rasterize` of its gesture, on one thread or two."""
    gestures = _mixed_gestures(SHAPE, seed=4)
    n, (h, w) = len(gestures), SHAPE
    raw = np.full(n * h * w + offset, 9, np.uint8)
    out = raw[offset:].reshape(n, h, w)
    for workers in (1, 2):
        out[:] = 9
        rasterize_many(gestures, SHAPE, out=out, workers=workers)
        for image, gesture in zip(out, gestures, strict=True):
            np.testing.assert_array_equal(image, rasterize(gesture, SHAPE))
    assert (raw[:offset] == 9).all()  # nothing written before the buffer


def _one_shape_targets(n: int, shape: tuple[int, int], dtype, seed: int) -> list[np.ndarray]:
    """Masks of one shape and dtype (the batch scans' case): ellipses, single pixels (whose
    rectangles are redrawn) and full masks (boxes clipped to the image)."""
    rng = np.random.default_rng(seed)
    targets = []
    for i in range(n):
        mask = np.zeros(shape, dtype)
        if i % 5 == 0:
            mask[rng.integers(shape[0]), rng.integers(shape[1])] = 1
        elif i % 7 == 0:
            mask[:] = 1
        else:
            r, c = rng.integers(4, min(shape) - 4, 2)
            rr, cc = ellipse(r, c, rng.integers(2, 20), rng.integers(2, 20), shape)
            mask[rr, cc] = 1
        targets.append(mask)
    return targets


@pytest.mark.parametrize("kind", [GestureKind.CLICK, GestureKind.SCRIBBLE, GestureKind.RECTANGLE])
@pytest.mark.parametrize(("shape", "dtype"), [((72, 88), np.uint8), ((61, 45), bool),
                                              ((40, 64), np.int8)])  # fmt: skip
def test_simulate_many_batch_scans_are_the_loop(kind, shape, dtype):
    """Clicks, scribbles and rectangles on masks of one shape go through the batch scans and
    the draws in as few calls as numpy allows (numba's generator for rectangles): the loop's
    gestures, byte for byte, and the generator left where the loop leaves it; a stacked
    [B, H, W] array too."""
    targets = _one_shape_targets(30, shape, dtype, seed=int(kind))
    for workers in (1, 2, None):
        loop_rng, many_rng = np.random.default_rng(21), np.random.default_rng(21)
        expected = [simulate_creation(kind, t, loop_rng) for t in targets]
        got = simulate_many(kind, targets, many_rng, workers=workers)
        for a, b in zip(got, expected, strict=True):
            assert a == b and a.points.dtype == np.float32
            assert a.points.tobytes() == b.points.tobytes()  # -0.0 and 0.0 told apart
        assert many_rng.random() == loop_rng.random()
    stacked = np.stack(targets)
    assert simulate_many(kind, stacked, np.random.default_rng(21)) == expected


def test_simulate_many_batch_scans_name_the_bad_target():
    targets = _one_shape_targets(6, (40, 48), np.uint8, seed=2)
    targets[3] = np.zeros((40, 48), np.uint8)
    for kind in (GestureKind.CLICK, GestureKind.SCRIBBLE, GestureKind.RECTANGLE):
        with pytest.raises(ValueError, match=r"targets\[3\]: target is empty"):
            simulate_many(kind, targets, np.random.default_rng(0), workers=2)
    targets[3][5, 5] = 1
    targets[4] = targets[4].copy()
    targets[4][0, 0] = 2
    for kind in (GestureKind.CLICK, GestureKind.RECTANGLE):
        with pytest.raises(ValueError, match=r"targets\[4\]: target must hold only 0 and 1"):
            simulate_many(kind, targets, np.random.default_rng(0))
    with pytest.raises(ValueError, match="workers"):
        simulate_many(GestureKind.CLICK, targets, np.random.default_rng(0), workers=0)
