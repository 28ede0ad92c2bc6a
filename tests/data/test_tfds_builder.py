"""The TFDS ArrayRecord builder reproduces the DIG JSON samples and feeds the pipeline."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("importlib_resources", reason="tfds builders need importlib_resources")

from dig_jax.data.build import main
from dig_jax.data.pipeline import make_dataset
from dig_jax.data.sources.dig_json import dig_json
from dig_jax.data.tfds_builder import DigSamples, tfds_entries


def test_builder_round_trip_and_pipeline(tmp_path):
    argv = ["--source", "procedural:3:4", "--image-size", "64", "--kinds", "0", "--out",
            str(tmp_path / "b"), "--tfds-dir", str(tmp_path / "tfds")]  # fmt: skip
    assert main(argv) == 0
    expected = [e.load() for e in dig_json(tmp_path / "b/dig.json", tmp_path / "b/images")]
    entries = tfds_entries(tmp_path / "tfds")
    assert len(entries) == len(expected) >= 2
    for entry, want in zip(entries, expected, strict=True):
        got = entry.load()
        assert list(got) == list(want)
        for key in want:
            assert np.array_equal(got[key], want[key]), key
    cfg = dict(sources=[f"tfds:{tmp_path / 'tfds'}"], image_size=32, batch_size=2, shard=(0, 1))
    batch = next(iter(make_dataset(cfg, "eval")))
    assert batch["image"].shape == (2, 32, 32, 3)
    with pytest.raises(ValueError, match="build_dir"):
        DigSamples(build_dir=tmp_path, data_dir=tmp_path / "t2").download_and_prepare()
