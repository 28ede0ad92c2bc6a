"""Prompt attack for clicks, scribbles and lassos on a predictor whose mask is the soft gesture."""

from __future__ import annotations

import types

import jax.numpy as jnp
import numpy as np
import pytest

from dig_jax.gestures import Gesture, GestureKind, soft_rasterize
from dig_jax.prompts.soft import (
    click_indices,
    encode_points_context,
    encode_points_context_clicks,
    encode_points_gesture,
    points_encoder,
)
from dig_jax.robustness.breps.prompt_attack import (
    control_weights,
    prompt_attack_batch,
    prompt_robustness,
)

H = W = 32
STEPS = 15


def encode_soft(points, length, closed, image):
    soft = soft_rasterize(points, length, closed, image.shape[:2])
    return jnp.concatenate([image, soft[..., None]], axis=-1)


def gesture_is_mask(x):
    return 20.0 * (x[..., 3] - 0.5)


yy, xx = np.mgrid[:H, :W]
DISC = (((yy - 16) ** 2 + (xx - 16) ** 2) < 7**2).astype(np.uint8)
IMAGES = np.zeros((3, H, W, 3), np.uint8)
GESTURES = [
    Gesture(GestureKind.CLICK, [[12.0, 15.0]], False),
    Gesture(GestureKind.SCRIBBLE, [[10.0, 12.0], [16, 16], [21, 18]], False),
    Gesture(GestureKind.TIGHT_LASSO, [[9.0, 9.0], [23, 9], [23, 23], [9, 23]], True),
]


@pytest.fixture(scope="module")
def results():
    gts = np.stack([DISC] * 3)
    kw = dict(steps=STEPS, encode_points=encode_soft, n_max=4, controls=3)
    return {
        m: prompt_attack_batch(gesture_is_mask, IMAGES, gts, GESTURES, mode=m, **kw)
        for m in ("min", "max")
    }


def test_min_lowers_max_raises(results):
    lo, hi = results["min"], results["max"]
    np.testing.assert_array_equal(lo.iou_start, hi.iou_start)
    assert (np.asarray(lo.iou) <= np.asarray(lo.iou_start)).all()
    assert (np.asarray(hi.iou) >= np.asarray(hi.iou_start)).all()
    assert float(lo.iou[0]) < float(lo.iou_start[0]) - 0.02  # the click is pushed off the disc
    assert float(hi.iou[0]) > float(hi.iou_start[0]) + 0.02  # ... or onto its centre


@pytest.mark.parametrize("mode", ["min", "max"])
def test_trajectory_consistent_and_inside_image(results, mode):
    r = results[mode]
    traj, ious = np.asarray(r.trajectory), np.asarray(r.ious)
    assert traj.shape == (3, STEPS + 1, 4, 2) and np.isfinite(traj).all()
    assert (traj >= 0).all() and (traj <= W - 1).all()
    for i, g in enumerate(GESTURES):
        n = len(g.points)
        np.testing.assert_allclose(traj[i, 0, :n], g.points)  # step 0 = the drawn gesture
        best = int(r.best_step[i])
        assert float(r.iou[i]) == ious[i, best]
        np.testing.assert_array_equal(np.asarray(r.points[i]), traj[i, best])


def test_empty_gt_is_nan_free():
    r = prompt_attack_batch(
        gesture_is_mask,
        IMAGES[:1],
        np.zeros((1, H, W), np.uint8),
        GESTURES[:1],
        steps=3,
        encode_points=encode_soft,
        n_max=4,
        controls=3,
    )
    for field in r:
        assert np.isfinite(np.asarray(field)).all()


def test_control_weights_interpolate():
    w = control_weights(5, 6, 3, closed=False)
    np.testing.assert_allclose(w.sum(1), [1, 1, 1, 1, 1, 0])
    np.testing.assert_allclose(w[2], [0, 1, 0])
    wc = control_weights(4, 4, 2, closed=True)
    np.testing.assert_allclose(wc, [[1, 0], [0.5, 0.5], [0, 1], [0.5, 0.5]])
    with pytest.raises(ValueError, match="length"):
        control_weights(0, 4, 2, closed=False)


def test_library_gesture_encoder_shape():
    x = encode_points_gesture(
        jnp.array(GESTURES[1].points), jnp.int32(3), False, jnp.zeros((H, W, 3))
    )
    assert x.shape == (H, W, 6)
    assert float(x[..., 3].max()) > 0.99 and float(x[..., 5].max()) == 0.0


