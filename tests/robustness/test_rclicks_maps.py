"""Clickability maps UD / DT / SM: probability maps on the error, exact padded EDT, bad inputs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import ndimage

from dig_jax.robustness.rclicks.maps import (
    MAP_KINDS,
    clickability_map,
    error_masks,
    map_function,
    padded_edt,
    spectral_residual,
)


def scene(h=60, w=80, seed=0):
    rng = np.random.default_rng(seed)
    image = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    error = np.zeros((h, w), bool)
    error[10:40, 20:70] = True
    return image, error


@pytest.mark.parametrize("kind", MAP_KINDS)
def test_maps_are_probabilities_on_the_error(kind):
    image, error = scene()
    m = clickability_map(kind, image, error.astype(np.uint8), error)
    assert m.dtype == np.float32 and m.shape == error.shape
    assert m.sum() == pytest.approx(1.0, abs=1e-5)
    assert (m >= 0).all() and (m[~error] == 0).all() and (m[error] > 0).any()


@pytest.mark.parametrize("kind", MAP_KINDS)
def test_empty_error_gives_zeros_not_nan(kind):
    image, error = scene()
    m = clickability_map(kind, image, error, np.zeros_like(error))
    assert np.isfinite(m).all() and not m.any()


def test_dt_peaks_at_the_centre_and_ud_is_flat():
    image, error = scene()
    dt = clickability_map("dt", image, error, error)
    row = np.unravel_index(np.argmax(dt), dt.shape)[0]
    assert 24 <= row <= 25  # rows 10..39: centre 24.5
    ud = clickability_map("ud", image, error, error)
    assert np.allclose(ud[error], 1 / error.sum())


@given(hnp.arrays(bool, st.tuples(st.integers(1, 12), st.integers(1, 12))))
def test_padded_edt_equals_edt_of_the_padded_image(mask):
    full = ndimage.distance_transform_edt(np.pad(mask, 1))[1:-1, 1:-1]
    np.testing.assert_allclose(padded_edt(mask), full, rtol=1e-6)


def test_saliency_prefers_the_odd_patch():
    image = np.random.default_rng(0).integers(90, 110, (64, 64, 3)).astype(np.uint8)
    image[40:46, 40:46] = 255  # a bright patch on a fine texture
    error = np.zeros((64, 64), bool)
    error[8:56, 8:56] = True
    m = clickability_map("sm", image, error, error)
    assert m[40:46, 40:46].mean() > 3 * m[error].mean()
    sal = np.asarray(spectral_residual(np.zeros((16, 16), np.float32)))
    assert np.isfinite(sal).all()


def test_error_masks_ignore_void():
    gt = np.array([[1, 1, 255], [0, 0, 255]], np.uint8)
    pred = np.array([[0, 1, 0], [1, 0, 1]], np.uint8)
    fn, fp = error_masks(pred, gt)
    assert fn.tolist() == [[True, False, False], [False, False, False]]
    assert fp.tolist() == [[False, False, False], [True, False, False]]


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda im, e: clickability_map("xx", im, e, e), "kind"),
        (lambda im, e: clickability_map("dt", im[..., 0], e, e), "image"),
        (lambda im, e: clickability_map("dt", im, e, e[:-1]), "error"),
        (lambda im, e: clickability_map("dt", im, e[:-1], e), "gt"),
        (lambda im, e: clickability_map("dt", im, e, e * 3), "error"),
        (lambda im, e: padded_edt(e[None]), "mask"),
        (lambda im, e: map_function("no-such-map"), "map"),
    ],
)
def test_bad_inputs_raise_naming_the_argument(call, name):
    image, error = scene()
    with pytest.raises(ValueError, match=name):
        call(image, error.astype(np.uint8))
