"""Speed work on the data path keeps the bytes: the same seed gives byte-identical samples.

The SHA-256 digests below were computed with the code before the speed changes
(`python tests/data/test_sample_bytes.py` prints them); a faster pipeline, sample maker or
gesture path must reproduce them exactly.
"""

from __future__ import annotations

import hashlib
import sys

import numpy as np
import pytest

from dig_jax.data.pipeline import SampleTransform, make_dataset
from dig_jax.data.samples import random_sample
from dig_jax.data.sources.procedural import procedural
from dig_jax.gestures import GestureKind, rasterize, simulate_creation
from dig_jax.paths import has_data

PIPELINE = dict(sources=["procedural:24:3"], image_size=128, batch_size=4, prior_prob=0.5,
                multi_region_prob=0.3, worker_count=0, read_threads=0, shard=(0, 1))  # fmt: skip
EXPECTED = {
    "pipeline_seed0": "0a32f54439edf1b37dcd858dbf62dc571ff53620af768005ea7be27b56f8967f",
    "pipeline_seed1": "688c82e432fbdc7988ea08db4c1956506215fb6940e81c991bb5070c418a7fc8",
    "samples_512": "d20c9cbe51e5285a02f2f0d09e44e3ed34ed14760cf66489f53f3163b1a3d566",
    "gestures_512": "38f2a50cb185319f4d4ac8796d7fecfceaa31e1aa8ea76347893e85c43a2209c",
    "real_512": "397819b85cc8323907b93d69b313e5899b84d70e372c521d7eefbf9a19cac84b",
}


def digest(values: list) -> str:
    """SHA-256 of arrays / scalars / strings in order (dict values by sorted key)."""
    h = hashlib.sha256()

    def feed(value) -> None:
        if isinstance(value, dict):
            for key in sorted(value):
                h.update(key.encode())
                feed(value[key])
        elif isinstance(value, (list, tuple)):
            for item in value:
                feed(item)
        elif isinstance(value, str):
            h.update(value.encode())
        else:
            arr = np.asarray(value)
            if arr.dtype.kind in "OUS":
                h.update("|".join(map(str, arr.ravel())).encode())
            else:
                h.update(str((arr.dtype.str, arr.shape)).encode())
                h.update(np.ascontiguousarray(arr).tobytes())

    feed(values)
    return h.hexdigest()


def pipeline_digest(seed: int) -> str:
    """Three batches of the on-the-fly pipeline (procedural scenes, zoom crops at 128²)."""
    it = iter(make_dataset(PIPELINE, "train", seed=seed))
    return digest([next(it) for _ in range(3)])


def samples_digest(records, seed: int, size: int = 512) -> str:
    """`random_sample` + zoom crop (`SampleTransform`) of each record, one rng per record."""
    transform = SampleTransform((size, size), 0.5, 0.3, tuple(range(5)), 640, augment=True)
    out = []
    for i, record in enumerate(records):
        rng = np.random.default_rng([seed, i])
        loaded = record.load()
        out.append(random_sample(loaded, rng, prior_prob=0.5, multi_region_prob=0.3))
        out.append(transform(record, np.random.default_rng([seed, i, 1])))
    return digest([s for s in out if s is not None])


def gestures_digest(records, seed: int) -> str:
    """Every kind simulated and rasterised on each record's instances."""
    out = []
    rng = np.random.default_rng(seed)
    for record in records:
        loaded = record.load()
        for mask in loaded.instances:
            if mask.sum() < 300:
                continue
            for kind in GestureKind:
                g = simulate_creation(kind, mask > 0, rng)
                out += [g.points, rasterize(g, mask.shape)]
    return digest(out)


def compute() -> dict[str, str]:
    values = {f"pipeline_seed{s}": pipeline_digest(s) for s in (0, 1)}
    scenes = procedural(7, 6, size=(512, 512))
    values["samples_512"] = samples_digest(scenes, 0)
    values["gestures_512"] = gestures_digest(scenes[:3], 0)
    if has_data("coco_mval"):
        from dig_jax.data.pipeline import resolve_source

        values["real_512"] = samples_digest(resolve_source("coco_mval")[:6], 1)
    return values


@pytest.mark.parametrize("seed", [0, 1])
def test_pipeline_batches_are_byte_identical(seed):
    assert pipeline_digest(seed) == EXPECTED[f"pipeline_seed{seed}"]


def test_samples_at_512_are_byte_identical():
    scenes = procedural(7, 6, size=(512, 512))
    assert samples_digest(scenes, 0) == EXPECTED["samples_512"]


def test_gestures_are_byte_identical():
    assert gestures_digest(procedural(7, 6, size=(512, 512))[:3], 0) == EXPECTED["gestures_512"]


@pytest.mark.shared_data
def test_real_photo_samples_are_byte_identical(shared_data):
    if not (shared_data / "coco_mval").is_dir():
        pytest.skip("coco_mval not found")
    from dig_jax.data.pipeline import resolve_source

    assert samples_digest(resolve_source("coco_mval")[:6], 1) == EXPECTED["real_512"]


if __name__ == "__main__":
    for key, value in compute().items():
        print(f'    "{key}": "{value}",')
    sys.exit(0)
