"""`dig_jax.data.superpixels.slic` returns scikit-image's SLIC labels bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import skimage.segmentation
from hypothesis import given
from hypothesis import strategies as st
from skimage import io

from dig_jax.data.superpixels import slic
from dig_jax.paths import data_root, has_data


def reference(image: np.ndarray, n_segments: int, compactness: float = 10.0) -> np.ndarray:
    return skimage.segmentation.slic(
        image, n_segments=n_segments, compactness=compactness, start_label=0, channel_axis=-1
    )


@given(
    seed=st.integers(0, 2**32 - 1),
    height=st.integers(2, 40),
    width=st.integers(2, 40),
    n_segments=st.integers(1, 700),
    compactness=st.sampled_from([0.5, 10.0, 40.0]),
    levels=st.sampled_from([2, 4, 256]),
)
def test_equals_scikit_image_on_random_images(seed, height, width, n_segments, compactness, levels):
    # Few grey levels make many equal distances: ties must go to the lower segment index.
    rng = np.random.default_rng(seed)
    image = (rng.integers(0, levels, (height, width, 3)) * (255 // (levels - 1))).astype(np.uint8)
    np.testing.assert_array_equal(
        slic(image, n_segments, compactness), reference(image, n_segments, compactness)
    )


@pytest.mark.parametrize("n_segments", [1, 8, 100, 4000])
def test_equals_scikit_image_on_flat_and_striped_images(n_segments):
    flat = np.full((37, 53, 3), 90, np.uint8)
    stripes = np.zeros((64, 48, 3), np.uint8)
    stripes[:, ::3] = (200, 30, 10)
    for image in (flat, stripes):
        np.testing.assert_array_equal(slic(image, n_segments), reference(image, n_segments))


@pytest.mark.skipif(not has_data("grabcut"), reason="real photos absent (DIG_JAX_DATA)")
def test_equals_scikit_image_on_photo_crops():
    rng = np.random.default_rng(0)
    paths = sorted((data_root() / "grabcut" / "images").iterdir())[:8]
    for path in paths:
        photo = io.imread(path)[..., :3]
        for _ in range(3):
            h, w = (int(rng.integers(20, min(161, s))) for s in photo.shape[:2])
            y = int(rng.integers(0, photo.shape[0] - h))
            x = int(rng.integers(0, photo.shape[1] - w))
            crop = np.ascontiguousarray(photo[y : y + h, x : x + w])
            n = int(rng.choice([8, 60, 300, 1500]))
            np.testing.assert_array_equal(slic(crop, n), reference(crop, n), err_msg=path.name)


@pytest.mark.parametrize(
    ("image", "n_segments", "message"),
    [
        (np.zeros((8, 8, 3), np.float32), 4, "expected uint8"),
        (np.zeros((8, 8), np.uint8), 4, r"expected RGB \[H, W, 3\]"),
        (np.zeros((8, 8, 3), np.uint8), 0, "n_segments"),
    ],
)
def test_bad_input_is_named(image, n_segments, message):
    with pytest.raises(ValueError, match=message):
        slic(image, n_segments)


@given(
    seed=st.integers(0, 2**32 - 1),
    height=st.integers(1, 30),
    width=st.integers(1, 30),
    n_labels=st.integers(1, 6),
    min_size=st.integers(0, 12),
    max_size=st.integers(1, 200),
)
def test_connectivity_pass_equals_scikit_image(seed, height, width, n_labels, min_size, max_size):
    from skimage.segmentation._slic import _enforce_label_connectivity_cython

    from dig_jax.data.superpixels import _enforce_connectivity

    labels = np.random.default_rng(seed).integers(0, n_labels, (height, width)).astype(np.intp)
    want = _enforce_label_connectivity_cython(labels[None], min_size, max_size, start_label=0)
    np.testing.assert_array_equal(_enforce_connectivity(labels, min_size, max_size), want[0])
