"""Learned clickability model: CSV of recorded clicks → targets → KL training recovers a known
map; save/load; target maps; bad inputs."""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

import cv2
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dig_jax.robustness.rclicks.maps import map_function, normalize, uniform_map
from dig_jax.robustness.rclicks.model import (
    init_clickability,
    load_clickability,
    save_clickability,
)
from dig_jax.robustness.rclicks.sampling import sample_clicks
from dig_jax.robustness.rclicks.train import (
    CSV_COLUMNS,
    click_sigma,
    examples_from_clicks,
    kl_divergence,
    read_clicks_csv,
    target_map,
    train_clickability,
)

N = 48  # px, side of the synthetic photos


def scene(rng: np.random.Generator):
    """A photo lit from one random side, a rectangular error, and the known map: people
    click bright pixels, p ∝ error · exp(6 · brightness)."""
    yy, xx = np.mgrid[:N, :N] / (N - 1)
    light = [xx, 1 - xx, yy, 1 - yy][rng.integers(4)]
    noise = rng.normal(0, 6, (N, N, 3))
    image = np.clip(light[..., None] * 200 + 30 + noise, 0, 255).astype(np.uint8)
    error = np.zeros((N, N), bool)
    y0, x0 = rng.integers(0, N // 2, 2)
    h, w = rng.integers(N // 4, N // 2, 2)
    error[y0 : y0 + h, x0 : x0 + w] = True
    return image, error, normalize(error * np.exp(6 * light))


def write_csv(path: Path, rows: list[dict]) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=[*CSV_COLUMNS, "model_type"])
        writer.writeheader()
        writer.writerows(rows)
    return path


def kl(p: np.ndarray, q: np.ndarray) -> float:
    keep = p > 0
    return float(np.sum(p[keep] * (np.log(p[keep]) - np.log(np.maximum(q[keep], 1e-12)))))


def test_training_on_recorded_clicks_recovers_a_known_map(tmp_path):
    rng = np.random.default_rng(0)
    scenes, rows = {}, []
    for k in range(48):
        image, error, known = scene(rng)
        scenes[f"img{k}"] = (image, error)
        pts, _ = sample_clicks(jax.random.key(k), known, n=30)
        for x, y in np.asarray(pts):
            rows.append({"dataset": "toy", "full_stem": f"img{k}", "image_stem": f"img{k}",
                         "object_stem": "", "click_type": "first", "x": int(x), "y": int(y),
                         "w": N, "h": N, "device": "pc", "model_type": ""})  # fmt: skip
    recorded = read_clicks_csv(write_csv(tmp_path / "clicks.csv", rows))
    assert len(recorded) == 48 and recorded[0].xs.shape == (30,)
    examples, skipped = examples_from_clicks(recorded, lambda r: scenes.get(r.image_stem))
    assert len(examples) == 48 and not skipped
    model, losses = train_clickability(
        examples, jax.random.key(0), steps=200, batch_size=16, lr=1e-2, size=32, features=(8,)
    )
    assert np.isfinite(losses).all() and losses[-20:].mean() < losses[:20].mean()
    learned, uniform = [], []
    for _ in range(12):
        image, error, known = scene(rng)
        learned.append(kl(known, model.predict_map(image, error, error)))
        uniform.append(kl(known, uniform_map(error)))
    assert np.mean(learned) < 0.4 * np.mean(uniform)
    path = save_clickability(tmp_path / "cm.msgpack", model)
    again = load_clickability(path)
    assert (
        again.predict_map(image, error, error).tobytes()
        == model.predict_map(image, error, error).tobytes()
    )
    name, fn = map_function(f"cm:{path}")  # what `python -m dig_jax.rclicks --map FILE` uses
    assert name == "cm:cm" and fn(image, error, error).sum() == pytest.approx(1.0, abs=1e-5)


def test_predict_map_is_restricted_to_the_error():
    model = init_clickability(jax.random.key(1), size=16, features=(4,))
    image, error, _ = scene(np.random.default_rng(2))
    m = model.predict_map(image, error, error)
    assert m.sum() == pytest.approx(1.0, abs=1e-5) and not m[~error].any()
    assert not model.predict_map(image, error, np.zeros_like(error)).any()


def test_target_map_gaussians_times_blurred_error():
    error = np.zeros((400, 600), bool)
    error[100:300, 100:500] = True
    t = target_map(np.array([200.0, 400.0]), np.array([150.0, 250.0]), error)
    assert t.sum() == pytest.approx(1.0, abs=1e-5)
    assert np.unravel_index(np.argmax(t), t.shape) in {(150, 200), (250, 400)}
    assert click_sigma((1080, 1920)) == pytest.approx(5.0)
    assert not target_map(np.array([5.0]), np.array([5.0]), np.zeros((20, 20), bool)).any()
    with pytest.raises(ValueError, match="xs"):
        target_map(np.array([1.0, np.nan]), np.array([1.0, 2.0]), error)


def test_kl_divergence_is_zero_at_the_target():
    target = jnp.asarray(np.random.default_rng(0).random((2, 4, 4)), jnp.float32)
    target = target / target.sum((1, 2), keepdims=True)
    assert float(kl_divergence(jnp.log(target), target)) == pytest.approx(0.0, abs=1e-5)
    assert float(kl_divergence(jnp.zeros((2, 4, 4)), target)) > 0
    assert float(kl_divergence(jnp.zeros((1, 4, 4)), jnp.zeros((1, 4, 4)))) == 0.0


def test_fn_fp_clicks_need_their_previous_masks(tmp_path):
    gt = np.zeros((20, 30), np.uint8)
    gt[5:15, 5:25] = 1
    prev = np.zeros_like(gt)
    prev[5:15, 5:15] = 1
    prev[0:3, 0:3] = 1
    cv2.imwrite(str(tmp_path / "a_fn.png"), prev * 255)
    cv2.imwrite(str(tmp_path / "a_fp.png"), prev * 255)
    base = {"dataset": "toy", "image_stem": "a", "object_stem": "1", "w": 60, "h": 40,
            "device": "mobile", "model_type": "ritm"}  # fmt: skip
    rows = [
        {**base, "full_stem": "a_fn", "click_type": "fn", "x": 40, "y": 20},
        {**base, "full_stem": "a_fp", "click_type": "fp", "x": 2, "y": 2},
        {**base, "full_stem": "a_gone", "click_type": "fn", "x": 2, "y": 2},
        {**base, "full_stem": "b", "image_stem": "b", "click_type": "first", "x": 2, "y": 2},
    ]
    recorded = read_clicks_csv(write_csv(tmp_path / "c.csv", rows))
    image = np.zeros((20, 30, 3), np.uint8)
    lookup = lambda r: (image, gt) if r.image_stem == "a" else None
    examples, skipped = examples_from_clicks(recorded, lookup, tmp_path)
    assert [s for s, _ in skipped] == ["a_gone", "b"]
    fn, fp = examples
    assert fn.error.sum() == 100 and fp.error.sum() == 9
    assert recorded[0].scaled((20, 30))[0].tolist() == [20.0]  # clicks rescaled to the photo


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda r: {k: v for k, v in r.items() if k != "device"}, "missing column"),
        (lambda r: {**r, "click_type": "double"}, "click_type"),
        (lambda r: {**r, "x": "left"}, "x, y, w, h"),
        (lambda r: {**r, "w": 0}, "w, h"),
    ],
)
def test_bad_csv_raises_naming_the_problem(tmp_path, edit, match):
    row = {"dataset": "toy", "full_stem": "a", "image_stem": "a", "object_stem": "",
           "click_type": "first", "x": 1, "y": 1, "w": 10, "h": 10, "device": "pc"}  # fmt: skip
    bad = edit(row)
    path = tmp_path / "bad.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(bad))
        writer.writeheader()
        writer.writerow(bad)
    with pytest.raises(ValueError, match=match):
        read_clicks_csv(path)


