"""The grain pipeline: batches, determinism, checkpointable position, host sharding, config."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from dig_jax.data import pipeline
from dig_jax.data.pipeline import (
    PipelineConfig,
    bad_item_count,
    make_dataset,
    resize_sample,
    resolve_source,
)
from dig_jax.data.samples import random_sample
from dig_jax.data.sources.dig_json import DigRowWriter, write_dig_json
from dig_jax.data.sources.procedural import procedural
from dig_jax.data.sources.record import Record

BASE = dict(sources=["procedural:12:5"], image_size=64, batch_size=3, prior_prob=0.5,
            multi_region_prob=0.5, worker_count=0, read_threads=0, shard=(0, 1))  # fmt: skip


def _take(ds, n):
    it = iter(ds)
    return [next(it) for _ in range(n)]


def _same(a, b):
    return all(np.array_equal(a[k], b[k]) for k in a)


def test_batches_have_the_contract_shapes():
    (batch,) = _take(make_dataset(BASE, "train"), 1)
    assert batch["image"].shape == (3, 64, 64, 3) and batch["image"].dtype == np.uint8
    for key in ("gesture", "distance", "prev_mask", "target", "region"):
        assert batch[key].shape == (3, 64, 64) and batch[key].dtype == np.uint8
    assert batch["gesture_kind"].dtype == np.int32 and batch["has_prev"].dtype == np.bool_
    assert batch["image_id"].shape == (3,)


def test_same_seed_same_batches_other_seed_other_batches():
    a = _take(make_dataset(BASE, "train", seed=1), 2)
    b = _take(make_dataset(BASE, "train", seed=1), 2)
    c = _take(make_dataset(BASE, "train", seed=2), 2)
    assert all(_same(x, y) for x, y in zip(a, b, strict=True))
    assert not all(_same(x, y) for x, y in zip(a, c, strict=True))


def test_iterator_state_resumes_the_data_position():
    it = iter(make_dataset(BASE, "train"))
    next(it)
    state = it.get_state()
    expected = [next(it), next(it)]
    resumed = iter(make_dataset(BASE, "train"))
    resumed.set_state(state)
    assert all(_same(x, next(resumed)) for x in expected)


def test_shards_are_disjoint_and_cover_the_records():
    cfg = dict(BASE, batch_size=1, image_size=96, sources=["procedural:10:3"])
    ids = [
        {str(b["image_id"][0]) for b in make_dataset(cfg, "eval", shard=(i, 3))} for i in range(3)
    ]
    everything = {str(b["image_id"][0]) for b in make_dataset(cfg, "eval")}
    assert not (ids[0] & ids[1]) and not (ids[0] & ids[2]) and not (ids[1] & ids[2])
    assert ids[0] | ids[1] | ids[2] == everything and len(everything) >= 8


def test_eval_split_is_one_ordered_epoch_with_partial_batch():
    cfg = dict(BASE, sources=[procedural(4, 5, size=64)], image_size=64, batch_size=2)
    batches = list(make_dataset(PipelineConfig(**cfg), "eval"))
    ids = [i for b in batches for i in b["image_id"]]
    assert ids == sorted(ids, key=lambda s: int(s.rsplit("_", 1)[1])) and len(ids) <= 5
    assert len(batches[-1]["image_id"]) in (1, 2)


def test_records_without_a_usable_region_are_skipped():
    image = np.zeros((64, 64, 3), np.uint8)
    tiny = np.zeros((1, 64, 64), np.uint8)
    tiny[0, :5, :5] = 1  # 25 px: no region of >= 300 px
    useless = [Record("toy", f"tiny{k}", image, (tiny, None)) for k in range(3)]
    scenes = procedural(4, 3, size=64)
    cfg = dict(BASE, sources=[useless[:2], scenes, useless[2:]], batch_size=1)
    ids = [str(b["image_id"][0]) for b in make_dataset(cfg, "eval")]
    assert ids and not any("tiny" in i for i in ids)


def test_config_validation():
    with pytest.raises(ValueError, match="prior_prob"):
        make_dataset(BASE, prior_prob=1.5)
    with pytest.raises(ValueError, match="unknown pipeline keys"):
        make_dataset(BASE, colour=True)
    with pytest.raises(ValueError, match="shard"):
        make_dataset(BASE, shard=(2, 2))
    with pytest.raises(ValueError, match="unknown source"):
        resolve_source("imagenet")
    with pytest.raises(ValueError, match="kinds"):
        PipelineConfig(kinds=(7,))
    with pytest.raises(ValueError, match="coarse_kinds: must be a subset"):
        PipelineConfig(coarse_kinds=(0, 5))
    with pytest.raises(ValueError, match="leak_kinds: must be a subset"):
        PipelineConfig(leak_kinds=(-1,))
    with pytest.raises(ValueError, match="coarse_over: expected finite 0 <= low <= high"):
        PipelineConfig(coarse_over=(1.0, 0.5))
    assert make_dataset(BASE, coarse_kinds=[0]) is not None  # lists from JSON configs are fine
    assert make_dataset(BASE, leak_kinds=[0]) is not None
    assert make_dataset(BASE, coarse_over=[0.3, 4.0]) is not None
    assert PipelineConfig(image_size=(48, 48)).size == (48, 48)
    with pytest.raises(ValueError, match="image_size: zoom crops are square"):
        PipelineConfig(image_size=(32, 48))


def test_resize_sample_keeps_void_and_recomputes_distance():
    rng = np.random.default_rng(0)
    s = {
        "image": rng.integers(0, 255, (40, 40, 3)).astype(np.uint8),
        "gesture": np.zeros((40, 40), np.uint8), "distance": np.zeros((40, 40), np.uint8),
        "prev_mask": np.zeros((40, 40), np.uint8),
        "target": rng.choice(np.array([0, 1, 255], np.uint8), (40, 40)),
        "region": np.zeros((40, 40), np.uint8), "void": np.ones((40, 40), np.uint8),
    }  # fmt: skip
    s["gesture"][20, 20] = 1
    out = resize_sample(s, (20, 20))
    assert set(np.unique(out["target"])) <= {0, 1, 255} and out["image"].shape == (20, 20, 3)
    assert out["void"].shape == (20, 20) and out["void"].all()
    assert out["distance"][out["gesture"] > 0].max() == 0 and out["distance"].max() > 5


def test_real_sources_flow_through(shared_data):
    cfg = dict(BASE, sources=["grabcut", "bsds500_regions/val"], image_size=64, batch_size=2)
    (batch,) = _take(make_dataset(cfg, "train"), 1)
    assert batch["image"].shape == (2, 64, 64, 3)


def test_one_worker_process_gives_the_same_batches():
    ds = make_dataset(BASE, "train", worker_count=1)
    it = iter(ds)
    try:
        got = [next(it), next(it)]
    finally:
        it.close()
    expected = _take(make_dataset(BASE, "train"), 2)
    assert all(_same(x, y) for x, y in zip(got, expected, strict=True))


_KILLED_PARENT = """
import multiprocessing, os, signal, sys
from dig_jax.data.pipeline import make_dataset
cfg = dict(sources=["procedural:12:5"], image_size=64, batch_size=3, worker_count=1,
           read_threads=0, shard=(0, 1))
