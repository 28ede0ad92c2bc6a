"""Prompt attack for clicks, scribbles and lassos on a predictor whose mask is the soft gesture."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from dig_jax.gestures import Gesture, GestureKind, soft_rasterize
from dig_jax.robustness.breps.prompt_attack import (
    control_weights,
    encode_points_context,
    encode_points_gesture,
    points_encoder,
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


def test_context_encoder_puts_gesture_in_positive_channel():
    pts = jnp.array(GESTURES[1].points)
    x = encode_points_context(pts, jnp.int32(3), False, jnp.zeros((H, W, 3)))
    assert x.shape == (H, W, 7)
    g = encode_points_gesture(pts, jnp.int32(3), False, jnp.zeros((H, W, 3)))
    np.testing.assert_allclose(x[..., 3], g[..., 3])
    np.testing.assert_array_equal(x[..., 4:], 0.0)
    assert points_encoder("context") is encode_points_context
    with pytest.raises(ValueError, match="input_kind"):
        points_encoder("box")


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
