"""BREPS attack on a known-answer predictor whose mask is the (soft) box itself."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dig_jax.robustness.breps import (
    attack_lr,
    breps_attack,
    breps_attack_batch,
    project_box,
    soft_box_fill,
)

H = W = 32
STEPS = 12


def encode_fill(box, image):
    return jnp.concatenate([image, soft_box_fill(box, image.shape[:2])[..., None]], axis=-1)


def box_is_mask(x):
    return 20.0 * (x[..., 3] - 0.5)


def disc(cy, cx, r, h=H, w=W):
    yy, xx = np.mgrid[:h, :w]
    return (((yy - cy) ** 2 + (xx - cx) ** 2) < r**2).astype(np.uint8)


IMAGE = np.zeros((H, W, 3), np.uint8)
DISC = disc(15, 14, 8)


def assert_valid_trajectory(boxes, bounds=(W, H), min_size=1.0):
    b = np.asarray(boxes)
    assert np.isfinite(b).all()
    tol = 1e-4
    assert (b[..., 2] - b[..., 0] >= min_size - tol).all()
    assert (b[..., 3] - b[..., 1] >= min_size - tol).all()
    assert (b[..., :2] >= -tol).all()
    assert (b[..., 2] <= bounds[0] + tol).all() and (b[..., 3] <= bounds[1] + tol).all()


@pytest.fixture(scope="module")
def disc_results():
    return {
        mode: breps_attack(box_is_mask, IMAGE, DISC, mode=mode, steps=STEPS, encode_box=encode_fill)
        for mode in ("min", "max")
    }


def test_min_lowers_and_max_raises_iou(disc_results):
    lo, hi = disc_results["min"], disc_results["max"]
    np.testing.assert_array_equal(lo.tight, [7, 8, 22, 23])
    assert float(lo.iou_tight) == float(hi.iou_tight) == pytest.approx(np.pi * 64 / 225, abs=0.06)
    assert float(lo.iou) < float(lo.iou_tight) - 0.05
    assert float(hi.iou) > float(hi.iou_tight) + 0.01


@pytest.mark.parametrize("mode", ["min", "max"])
def test_reported_best_is_the_trajectory_optimum(disc_results, mode):
    r = disc_results[mode]
    ious = np.asarray(r.ious)
    assert ious.shape == (STEPS + 1,) and r.boxes.shape == (STEPS + 1, 4)
    assert float(r.iou) == ious[int(r.best_step)] == (ious.min() if mode == "min" else ious.max())
    np.testing.assert_array_equal(r.box, r.boxes[int(r.best_step)])
    np.testing.assert_array_equal(r.boxes[0], r.tight)
    assert ious[0] == float(r.iou_tight)
    assert (float(r.iou) <= ious[0]) if mode == "min" else (float(r.iou) >= ious[0])
    assert_valid_trajectory(r.boxes)


def test_max_attack_never_worse_than_a_perfect_start():
    square = np.zeros((H, W), np.uint8)
    square[8:20, 5:25] = 1
    r = breps_attack(box_is_mask, IMAGE, square, mode="max", steps=STEPS, encode_box=encode_fill)
    assert float(r.iou_tight) == 1.0 and float(r.iou) == 1.0 and int(r.best_step) == 0


def test_batch_equals_single_and_respects_bounds(disc_results):
    gts = np.stack([DISC, disc(10, 20, 5)])
    bounds = np.array([[W, H], [28, 24]], np.float32)
    rb = breps_attack_batch(
        box_is_mask,
        np.stack([IMAGE, IMAGE]),
        gts,
        mode="min",
        steps=STEPS,
        encode_box=encode_fill,
        bounds=bounds,
    )
    np.testing.assert_allclose(rb.boxes[0], disc_results["min"].boxes, atol=1e-4)
    assert float(rb.iou[0]) == pytest.approx(float(disc_results["min"].iou), abs=1e-6)
    assert_valid_trajectory(rb.boxes[1], bounds=(28, 24))


@pytest.mark.parametrize("case", ["empty", "one_pixel", "full", "void_ring"])
@pytest.mark.parametrize("mode", ["min", "max"])
def test_degenerate_masks_are_nan_free(case, mode):
    gt = np.zeros((H, W), np.uint8)
    if case == "one_pixel":
        gt[5, 30] = 1
    elif case == "full":
        gt[:] = 1
    elif case == "void_ring":
        gt[:] = 255
        gt[10:12, 10:12] = 1
    r = breps_attack(box_is_mask, IMAGE, gt, mode=mode, steps=STEPS, encode_box=encode_fill)
    for field in r:
        assert np.isfinite(np.asarray(field)).all()
    assert_valid_trajectory(r.boxes)
    if case == "one_pixel":
        np.testing.assert_array_equal(r.tight, [30, 5, 31, 6])
    if case in ("empty", "full"):
        np.testing.assert_array_equal(r.tight, [0, 0, W, H])


def test_lr_follows_breps_formula():
    assert float(attack_lr(1024, 1024, 9.0)) == pytest.approx(9.0)
    assert float(attack_lr(480, 640, 1.0)) == pytest.approx(800 / (1024 * np.sqrt(2)))


@settings(max_examples=15)
@given(
    st.integers(0, 31),
    st.integers(0, 31),
    st.integers(1, 32),
    st.integers(1, 32),
    st.sampled_from(["min", "max"]),
    st.floats(1.0, 400.0),
    st.floats(0.0, 1.0),
)
def test_trajectory_valid_for_random_objects_and_huge_steps(x0, y0, w, h, mode, lr_mult, lam):
    gt = np.zeros((H, W), np.uint8)
    gt[y0 : y0 + h, x0 : x0 + w] = 1
    r = breps_attack(
        box_is_mask,
        IMAGE,
        gt,
        mode=mode,
        steps=STEPS,
        lr_mult=lr_mult,
        lam=lam,
        encode_box=encode_fill,
    )
    assert_valid_trajectory(r.boxes)
    ious = np.asarray(r.ious)
    assert np.isfinite(ious).all() and np.isfinite(np.asarray(r.losses)).all()
    assert (float(r.iou) <= ious[0]) if mode == "min" else (float(r.iou) >= ious[0])


_project = jax.jit(project_box)


@given(
    st.lists(st.floats(-80, 80, allow_nan=False), min_size=4, max_size=4),
    st.floats(1, 60),
    st.floats(1, 60),
)
def test_project_box_always_valid_and_idempotent(raw, w, h):
    bounds = jnp.array([w, h], jnp.float32)
    b = _project(jnp.array(raw, jnp.float32), bounds)
    assert_valid_trajectory(b[None], bounds=(w, h))
    np.testing.assert_allclose(_project(b, bounds), b, atol=1e-4)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mode": "worst"}, "mode"),
        ({"steps": -1}, "steps"),
        ({"steps": 0}, "steps must be >= 1"),
        ({"lr_mult": 0.0}, "lr_mult must be > 0"),
        ({"lr_mult": float("nan")}, "lr_mult must be > 0"),
        ({"lam": -0.1}, "lam must be >= 0"),
        ({"min_size": 0.0}, "min_size must be > 0"),
        ({"gt": np.zeros((H, W + 1), np.uint8)}, "gt must have shape"),
        ({"image": np.zeros((H, W), np.uint8)}, "image must have shape"),
        ({"bounds": (W + 1, H)}, "bounds"),
        ({"bounds": (W, H, 1)}, "bounds must have shape"),
    ],
)
def test_bad_arguments_raise(kwargs, match):
    args = {"image": IMAGE, "gt": DISC, **kwargs}
    image, gt = args.pop("image"), args.pop("gt")
    with pytest.raises(ValueError, match=match):
        breps_attack(box_is_mask, image, gt, encode_box=encode_fill, **args)
    if "image" not in kwargs and "gt" not in kwargs and "bounds" not in kwargs:
        with pytest.raises(ValueError, match=match):
            breps_attack_batch(box_is_mask, image[None], gt[None], encode_box=encode_fill, **args)


@pytest.mark.parametrize("mode", ["min", "max"])
def test_host_loop_equals_the_scanned_attack(disc_results, mode):
    # The public attack runs one compiled step per call from the host; `_attack_one` is the
    # same search in lax.scan (for use inside a caller's jit): same trajectory and choice.
    import functools

    from dig_jax.robustness.breps.attack import _attack_one, _sign
    from dig_jax.robustness.breps.prior import BREPS_GAMMA

    scanned = jax.jit(
        functools.partial(
            _attack_one, steps=STEPS, predict_logits=box_is_mask, encode_box=encode_fill,
            min_size=1.0, prior=BREPS_GAMMA,
        )
    )(
        jnp.asarray(IMAGE), jnp.asarray(DISC), jnp.asarray([0, 0, W, H], jnp.float32),
        jnp.float32(attack_lr(H, W)), jnp.float32(5.0), jnp.float32(0.1), _sign(mode),
    )  # fmt: skip
    hosted = disc_results[mode]
    np.testing.assert_allclose(hosted.boxes, scanned.boxes, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(hosted.losses, scanned.losses, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(hosted.ious, scanned.ious)
    assert int(hosted.best_step) == int(scanned.best_step)
    np.testing.assert_array_equal(hosted.tight, scanned.tight)


def test_host_search_compiles_ahead_of_time_and_rejects_zero_steps():
    from dig_jax.robustness.breps.search import HostSearch, SearchSetup

    def setup(target):
        objective = lambda p: (jnp.sum((p - target) ** 2), (p - target, p))
        gt = jnp.ones((2, 3), jnp.uint8)
        return SearchSetup(objective, jnp.zeros((2, 3)), gt, jnp.float32(0.1), True)

    search = HostSearch(setup, 4)
    target = jnp.arange(6.0).reshape(2, 3)
    shown, ious, losses, _ = search.compile(target)(target)
    direct = search(target)
    assert shown.shape == (5, 2, 3) and ious.shape == losses.shape == (5,)
    np.testing.assert_array_equal(losses, direct[2])
    assert losses[-1] < losses[0]  # Adam moved towards the target
    with pytest.raises(ValueError, match="steps must be >= 1"):
        HostSearch(setup, 0)