def test_bad_arguments():
    with pytest.raises(ValueError, match="mode"):
        prompt_attack_batch(gesture_is_mask, IMAGES, np.stack([DISC] * 3), GESTURES, mode="x")
    with pytest.raises(ValueError, match="B gestures"):
        prompt_attack_batch(gesture_is_mask, IMAGES, np.stack([DISC] * 3), GESTURES[:2])
    pointless = types.SimpleNamespace(points=np.zeros((0, 2), np.float32), closed=False)
    with pytest.raises(ValueError, match=r"gestures\[1\] must have points"):
        prompt_attack_batch(
            gesture_is_mask, IMAGES[:2], np.stack([DISC] * 2), [GESTURES[0], pointless]
        )
    with pytest.raises(ValueError, match="at least one gesture"):
        prompt_attack_batch(gesture_is_mask, IMAGES[:0], np.zeros((0, H, W), np.uint8), [])
    for kwargs, match in (
        ({"steps": 0}, "steps"),
        ({"lr_mult": -1.0}, "lr_mult"),
        ({"lam": -1.0}, "lam"),
        ({"sigma_frac": 0.0}, "sigma_frac"),
        ({"controls": 0}, "controls"),
    ):
        with pytest.raises(ValueError, match=match):
            prompt_attack_batch(gesture_is_mask, IMAGES, np.stack([DISC] * 3), GESTURES, **kwargs)


def test_context_encoder_puts_gesture_in_positive_channel():
    pts = jnp.array(GESTURES[1].points)
    x = encode_points_context(pts, jnp.int32(3), False, jnp.zeros((H, W, 3)))
    assert x.shape == (H, W, 7)
    g = encode_points_gesture(pts, jnp.int32(3), False, jnp.zeros((H, W, 3)))
    np.testing.assert_allclose(x[..., 3], g[..., 3])
    np.testing.assert_array_equal(x[..., 4:], 0.0)
    assert points_encoder("context") is encode_points_context
    assert points_encoder("context", "gesture") is encode_points_context
    assert points_encoder("gesture", "clicks") is encode_points_gesture
    assert points_encoder("context", "clicks") is encode_points_context_clicks
    with pytest.raises(ValueError, match="input_kind"):
        points_encoder("box")
    with pytest.raises(ValueError, match="context_encoding"):
        points_encoder("context", "box")


def test_clicks_context_encoder_draws_discs_at_evenly_spaced_points():
    """A clicks-trained baseline sees soft discs (hard limit: radius-5 discs) at up to 24 points
    spread along the gesture, not the stroke between them."""
    from dig_jax.gestures import rasterize

    pts = np.zeros((40, 2), np.float32)
    pts[:30] = np.stack([np.linspace(2, 29, 30), np.full(30, 16.0)], axis=-1)  # 30 points, padded
    np.testing.assert_array_equal(
        np.asarray(click_indices(jnp.int32(30), 40, 24))[[0, -1]], [0, 29]
    )
    np.testing.assert_array_equal(click_indices(jnp.int32(1), 40, 24), np.zeros(24))
    far = np.array([[3.0, 3.0], [28.0, 28.0]], np.float32)
    x = encode_points_context_clicks(jnp.asarray(far), jnp.int32(2), True, jnp.zeros((H, W, 3)))
    assert x.shape == (H, W, 7)
    discs = np.maximum(
        *(rasterize(Gesture(GestureKind.CLICK, p[None], False), (H, W)) for p in far)
    )
    np.testing.assert_array_equal(np.asarray(x[..., 3]) >= 0.5, discs > 0)  # no stroke between
    np.testing.assert_array_equal(np.asarray(x[..., 4:]), 0.0)
    line = encode_points_context_clicks(
        jnp.asarray(pts), jnp.int32(30), False, jnp.zeros((H, W, 3))
    )
    assert float(line[16, 2, 3]) > 0.99 and float(line[16, 29, 3]) > 0.99
    assert float(line[0, 0, 3]) < 0.01  # the padding rows (all at (0, 0)) are not drawn


def test_prompt_robustness_per_kind():
    gts = np.stack([DISC] * 3)
    out = prompt_robustness(
        gesture_is_mask,
        IMAGES,
        gts,
        np.random.default_rng(0),
        kinds=(GestureKind.CLICK, GestureKind.SCRIBBLE),
        steps=5,
        encode_points=encode_soft,
        n_max=64,
        controls=3,
    )
    assert set(out) == {"click", "scribble"}
    for m in out.values():
        assert m["n"] == 3 and m["iou_min"] <= m["iou_tight"] <= m["iou_max"]
