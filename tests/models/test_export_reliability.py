"""Segmenter files and `predict` inputs (tests/reliability_cases.md, section "export/predict"):
truncated or foreign files name the file, NaN never gets into or out of a file, inputs are
read as users mean them or refused."""

from __future__ import annotations

import json
import struct

import jax
import numpy as np
import pytest
from flax import serialization
from tiny_models import tiny_variables

import dig_jax
from dig_jax.export import MAGIC, save_segmenter


def raw_file(path, config: dict, variables: dict) -> None:
    """Write the file format without `save_segmenter`'s checks (as a buggy tool might)."""
    header = json.dumps(config).encode()
    payload = serialization.msgpack_serialize(jax.device_get(variables))
    path.write_bytes(MAGIC + struct.pack("<Q", len(header)) + header + payload)


@pytest.fixture(scope="module")
def good_file(tmp_path_factory):
    config, variables = tiny_variables()
    return save_segmenter(tmp_path_factory.mktemp("seg") / "m.digjax", variables, config)


def test_truncated_files_name_the_file(good_file, tmp_path):
    """Case E1: a .digjax file cut short (copy interrupted, disk full)."""
    data = good_file.read_bytes()
    for cut in (len(MAGIC) + 3, len(MAGIC) + 20, len(data) // 2, len(data) - 7):
        path = tmp_path / f"cut{cut}.digjax"
        path.write_bytes(data[:cut])
        with pytest.raises(ValueError, match=rf"{path}.*(truncated|corrupt)"):
            dig_jax.load_segmenter(path)


def test_foreign_files_name_the_file(tmp_path):
    """Case E2: right magic, but a header or weights from something else."""
    config, variables = tiny_variables()
    bad_json = tmp_path / "json.digjax"
    bad_json.write_bytes(MAGIC + struct.pack("<Q", 3) + b"{no" + b"weights")
    with pytest.raises(ValueError, match=rf"{bad_json}: the config header is not a JSON"):
        dig_jax.load_segmenter(bad_json)
    no_model = tmp_path / "nomodel.digjax"
    raw_file(no_model, {"image_size": 32}, variables)
    with pytest.raises(ValueError, match=rf"{no_model}: the config does not describe"):
        dig_jax.load_segmenter(no_model)
    other = tmp_path / "other.digjax"
    raw_file(other, config, tiny_variables(head_width=8)[1])  # weights of another model
    with pytest.raises(ValueError, match=rf"{other}: the weights do not fit the model"):
        dig_jax.load_segmenter(other)
    not_vars = tmp_path / "list.digjax"
    header = json.dumps(config).encode()
    payload = serialization.msgpack_serialize([1, 2, 3])
    not_vars.write_bytes(MAGIC + struct.pack("<Q", len(header)) + header + payload)
    with pytest.raises(ValueError, match=rf"{not_vars}: the weights are not a Flax variables"):
        dig_jax.load_segmenter(not_vars)


def test_nan_weights_are_never_written_and_never_loaded(tmp_path):
    """Case E3: a diverged run's NaN weights."""
    config, variables = tiny_variables()
    kernel = variables["params"]["FusionHead_0"]["mask_logits"]["kernel"]
    variables["params"]["FusionHead_0"]["mask_logits"]["kernel"] = kernel * np.nan
    with pytest.raises(ValueError, match=r"refusing to export .*NaN"):
        save_segmenter(tmp_path / "nan.digjax", variables, config)
    assert not (tmp_path / "nan.digjax").exists()
    raw_file(tmp_path / "raw.digjax", config, variables)
    with pytest.raises(ValueError, match=r"raw\.digjax: the weights hold NaN or Inf"):
        dig_jax.load_segmenter(tmp_path / "raw.digjax")


def test_nan_predictions_raise(tmp_path):
    """Case E4: finite weights that still produce NaN (negative BatchNorm variances)."""
    config, variables = tiny_variables(var=-1.0)
    seg = dig_jax.load_segmenter(save_segmenter(tmp_path / "neg.digjax", variables, config))
    image = np.full((40, 40, 3), 100, np.uint8)
    gesture = np.zeros((40, 40), np.uint8)
    gesture[15:25, 15:25] = 1
    with pytest.raises(FloatingPointError, match="NaN/Inf logits"):
        seg.predict(image, gesture)


def test_predict_reads_or_refuses_users_inputs(good_file):
    """Cases P1-P4: 0/255 and bool masks, lists, uint16 / float images, NaN maps."""
    seg = dig_jax.load_segmenter(good_file)
    image = np.random.default_rng(1).integers(0, 256, (40, 40, 3), dtype=np.uint8)
    gesture = np.zeros((40, 40), np.uint8)
    gesture[12:20, 12:28] = 1
    prev = np.zeros((40, 40), np.uint8)
    prev[10:30, 10:30] = 1
    a = seg.predict(image, gesture, prev_mask=prev)
    np.testing.assert_array_equal(a, seg.predict(image, gesture * 255, prev_mask=prev * 255))
    np.testing.assert_array_equal(a, seg.predict(image, gesture > 0, prev_mask=prev > 0))
    np.testing.assert_array_equal(a, seg.predict(image, gesture.tolist(), prev.tolist()))
    logits_prev = seg.predict_logits(image, gesture, prev_mask=prev * 255)
    assert not np.array_equal(logits_prev, seg.predict_logits(image, gesture))  # prev is read
    for bad in (image.astype(np.uint16) * 257, image / 255.0):
        with pytest.raises(ValueError, match="image must be uint8"):
            seg.predict(bad, gesture)
    with pytest.raises(ValueError, match="gesture_map holds NaN"):
        seg.predict(image, np.where(gesture > 0, np.nan, 0.0))


def test_flipped_bits_in_the_weights_fail_the_checksum(good_file, tmp_path):
    """Case E5: a flipped mantissa bit, or a bit halfway through the weights, loaded with
    changed weights (the file had no checksum)."""
    data = good_file.read_bytes()
    (length,) = struct.unpack("<Q", data[len(MAGIC) : len(MAGIC) + 8])
    header = json.loads(data[len(MAGIC) + 8 : len(MAGIC) + 8 + length])
    assert len(header["sha256"]) == 64
    weights = len(MAGIC) + 8 + length
    for where in (len(data) - 2, weights + (len(data) - weights) // 2):
        flipped = bytearray(data)
        flipped[where] ^= 0x01
        path = tmp_path / f"flip{where}.digjax"
        path.write_bytes(bytes(flipped))
        with pytest.raises(ValueError, match=rf"{path}: the config and weights do not match"):
            dig_jax.load_segmenter(path)
    edited = tmp_path / "edited.digjax"  # a config value changed in place (same length)
    edited.write_bytes(data.replace(b'"image_size": 32', b'"image_size": 96', 1))
    assert edited.read_bytes() != data
    with pytest.raises(ValueError, match=rf"{edited}: the config and weights do not match"):
        dig_jax.load_segmenter(edited)


def test_files_without_a_checksum_still_load(tmp_path):
    """Files written before the checksum existed (the shipped checkpoints) load unchecked."""
    config, variables = tiny_variables()
    raw_file(tmp_path / "old.digjax", config, variables)
    assert dig_jax.load_segmenter(tmp_path / "old.digjax").size == 32


def test_shipped_checkpoints_still_load():
    from pathlib import Path

    shipped = sorted((Path(__file__).resolve().parents[2] / "checkpoints").glob("*.digjax"))
    if not shipped:
        pytest.skip("no shipped checkpoints")
    for path in shipped:  # written before checksums existed, or with one
        assert dig_jax.load_segmenter(path).size >= 32, path


def test_an_extra_unused_parameter_is_refused(tmp_path):
    """Case E6: a .digjax with an extra, unused parameter was accepted."""
    config, variables = tiny_variables()
    variables["params"]["FusionHead_0"]["spare"] = {"kernel": np.ones((3, 3), np.float32)}
    save_segmenter(tmp_path / "extra.digjax", variables, config)
    with pytest.raises(ValueError, match=r"extra\.digjax: .*model does not use: "
                                         r"params/FusionHead_0/spare/kernel"):  # fmt: skip
        dig_jax.load_segmenter(tmp_path / "extra.digjax")


@pytest.mark.parametrize("size", [0, -32, 40, 32.0, True, "32"])
def test_image_size_that_is_not_a_working_size_names_the_file(tmp_path, size):
    """Case E7: image_size 0 gave "Cannot concatenate...", naming no file."""
    config, variables = tiny_variables()
    save_segmenter(tmp_path / "size.digjax", variables, {**config, "image_size": size})
    with pytest.raises(ValueError, match=r"size\.digjax: .*image_size must be a positive multi"):
        dig_jax.load_segmenter(tmp_path / "size.digjax")


def test_predict_reads_int8_marks_and_refuses_context_7(good_file):
    """Cases P5, P6 through `predict`."""
    segmenter = dig_jax.load_segmenter(good_file)
    image = np.full((40, 40, 3), 120, np.uint8)
    mark = np.zeros((40, 40), np.int8)
    mark[10:20, 10:20] = -1
    as_one = segmenter.predict_logits(image, (mark != 0).astype(np.uint8))
    np.testing.assert_array_equal(segmenter.predict_logits(image, mark), as_one)
    with pytest.raises(ValueError, match=r"context must be Context.ADD \(1\) or .*got \[7\]"):
        segmenter.predict(image, mark, context=7)
