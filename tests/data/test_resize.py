"""The one resize policy (`dig_jax.data.resize`): shrink only, aspect kept; image area/bilinear,
labels nearest; training, evaluation and the demo size photos the same way."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from dig_jax.data.resize import (
    fit_within,
    resize_image,
    resize_labels,
    shrink_image,
    shrunk_shape,
)
from dig_jax.data.sources.record import LoadedRecord, shrink_loaded
from dig_jax.demo.photos import downscale
from dig_jax.evaluation.protocol import load_record


def test_shrunk_shape_keeps_small_photos_and_the_aspect_ratio():
    assert fit_within((480, 640), 320) == (240, 320)
    assert fit_within((3, 1000), 10) == (1, 10)  # at least 1 px
    assert shrunk_shape((480, 640), None) == (480, 640)
    assert shrunk_shape((480, 640), 640) == (480, 640)  # never enlarged
    assert shrunk_shape((480, 641), 640) == (479, 640)
    assert shrunk_shape((700, 500, 3), 350) == (350, 250)


@pytest.mark.parametrize(
    ("size", "flag"), [((20, 17), cv2.INTER_AREA), ((60, 30), cv2.INTER_LINEAR)]
)
def test_image_is_averaged_when_shrunk_and_bilinear_when_a_side_grows(size, flag):
    image = np.random.default_rng(0).integers(0, 255, (40, 40, 3)).astype(np.uint8)
    expected = cv2.resize(image, size[::-1], interpolation=flag)
    assert np.array_equal(resize_image(image, size), expected)
    assert resize_image(image, (40, 40)) is image


def test_labels_keep_their_values():
    labels = np.random.default_rng(1).choice(np.array([0, 1, 255], np.uint8), (40, 40))
    out = resize_labels(labels, (13, 29))
    assert out.shape == (13, 29) and set(np.unique(out)) <= {0, 1, 255}


class _Fixed:
    def __init__(self, loaded):
        self.loaded = loaded

    def load(self):
        return self.loaded


def test_training_evaluation_and_demo_shrink_alike():
    rng = np.random.default_rng(2)
    image = rng.integers(0, 255, (300, 420, 3)).astype(np.uint8)
    mask = np.zeros((1, 300, 420), np.uint8)
    mask[0, 50:200, 60:300] = 1
    void = np.zeros((300, 420), np.uint8)
    void[40:60] = 1
    loaded = LoadedRecord("t", "0", image, mask, void, (1,))
    small = shrink_loaded(loaded, 200)
    assert small.shape == (143, 200)
    assert np.array_equal(small.image, shrink_image(image, 200))
    assert np.array_equal(small.image, downscale(image, 200))
    assert np.array_equal(small.instances[0], resize_labels(mask[0], (143, 200)))
    assert np.array_equal(small.void, resize_labels(void, (143, 200)))
    assert np.array_equal(load_record(_Fixed(loaded), 200).image, small.image)
    assert shrink_loaded(loaded, 420) is loaded and shrink_loaded(loaded, None) is loaded
