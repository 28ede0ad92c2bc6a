"""DIG-JSON ground truth as the paper scores it, on a hand-made refinement sample with two error
components of which only one is targeted: local GT = the prior with that one corrected and the
other left as it was (eq. 6); global GT = the whole region, from `obj_gt` or the source
annotations, else refused."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from dig_jax.data.priors import Correction, refinement_targets
from dig_jax.data.sources.dig_json import DigRowWriter, dig_json, write_dig_json
from dig_jax.evaluation.scores import GlobalTruthMissingError, global_truth, score_sample
from dig_jax.gestures.types import Context, GestureKind

H, W = 60, 80


def _masks():
    region = np.zeros((H, W), bool)
    region[10:50, 10:60] = True  # 2000 px
    missing = np.zeros((H, W), bool)
    missing[10:20, 10:30] = True  # 200 px of the region the prior lacks: the targeted error
    extra = np.zeros((H, W), bool)
    extra[50:60, 60:80] = True  # 200 px outside the region the prior holds: untargeted
    prior = (region & ~missing) | extra
    return region, missing, extra, prior


@pytest.fixture
def files(tmp_path):
    """(write(obj_gt, void) -> entries): a one-sample DIG JSON file, the photo, and a source
    annotation folder holding the region as instance 7."""
    region, missing, _, prior = _masks()
    cv2.imwrite(str(tmp_path / "img.png"), np.zeros((H, W, 3), np.uint8))
    (tmp_path / "gt").mkdir()
    cv2.imwrite(str(tmp_path / "gt" / "img.png"), (region * 7).astype(np.uint8))

    def write(obj_gt: bool = True, void: np.ndarray | None = None, gt_dir=None):
        correction = Correction(missing.astype(np.uint8), Context.ADD, int(missing.sum()))
        _, target = refinement_targets(prior, region, correction, void)
        writer = DigRowWriter("img", (H, W), file_name="img.png")
        writer.set_object(7, region, prior)
        if void is not None:
            writer.set_void(void)
        writer.add_sample(obj_id=7, target=target, annotation=missing, gesture=GestureKind.CLICK,
                          mode=Context.ADD, has_prior=True, corr_id=0)  # fmt: skip
        if not obj_gt:
            del writer.row["obj_gt"]
        write_dig_json(tmp_path / "dig.json", [writer.row])
        return dig_json(tmp_path / "dig.json", tmp_path, gt_dir=gt_dir)

    return write


def test_local_gt_keeps_the_untargeted_error(files):
    region, missing, extra, prior = _masks()
    (entry,) = files()
    sample = entry.load()
    np.testing.assert_array_equal(sample["local"], prior | missing)  # the extra stays
    np.testing.assert_array_equal(sample["region"], region)
    assert not sample["void"].any() and "has_region" not in sample  # the contract's keys
    fix_targeted = score_sample((prior | missing).astype(np.uint8), sample)
    assert fix_targeted["rice_local"][0] == pytest.approx(1.0)
    # fixing both errors: IoU_local = |region| / |region ∪ extra|, below 1 as it should be
    fix_both = score_sample(region.astype(np.uint8), sample)
    alpha = region.sum() / (region | extra).sum()
    assert fix_both["iou_local"][0] == pytest.approx(alpha)
    assert fix_both["rice_global"][0] == pytest.approx(1.0)


def test_photo_void_stays_void_and_is_not_an_error(files, tmp_path):
    _, missing, _, prior = _masks()
    void = np.zeros((H, W), bool)
    void[0:5, 0:5] = True
    (entry,) = files(void=void)
    sample = entry.load()
    np.testing.assert_array_equal(sample["void"] > 0, void)
    np.testing.assert_array_equal(sample["local"][~void], (prior | missing)[~void])
    rows = json.loads((tmp_path / "dig.json").read_text())
    del rows[0]["void"]  # no `void` field: where the prior is right, a void pixel is the photo's
    write_dig_json(tmp_path / "dig.json", rows)
    (entry,) = dig_json(tmp_path / "dig.json", tmp_path)
    np.testing.assert_array_equal(entry.load()["void"] > 0, void)


def test_global_gt_from_source_annotations_or_refused(files, tmp_path):
    region, missing, _, prior = _masks()
    (entry,) = files(obj_gt=False, gt_dir=tmp_path / "gt")
    sample = entry.load()
    np.testing.assert_array_equal(sample["region"], region)
    (entry,) = files(obj_gt=False)
    sample = entry.load()
    assert not bool(sample["has_region"])
    np.testing.assert_array_equal(sample["local"], prior | missing)  # local GT still exact
    with pytest.raises(GlobalTruthMissingError, match="no global ground truth"):
        global_truth(sample)
    scores = score_sample((prior | missing).astype(np.uint8), sample)
    assert "rice_global" not in scores and scores["rice_local"][0] == pytest.approx(1.0)


def test_release_rows_without_dig_jax_fields_load(files, tmp_path):
    """A row as DIG releases it (no obj_gt, no void, no file_name) still loads locally."""
    files()
    rows = json.loads((tmp_path / "dig.json").read_text())
    for key in ("obj_gt", "file_name"):
        rows[0].pop(key, None)
    write_dig_json(tmp_path / "dig.json", rows)
    (entry,) = dig_json(tmp_path / "dig.json", tmp_path)
    assert not bool(entry.load()["has_region"])


def test_source_spec_names_the_source_annotations(files, tmp_path):
    from dig_jax.data.pipeline import resolve_source

    region, _, _, _ = _masks()
    files(obj_gt=False)
    spec = f"dig_json:{tmp_path / 'dig.json'}:{tmp_path}"
    (entry,) = resolve_source(f"{spec}:{tmp_path / 'gt'}")
    np.testing.assert_array_equal(entry.load()["region"], region)
    (entry,) = resolve_source(spec)
    assert not bool(entry.load()["has_region"])


def test_pipeline_batches_carry_the_unknown_global_gt(files, tmp_path):
    from dig_jax.data.pipeline import make_dataset
    from dig_jax.train.input_pipeline import device_batch

    files(obj_gt=False)
    spec = f"dig_json:{tmp_path / 'dig.json'}:{tmp_path}"
    cfg = dict(sources=[spec], image_size=32, batch_size=1, shard=(0, 1), max_side=None)
    batch = next(iter(make_dataset(cfg, "eval")))
    assert device_batch(batch)["has_region"].tolist() == [False]
