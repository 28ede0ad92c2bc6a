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
    built = dig_json(tmp_path / "b/dig.json", tmp_path / "b/images")
    entries = tfds_entries(tmp_path / "tfds")
    assert len(entries) == sum(not e.multi for e in built) >= 2
    pairs = list(zip(entries, [e for e in built if not e.multi], strict=True))
    variants = [(entry.multi_variant(), want.multi_variant()) for entry, want in pairs
                if want.has_multi]  # fmt: skip
    assert variants and all(e.has_multi == w.has_multi for e, w in pairs)
    for entry, want in pairs + variants:
        got, want = entry.load(), want.load()
        assert list(got) == list(want)
        for key in want:
            assert np.array_equal(got[key], want[key]), key
    cfg = dict(sources=[f"tfds:{tmp_path / 'tfds'}"], image_size=32, batch_size=2, shard=(0, 1))
    batch = next(iter(make_dataset(cfg, "eval")))
    assert batch["image"].shape == (2, 32, 32, 3)
    with pytest.raises(ValueError, match="build_dir"):
        DigSamples(build_dir=tmp_path, data_dir=tmp_path / "t2").download_and_prepare()


@pytest.mark.parametrize("p", [0.0, 1.0])
def test_dataaug_probability_is_honoured_on_tfds(tmp_path, p):
    argv = ["--source", "procedural:4:2", "--image-size", "64", "--kinds", "0", "--out",
            str(tmp_path / "b"), "--tfds-dir", str(tmp_path / "tfds")]  # fmt: skip
    assert main(argv) == 0
    entries = tfds_entries(tmp_path / "tfds")
    n_multi = sum(e.has_multi for e in entries)
    n_refine = sum(bool(e.load()["has_prev"]) for e in entries)
    assert n_multi > 0
    cfg = dict(sources=[f"tfds:{tmp_path / 'tfds'}"], image_size=32, batch_size=1,
               multi_region_prob=p, num_epochs=1, seed=4, shard=(0, 1))  # fmt: skip
    batches = list(make_dataset(cfg, "train"))
    assert len(batches) == len(entries)  # every sample once: variants are not extra samples
    has_prev = sum(int(b["has_prev"][0]) for b in batches)
    assert has_prev - n_refine == (n_multi if p == 1.0 else 0)
