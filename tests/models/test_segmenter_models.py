"""Shapes, parameter counts and input encodings of the HRNet segmenters."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dig_jax.models.heads import adaptive_max_pool
from dig_jax.models.interactive import Segmenter, build_segmenter, flip_averaged
from dig_jax.prompts import batch_to_input, context_input, encode_context_clicks, gesture_input
from dig_jax.train.config import TINY_BACKBONE, base_config


def n_params(tree) -> int:
    return sum(int(np.prod(x.shape)) for x in jax.tree.leaves(tree))


def abstract_variables(model: Segmenter, shape: tuple[int, ...]):
    return jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.zeros(shape), train=False))


def test_full_hrnet18s_small_has_2_to_4_million_parameters():
    variables = abstract_variables(Segmenter(), (1, 256, 256, 6))
    count = n_params(variables["params"])
    assert 2_000_000 <= count <= 4_000_000, count
    assert "batch_stats" in variables


def test_multihead_adds_exactly_the_paper_heads():
    single = n_params(abstract_variables(Segmenter(), (1, 128, 128, 6))["params"])
    multi = n_params(abstract_variables(Segmenter(multihead=True), (1, 128, 128, 6))["params"])
    conv = 96 * 48 + 2 * 48  # 1x1 conv (no bias) + BatchNorm scale/bias
    flat = 32 * 32 * 48

    def mlp(out: int) -> int:
        return flat * 1024 + 1024 + 1024 * 512 + 512 + 512 * out + out

    assert multi - single == conv + mlp(1) + mlp(5)


@pytest.mark.parametrize("multihead", [False, True])
@pytest.mark.parametrize("size", [(64, 64), (40, 72)])
def test_output_shapes_at_input_resolution(multihead, size):
    model = Segmenter(
        **TINY_BACKBONE, multihead=multihead, aux_reduce=4, aux_pool=4, aux_hidden=(8,)
    )
    x = jnp.zeros((3, *size, 6))
    variables = abstract_variables(model, x.shape)
    out = jax.eval_shape(lambda v: model.apply(v, x, train=False), variables)
    assert out["mask"].shape == (3, *size)
    assert out["mask"].dtype == jnp.float32
    if multihead:
        assert out["context"].shape == (3,)
        assert out["kind"].shape == (3, 5)
    else:
        assert set(out) == {"mask"}


def test_real_forward_is_finite_and_batchnorm_updates():
    model = build_segmenter(base_config("tiny").model)
    rng = np.random.default_rng(0)
    x = gesture_input(
        rng.integers(0, 256, (2, 32, 32, 3), dtype=np.uint8),
        np.zeros((2, 32, 32)),
        np.ones((2, 32, 32)),
        np.zeros((2, 32, 32)),
    )
    variables = jax.jit(lambda k: model.init(k, x, train=False))(jax.random.key(0))
    out, updates = jax.jit(lambda v: model.apply(v, x, train=True, mutable=["batch_stats"]))(
        variables
    )
    assert np.isfinite(np.asarray(out["mask"])).all()
    before = jax.tree.leaves(variables["batch_stats"])
    after = jax.tree.leaves(updates["batch_stats"])
    assert any(not np.allclose(a, b) for a, b in zip(before, after, strict=True))


def test_wrong_channel_count_is_rejected():
    model = Segmenter(**TINY_BACKBONE)
    with pytest.raises(ValueError, match="x must be"):
        abstract_variables(model, (1, 32, 32, 7))


def test_gesture_input_channel_order():
    image = np.full((4, 5, 3), 200, np.uint8)
    gesture = np.zeros((4, 5), np.uint8)
    gesture[1, 2] = 1
    distance = np.full((4, 5), 0.5, np.float32)
    prev = np.ones((4, 5), np.uint8)
    x = np.asarray(gesture_input(image, gesture, distance, prev))
    assert x.shape == (4, 5, 6) and x.dtype == np.float32
    np.testing.assert_array_equal(x[..., :3], 200.0)
    assert x[1, 2, 3] == 1.0 and x[..., 3].sum() == 1.0
    np.testing.assert_array_equal(x[..., 4], 0.5)
    np.testing.assert_array_equal(x[..., 5], 1.0)


def test_context_input_without_box_has_zero_box_channel():
    image = np.zeros((2, 3, 3), np.uint8)
    pos, neg = np.ones((2, 3)), np.zeros((2, 3))
    x = np.asarray(context_input(image, pos, neg, None, np.zeros((2, 3))))
    assert x.shape == (2, 3, 7)
    np.testing.assert_array_equal(x[..., 3], 1.0)
    np.testing.assert_array_equal(x[..., 5], 0.0)


def test_context_batch_routes_gesture_by_context():
    gesture = np.ones((2, 4, 4), np.uint8)
    batch = {
        "image": np.zeros((2, 4, 4, 3), np.uint8),
        "gesture": gesture,
        "prev_mask": np.zeros((2, 4, 4), np.uint8),
        "context": np.array([1, 0]),
    }
    x = np.asarray(batch_to_input(batch, "context"))
    np.testing.assert_array_equal(x[0, ..., 3], 1.0)  # ADD -> positive
    np.testing.assert_array_equal(x[0, ..., 4], 0.0)
    np.testing.assert_array_equal(x[1, ..., 3], 0.0)  # REMOVE -> negative
    np.testing.assert_array_equal(x[1, ..., 4], 1.0)


def test_adaptive_max_pool_known_answer():
    x = jnp.arange(36.0).reshape(1, 6, 6, 1)
    np.testing.assert_array_equal(
        adaptive_max_pool(x, 3)[0, ..., 0], [[7, 9, 11], [19, 21, 23], [31, 33, 35]]
    )
    # 5 -> 2 overlapping cells of 3 rows (rows 0-2 and 2-4), never larger than the input
    y = adaptive_max_pool(jnp.arange(25.0).reshape(1, 5, 5, 1), 2)[0, ..., 0]
    np.testing.assert_array_equal(y, [[12, 14], [22, 24]])
    assert adaptive_max_pool(x, 32).shape == (1, 6, 6, 1)


def adaptive_max_pool_reference(x: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
    """PyTorch's adaptive max pooling, one window at a time (NHWC)."""
    height, width = x.shape[1:3]
    out = np.empty((x.shape[0], out_h, out_w, x.shape[3]), x.dtype)
    for i in range(out_h):
        r0, r1 = (i * height) // out_h, -(-((i + 1) * height) // out_h)
        for j in range(out_w):
            c0, c1 = (j * width) // out_w, -(-((j + 1) * width) // out_w)
            out[:, i, j] = x[:, r0:r1, c0:c1].max(axis=(1, 2))
    return out


