"""BREPS on the protocol's instances: attacked in the zoom crop `predict` uses, with BREPS's step
in photo pixels, and scored on the original photo."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from dig_jax import prompts
from dig_jax.data.sources.record import Record
from dig_jax.robustness.breps import attack_lr, soft_box_fill
from dig_jax.robustness.breps import evaluate as breps_evaluate
from dig_jax.robustness.breps.attack import project_box
from dig_jax.robustness.breps.prepare import zoom_instance

SIZE = 64


def encode_fill(box, image):
    return jnp.concatenate([image, soft_box_fill(box, image.shape[:2])[..., None]], axis=-1)


def box_is_mask(x):
    return 20.0 * (x[..., 3] - 0.5)


def rectangle_photo(h: int = 300, w: int = 420) -> tuple[np.ndarray, np.ndarray]:
    image = np.full((h, w, 3), 90, np.uint8)
    mask = np.zeros((h, w), np.uint8)
    mask[100:220, 150:330] = 1
    return image, mask


def test_zoom_instance_is_the_crop_predict_uses():
    image, mask = rectangle_photo()
    z = zoom_instance(image, mask, SIZE)
    assert z.image.shape == (SIZE, SIZE, 3) and z.gt.shape == (SIZE, SIZE)
    assert z.box.side == pytest.approx(prompts.EXPAND * (180 + 10))  # outline 5 px past edges
    np.testing.assert_allclose(z.to_photo(np.array([0, 0, SIZE, SIZE])),
                               [z.box.x0, z.box.y0, z.box.x0 + z.box.side,
                                z.box.y0 + z.box.side])  # fmt: skip
    assert (z.bounds[2:] - z.bounds[:2] > 0).all() and z.bounds[2] <= SIZE


def test_attack_uses_photo_pixel_steps_and_scores_on_the_photo(monkeypatch):
    image, mask = rectangle_photo()
    record = Record("toy", "rect", image, (mask[None], np.zeros_like(mask)))
    seen = {}
    original = breps_evaluate.breps_attack_batch

    def spy(*args, **kwargs):
        seen.setdefault("lr_px", kwargs["lr_px"])
        seen.setdefault("radius", kwargs["radius"])
        return original(*args, **kwargs)

    monkeypatch.setattr(breps_evaluate, "breps_attack_batch", spy)
    out = breps_evaluate.attack_dataset(
        box_is_mask, encode_fill, [record], size=SIZE, batch=1, steps=6, progress=False
    )
    z = zoom_instance(image, mask, SIZE)
    np.testing.assert_allclose(seen["lr_px"], [attack_lr(300, 420, 9.0) * z.scale], rtol=1e-5)
    np.testing.assert_allclose(seen["radius"], [5 * z.scale], rtol=1e-5)
    (row,) = out["instances"]
    np.testing.assert_allclose(row["tight"], [150, 100, 330, 220], atol=2)
    # the box is the mask: the tight box gives the object back on the photo
    assert row["iou_tight"] > 0.95
    assert row["iou_min"] <= row["iou_tight"] <= row["iou_max"]
    assert out["metrics"]["n"] == 1


def test_project_box_keeps_boxes_on_the_photo_inside_a_crop():
    bounds = jnp.array([10.0, 20.0, 50.0, 60.0])
    box = project_box(jnp.array([0.0, 0.0, 70.0, 30.0]), bounds)
    np.testing.assert_allclose(box, [10, 20, 50, 35.5])  # centre moved inside, then cropped
    tiny = project_box(jnp.array([5.0, 5.0, 5.0, 5.0]), bounds, min_size=2.0)
    np.testing.assert_allclose(tiny, [10, 20, 12, 22])