def test_mismatched_sizes_and_bad_model_settings():
    with pytest.raises(ValueError, match="size"):
        init_clickability(jax.random.key(0), size=30, features=(8, 16, 32))
    with pytest.raises(ValueError, match="examples"):
        train_clickability([], jax.random.key(0))
    with pytest.raises(ValueError, match="path"):
        load_clickability("/no/such/file")


def test_clickability_files_with_foreign_or_nan_weights_are_refused(tmp_path):
    """As for .digjax files (E3, E6): an extra parameter, a missing one, NaN weights."""
    model = init_clickability(jax.random.key(0), size=16, features=(4,))
    path = save_clickability(tmp_path / "cm.msgpack", model)
    assert load_clickability(path).size == 16
    params = jax.tree.map(np.asarray, model.params)
    cases = {
        "extra": {**params, "spare": {"kernel": np.ones(3, np.float32)}},
        "nan": jax.tree.map(lambda v: v * np.nan, params),
    }
    for name, bad in cases.items():
        save_clickability(tmp_path / f"{name}.msgpack", dataclasses.replace(model, params=bad))
    with pytest.raises(ValueError, match=r"extra\.msgpack: the weights do not fit the network"):
        load_clickability(tmp_path / "extra.msgpack")
    with pytest.raises(ValueError, match=r"nan\.msgpack: the weights hold NaN"):
        load_clickability(tmp_path / "nan.msgpack")