@pytest.mark.parametrize(("shape", "size"), [((40, 40), 32), ((40, 36), 32), ((7, 33), 5)])
def test_adaptive_max_pool_matches_pytorch_bins(shape, size):
    x = np.random.default_rng(0).normal(size=(2, *shape, 3)).astype(np.float32) - 10.0
    got = np.asarray(adaptive_max_pool(jnp.asarray(x), size))
    expected = adaptive_max_pool_reference(x, min(size, shape[0]), min(size, shape[1]))
    assert np.isfinite(got).all()
    np.testing.assert_array_equal(got, expected)


def test_multihead_outputs_are_finite_at_160():
    """160² input -> 40² top features -> 32² pooled cells: every cell must see real features."""
    model = Segmenter(**TINY_BACKBONE, multihead=True, aux_reduce=2, aux_pool=32, aux_hidden=(4,))
    rng = np.random.default_rng(0)
    x = gesture_input(
        rng.integers(0, 256, (1, 160, 160, 3), dtype=np.uint8),
        np.zeros((1, 160, 160)),
        np.ones((1, 160, 160)),
        np.zeros((1, 160, 160)),
    )
    rng = np.random.default_rng(1)  # random variables: compiling `init` at 160² is slow

    def fill(path, a):
        if "var" in jax.tree_util.keystr(path):  # BatchNorm running variances are positive
            return np.ones(a.shape, a.dtype)
        return rng.normal(0, 0.2, a.shape).astype(a.dtype)

    variables = jax.tree_util.tree_map_with_path(fill, abstract_variables(model, x.shape))
    out = jax.jit(lambda v: model.apply(v, x, train=False))(variables)
    assert out["context"].shape == (1,) and out["kind"].shape == (1, 5)
    for name in ("mask", "context", "kind"):
        assert np.isfinite(np.asarray(out[name])).all(), name


def test_context_click_encoding_routes_by_context_and_kind():
    from dig_jax.gestures import Gesture, GestureKind, rasterize

    click = rasterize(Gesture(GestureKind.CLICK, np.array([[10.0, 12.0]]), False), (32, 32))
    box = rasterize(
        Gesture(GestureKind.RECTANGLE, np.array([[4.0, 4], [20, 4], [20, 20], [4, 20]]), True),
        (32, 32),
    )
    batch = {"gesture": np.stack([click, click, box]), "context": np.array([1, 0, 1]),
             "gesture_kind": np.array([GestureKind.CLICK, GestureKind.CLICK,
                                       GestureKind.RECTANGLE])}  # fmt: skip
    out = encode_context_clicks(batch)
    np.testing.assert_array_equal(out["positive"][0], click)  # one click = the same disc
    assert out["negative"][0].sum() == 0
    np.testing.assert_array_equal(out["negative"][1], click)
    assert out["positive"][1].sum() == 0
    np.testing.assert_array_equal(out["box"][2], box)
    assert out["positive"][2].sum() == 0 and out["negative"][2].sum() == 0


def test_flip_averaged_mirrors_the_mask_back_and_averages_the_heads():
    """A fake network whose mask is its first channel and whose heads read one pixel: the
    flipped view's mask, mirrored back, equals the plain one, and each head is the mean of
    the two views' values (known answers)."""
    x = jnp.arange(2 * 4 * 5 * 1, dtype=jnp.float32).reshape(2, 4, 5, 1)

    def apply(batch):
        return {"mask": batch[..., 0], "context": batch[:, 0, 0, 0], "kind": batch[:, 0, :, 0]}

    out = flip_averaged(apply, x)
    np.testing.assert_array_equal(out["mask"], x[..., 0])  # mirrored back: the same map
    np.testing.assert_array_equal(out["context"], 0.5 * (x[:, 0, 0, 0] + x[:, 0, 4, 0]))
    assert out["kind"].shape == (2, 5)
