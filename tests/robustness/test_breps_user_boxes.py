"""Real-user boxes in the BREPS folder layout, on a synthetic folder with known answers."""

from __future__ import annotations

import cv2
import jax.numpy as jnp
import numpy as np
import pytest

from dig_jax.robustness.breps import soft_box_fill
from dig_jax.robustness.breps.prepare import letterbox
from dig_jax.robustness.breps.user_boxes import evaluate_user_boxes, scan_user_boxes


def encode_fill(box, image):
    return jnp.concatenate([image, soft_box_fill(box, image.shape[:2], 0.05)[..., None]], axis=-1)


def box_is_mask(x):
    return 50.0 * (x[..., 3] - 0.5)


def rect(shape, x1, y1, x2, y2, value=255):
    m = np.zeros(shape, np.uint8)
    m[y1:y2, x1:x2] = value
    return m


@pytest.fixture
def folder(tmp_path):
    for d in ("images", "masks", "user_masks"):
        (tmp_path / d).mkdir()
    shape = (32, 40)
    cv2.imwrite(str(tmp_path / "images" / "cat.jpg"), np.full((*shape, 3), 90, np.uint8))
    gt = rect(shape, 10, 8, 30, 24)  # 20 x 16 = 320 px
    gt[8, 10:30] = 128  # void row
    cv2.imwrite(str(tmp_path / "masks" / "cat.png"), gt)
    cv2.imwrite(str(tmp_path / "user_masks" / "cat_1_u1.png"), rect(shape, 10, 8, 30, 24))
    cv2.imwrite(str(tmp_path / "user_masks" / "cat_1_u2.png"), rect(shape, 10, 9, 30, 24, 1))
    cv2.imwrite(str(tmp_path / "user_masks" / "cat_1_u3.png"), rect(shape, 0, 0, 40, 32))
    cv2.imwrite(str(tmp_path / "user_masks" / "cat_1_u4.png"), np.zeros(shape, np.uint8))
    cv2.imwrite(str(tmp_path / "masks" / "dog.png"), gt)  # no image: skipped
    # A second object boxed by two of the same users (u1 tight, u2 off by half the object).
    cv2.imwrite(str(tmp_path / "images" / "bird.png"), np.full((*shape, 3), 40, np.uint8))
    cv2.imwrite(str(tmp_path / "masks" / "bird.png"), rect(shape, 10, 8, 30, 24))
    cv2.imwrite(str(tmp_path / "user_masks" / "bird_1_u1.png"), rect(shape, 10, 8, 30, 24))
    cv2.imwrite(str(tmp_path / "user_masks" / "bird_1_u2.png"), rect(shape, 0, 0, 20, 16))
    return tmp_path


def test_scan_reads_boxes_and_reports_problems(folder):
    instances, problems = scan_user_boxes(folder)
    assert [i.stem for i in instances] == ["bird", "cat"]
    np.testing.assert_array_equal(
        instances[1].boxes, [[10, 8, 30, 24], [10, 9, 30, 24], [0, 0, 40, 32]]
    )
    assert instances[1].user_ids == ("u1", "u2", "u3")  # u4's mask is empty: no box, no id
    assert instances[0].user_ids == ("u1", "u2")
    assert any("dog: no image" in p for p in problems)
    assert any("cat_1_u4.png is empty" in p for p in problems)


def test_evaluate_known_answer(folder):
    out = evaluate_user_boxes(box_is_mask, encode_fill, folder, progress=False)
    # GT object = rows 9..23 (row 8 is void) x cols 10..29 = 300 px.
    cat = [1.0, 1.0, 300 / (32 * 40 - 20)]
    # bird: u2's box (0, 0, 20, 16) meets the 320-px object in 10 x 8 px: 80 / 560.
    bird = [1.0, 80 / 560]
    np.testing.assert_allclose(out["per_instance"]["cat"], cat, atol=1e-6)
    np.testing.assert_allclose(out["per_instance"]["bird"], bird, atol=1e-6)
    per_user = {"u1": 1.0, "u2": (1.0 + 80 / 560) / 2, "u3": cat[2]}
    assert out["per_user"] == pytest.approx(per_user, abs=1e-6)
    # mean ± std over users of each user's mean IoU; pooled over all five boxes as well
    assert out["mean_iou"] == pytest.approx(np.mean(list(per_user.values())), abs=1e-6)
    assert out["std_iou"] == pytest.approx(np.std(list(per_user.values())), abs=1e-6)
    assert out["pooled_mean_iou"] == pytest.approx(np.mean(cat + bird), abs=1e-6)
    assert out["pooled_std_iou"] == pytest.approx(np.std(cat + bird), abs=1e-6)
    assert out["n_users"] == 3 and out["n_boxes"] == 5 and out["n_instances"] == 2
    assert len(out["skipped"]) == 2


def test_letterbox_keeps_boxes_on_the_photo():
    image = np.zeros((30, 60, 3), np.uint8)
    gt = rect((30, 60), 10, 5, 50, 25, 1)
    lb = letterbox(image, gt, 32)
    assert lb.image.shape == (32, 32, 3) and lb.gt.shape == (32, 32)
    np.testing.assert_allclose(lb.bounds, [32, 16])
    assert (lb.gt[16:] == 255).all() and set(np.unique(lb.gt[:16])) <= {0, 1}
    with pytest.raises(ValueError, match="gt must have shape"):
        letterbox(image, gt[:-1], 32)


def test_missing_folders_raise(tmp_path):
    with pytest.raises(ValueError, match="lacks folder"):
        scan_user_boxes(tmp_path)


def test_gt_saved_as_0_1_reads_as_the_object(tmp_path):
    """Case D8 for BREPS user-box folders: a GT saved as {0,1} read as empty."""
    import cv2

    from dig_jax.robustness.breps.user_boxes import read_gt

    mask = np.zeros((10, 12), np.uint8)
    mask[2:6, 3:9] = 1
    cv2.imwrite(str(tmp_path / "gt.png"), mask)
    np.testing.assert_array_equal(read_gt(tmp_path / "gt.png"), mask)
    raw = mask * np.uint8(255)
    raw[0, 0] = 128  # GrabCut's void band keeps its meaning in a 0/255 mask
    cv2.imwrite(str(tmp_path / "gt.png"), raw)
    gt = read_gt(tmp_path / "gt.png")
    assert gt[0, 0] == 255 and gt[2:6, 3:9].all() and gt.sum() == 255 + 24