it = iter(make_dataset(cfg, "train"))
next(it)
print(*[p.pid for p in multiprocessing.active_children()], flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")  # a zombie has exited; only its parent's reap is left


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
def test_a_worker_ends_when_its_parent_is_killed(tmp_path):
    """SIGKILL gives the parent no chance to close its grain worker: the worker ends itself."""
    out, err = tmp_path / "out", tmp_path / "err"
    with out.open("w") as stdout, err.open("w") as stderr:  # files: a live worker holds no pipe
        code = subprocess.run([sys.executable, "-c", _KILLED_PARENT], stdout=stdout,
                              stderr=stderr, timeout=240).returncode  # fmt: skip
    assert code == -signal.SIGKILL, err.read_text()[-2000:]
    workers = [int(p) for p in out.read_text().split()]
    assert workers, "the script saw no worker process"
    deadline = time.monotonic() + 30
    while any(map(_alive, workers)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(map(_alive, workers)), f"worker(s) {workers} outlived their killed parent"


def test_bad_dig_json_rows_are_skipped_and_counted(tmp_path):
    cv2.imwrite(str(tmp_path / "g.png"), np.zeros((40, 40, 3), np.uint8))
    rows = []
    for img_id in ("good", "no_gesture", "no_obj_id"):
        writer = DigRowWriter(img_id, (40, 40), "g.png")
        mask = np.zeros((40, 40), np.uint8)
        mask[5:30, 5:30] = 1
        writer.add_sample(obj_id=1, target=mask, annotation=mask, gesture=0, mode=1,
                          has_prior=False)  # fmt: skip
        rows.append(writer.row)
    del rows[1]["gesture"]  # listed, fails when loaded
    del rows[2]["obj_id"]  # cannot be listed
    write_dig_json(tmp_path / "d.json", rows)
    before = bad_item_count()
    cfg = dict(BASE, sources=[f"dig_json:{tmp_path / 'd.json'}:{tmp_path}"], batch_size=1)
    ids = [str(b["image_id"][0]) for b in make_dataset(cfg, "eval")]
    assert ids == ["good"] and bad_item_count() == before + 2


def test_value_errors_while_sampling_are_skipped_and_counted(monkeypatch):
    def flaky(loaded, rng, **kwargs):
        if loaded.image_id.endswith("_1"):
            raise ValueError("target: cannot simulate a gesture on this mask")
        return random_sample(loaded, rng, **kwargs)

    monkeypatch.setattr(pipeline, "random_sample", flaky)
    before = bad_item_count()
    cfg = dict(BASE, sources=[procedural(4, 3, size=64)], batch_size=1)
    ids = [str(b["image_id"][0]) for b in make_dataset(cfg, "eval")]
    assert "procedural/4_1" not in ids and len(ids) == 2 and bad_item_count() == before + 1


def test_training_crops_are_the_crops_predict_makes():
    """Training and use agree: a sample's zoom crop holds exactly what `predict` feeds the
    network for the same photo, gesture and previous mask."""
    import ml_collections

    from dig_jax.data.samples import random_sample
    from dig_jax.export import LoadedSegmenter
    from dig_jax.prompts import zoom_sample
    from dig_jax.train.config import base_config

    config = base_config("tiny")
    config.image_size = 64
    seg = LoadedSegmenter(ml_collections.ConfigDict(config.to_dict()), {})
    loaded = procedural(7, 3, size=(150, 210))[0].load()
    seen = 0
    for seed in range(8):
        sample = random_sample(loaded, np.random.default_rng(seed), prior_prob=0.7)
        prev = sample["prev_mask"] if sample["has_prev"] else None
        crop, box, shape = seg.prepare(sample["image"], sample["gesture"], prev)
        zoomed = zoom_sample(sample, 64)
        for key in ("image", "gesture", "distance", "prev_mask"):
            np.testing.assert_array_equal(zoomed[key], crop[key])
        np.testing.assert_allclose(zoomed["zoom_box"], [box.x0, box.y0, box.side])
        seen += bool(sample["has_prev"])
    assert shape == (150, 210) and 0 < seen < 8  # creations and refinements both checked


def test_training_zoom_jitters_and_flips_deterministically():
    from dig_jax.data.samples import random_sample
    from dig_jax.prompts import zoom_sample

    loaded = procedural(7, 1, size=(90, 130))[0].load()
    sample = random_sample(loaded, np.random.default_rng(0))
    a = zoom_sample(sample, 64, np.random.default_rng(5))
    b = zoom_sample(sample, 64, np.random.default_rng(5))
    for key in ("image", "gesture", "target", "zoom_box"):
        np.testing.assert_array_equal(a[key], b[key])
    boxes = {tuple(zoom_sample(sample, 64, np.random.default_rng(s))["zoom_box"]) for s in range(8)}
    assert len(boxes) > 1
