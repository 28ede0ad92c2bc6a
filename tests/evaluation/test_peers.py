"""Classical peers: the filled gesture and OpenCV GrabCut seeded by the gesture."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from dig_jax.evaluation import PEERS, peer_predictor
from dig_jax.evaluation.iterative import iterative_ious
from dig_jax.evaluation.peers import (
    SEED_ADD,
    SEED_REMOVE,
    accumulate_seeds,
    filled_mask,
    grabcut_mask,
    grabcut_seeds,
)
from dig_jax.gestures import Gesture, GestureKind, box_outline_points, rasterize
from dig_jax.gestures.types import Context
from dig_jax.metrics import iou

SHAPE = (120, 160)


def scene(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A red disc on a noisy blue-green background, and its mask."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[: SHAPE[0], : SHAPE[1]]
    mask = ((xx - 80) ** 2 + (yy - 60) ** 2 <= 30**2).astype(np.uint8)
    image = rng.normal([40, 140, 120], 20, (*SHAPE, 3))
    image[mask > 0] = rng.normal([210, 40, 40], 20, (int(mask.sum()), 3))
    return np.clip(image, 0, 255).astype(np.uint8), mask


def rectangle(box) -> np.ndarray:
    points = box_outline_points(np.asarray(box, float))
    return rasterize(Gesture(GestureKind.RECTANGLE, points, True), SHAPE)


def test_filled_gesture_is_the_interior_and_respects_the_context():
    rect = rectangle([40, 20, 120, 100])
    filled = filled_mask(rect, None)
    assert filled[60, 80] == 1 and filled[5, 5] == 0 and filled.sum() > rect.sum()
    prev = np.zeros(SHAPE, np.uint8)
    prev[:, :50] = 1
    added = filled_mask(rect, prev, Context.ADD)
    removed = filled_mask(rect, prev, Context.REMOVE)
    assert added[60, 80] == 1 and added[5, 5] == 1
    assert removed[60, 45] == 0 and removed[5, 5] == 1


def test_grabcut_seeds():
    import cv2

    rect = rectangle([40, 20, 120, 100])
    seeds = grabcut_seeds(rect, None)
    assert seeds[60, 80] == cv2.GC_PR_FGD and seeds[5, 5] == cv2.GC_BGD
    stroke = rasterize(Gesture(GestureKind.SCRIBBLE, [[70.0, 60], [90, 60]], False), SHAPE)
    seeds = grabcut_seeds(stroke, None)
    assert seeds[60, 80] == cv2.GC_FGD and seeds[5, 5] == cv2.GC_PR_BGD
    prev = np.zeros(SHAPE, np.uint8)
    prev[:, :50] = 1
    seeds = grabcut_seeds(stroke, prev, Context.REMOVE)
    assert seeds[60, 80] == cv2.GC_BGD and seeds[5, 5] == cv2.GC_PR_FGD


def test_grabcut_finds_an_object_with_a_clear_colour():
    image, mask = scene()
    rect = rectangle([40, 20, 120, 100])
    assert iou(grabcut_mask(image, rect), mask) > 0.9
    stroke = rasterize(Gesture(GestureKind.SCRIBBLE, [[70.0, 55], [95, 65]], False), SHAPE)
    assert iou(grabcut_mask(image, stroke), mask) > 0.8
    everything = np.ones(SHAPE, np.uint8)  # no background seed: falls back to the filled gesture
    np.testing.assert_array_equal(grabcut_mask(image, everything), everything)


def test_grabcut_does_not_depend_on_the_opencv_calls_before_it():
    # A smooth random colour field: several colour clusters, so the k-means start matters.
    rng = np.random.default_rng(0)
    coarse = rng.integers(0, 256, (6, 8, 3)).astype(np.uint8)
    image = cv2.resize(coarse, SHAPE[::-1], interpolation=cv2.INTER_LINEAR)
    image = np.clip(image + rng.normal(0, 12, image.shape), 0, 255).astype(np.uint8)
    area = np.zeros(SHAPE, np.uint8)
    area[30:90, 40:120] = 1
    first = grabcut_mask(image, area)
    cv2.randu(np.zeros((100, 100)), 0, 1)  # moves OpenCV's global RNG
    np.testing.assert_array_equal(grabcut_mask(image, area), first)
    assert (grabcut_mask(image, area, rng_seed=1) != first).any()  # the seed is what decides


def test_peer_predictors_on_samples():
    image, mask = scene(1)
    rect = rectangle([40, 20, 120, 100])
    part = mask.copy()
    part[:, :70] = 0
    sample = {
        "image": image, "gesture": rect, "prev_mask": np.zeros(SHAPE, np.uint8),
        "has_prev": np.bool_(False), "context": np.int32(1), "local": part, "region": mask,
    }  # fmt: skip
    for name in PEERS:
        (pred,) = peer_predictor(name)([sample])
        assert pred.shape == SHAPE and pred.dtype == np.uint8
    np.testing.assert_array_equal(peer_predictor("oracle")([sample])[0], part > 0)
    np.testing.assert_array_equal(peer_predictor("oracle_region")([sample])[0], mask > 0)
    with pytest.raises(ValueError, match="peer must be one of"):
        peer_predictor("sam")


def click(x: float, y: float) -> np.ndarray:
    return rasterize(Gesture(GestureKind.CLICK, [[x, y]], False), SHAPE)


def test_accumulated_seeds_keep_strokes_and_a_creation_outline_the_latest_winning():
    prev = np.zeros(SHAPE, np.uint8)
    prev[40:80, 60:100] = 1
    seeds = accumulate_seeds(None, rectangle([40, 20, 120, 100]), None)  # creation outline
    assert seeds[5, 5] == SEED_REMOVE and seeds[60, 80] == 0
    seeds = accumulate_seeds(seeds, click(80, 60), prev, Context.ADD)
    assert seeds[60, 80] == SEED_ADD and seeds[5, 5] == SEED_REMOVE
    lasso = rectangle([5, 5, 55, 55])  # a refinement outline: a soft hint, nothing kept
    np.testing.assert_array_equal(accumulate_seeds(seeds, lasso, prev, Context.ADD), seeds)
    seeds = accumulate_seeds(seeds, click(80, 60), prev, Context.REMOVE)
    assert seeds[60, 80] == SEED_REMOVE
    seeds = accumulate_seeds(seeds, click(10, 10), prev, Context.ADD)
    assert seeds[10, 10] == SEED_ADD
    with pytest.raises(ValueError, match="seeds: size"):
        accumulate_seeds(np.zeros((4, 4), np.uint8), click(10, 10), prev)


def test_grabcut_keeps_earlier_hard_seeds_under_the_new_gesture():
    import cv2

    prev = np.zeros(SHAPE, np.uint8)
    prev[40:80, 60:100] = 1
    seeds = np.zeros(SHAPE, np.uint8)
    seeds[50, 70], seeds[5, 5], seeds[60, 80] = SEED_ADD, SEED_REMOVE, SEED_ADD
    labels = grabcut_seeds(click(80, 60), prev, Context.REMOVE, seeds)
    assert labels[50, 70] == cv2.GC_FGD and labels[5, 5] == cv2.GC_BGD
    assert labels[60, 80] == cv2.GC_BGD  # this gesture wins over an earlier one
    assert labels[45, 65] == cv2.GC_PR_FGD and labels[100, 10] == cv2.GC_PR_BGD
    np.testing.assert_array_equal(
        grabcut_seeds(click(80, 60), prev, Context.REMOVE, np.zeros(SHAPE, np.uint8)),
        grabcut_seeds(click(80, 60), prev, Context.REMOVE),
    )


def test_nog_hands_grabcut_every_earlier_gesture_as_seeds():
    """The NoG loop passes each sample the hard labels of the gestures before it (none on the
    first), and GrabCut seeded by clicks alone reaches the disc of a two-colour scene."""
    image, mask = scene(2)
    seen = []
    grabcut = peer_predictor("grabcut")

    def recording(samples):
        seen.append([np.array(s["seeds"]) for s in samples])
        return grabcut(samples)

    items = [(image, mask, mask > 0)]
    ious = iterative_ious(recording, items, int(GestureKind.CLICK), max_interactions=4)
    assert not seen[0][0].any()
    for step in range(1, len(seen)):
        marked = (seen[step][0] > 0).sum()
        assert marked > (seen[step - 1][0] > 0).sum()  # each click adds its pixels
    assert ious[0, -1] > 0.9
