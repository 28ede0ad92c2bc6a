"""Export to one self-describing file and `dig_jax.load_segmenter`."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dig_jax
from dig_jax.export import LoadedSegmenter, save_segmenter
from dig_jax.models.interactive import build_segmenter
from dig_jax.train.config import base_config


@pytest.fixture(scope="module", params=["gesture", "context"])
def exported(request, tmp_path_factory):
    config = base_config("tiny")
    config.model.input_kind = request.param
    model = build_segmenter(config.model)
    x = jnp.zeros((1, 32, 32, model.in_channels))
    abstract = jax.eval_shape(lambda: model.init(jax.random.key(1), x, train=False))
    rng = np.random.default_rng(1)  # random variables without compiling `init`

    def fill(path, a):
        if "var" in jax.tree_util.keystr(path):  # BatchNorm running variances are positive
            return rng.uniform(0.5, 1.5, a.shape).astype(a.dtype)
        return rng.normal(0, 0.2, a.shape).astype(a.dtype)

    variables = jax.tree_util.tree_map_with_path(fill, abstract)
    path = save_segmenter(tmp_path_factory.mktemp("export") / "m.digjax", variables, config)
    return path, model, variables


def test_round_trip_reproduces_the_logits(exported):
    path, model, variables = exported
    loaded = dig_jax.load_segmenter(path)
    assert {"gesture": 6, "context": 7}[loaded.input_kind] == model.in_channels
    x = jnp.asarray(np.random.default_rng(0).uniform(0, 1, (2, 32, 32, model.in_channels)))
    x = x.at[..., :3].multiply(255.0)
    expected = model.apply(variables, x, train=False)["mask"]
    got = jax.jit(loaded.predict_logits_fn())(x)
    assert np.isfinite(np.asarray(expected)).all()
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-5, atol=1e-5)


def test_compiled_logits_take_the_weights_as_an_argument(exported):
    """`logits` reads the weights it holds now (no recompile, nothing baked into the program)
    and agrees with the pure function jitted with the weights inside it."""
    path, model, _ = exported
    loaded = dig_jax.load_segmenter(path)
    x = jnp.asarray(np.random.default_rng(2).uniform(0, 1, (1, 32, 32, model.in_channels)))
    before = np.asarray(loaded.logits(x))
    inside = np.asarray(jax.jit(loaded.predict_logits_fn())(x))
    np.testing.assert_allclose(before, inside, rtol=1e-5, atol=1e-5)
    loaded.variables = jax.tree.map(lambda a: a * 1.5, loaded.variables)
    after = np.asarray(loaded.logits(x))
    assert not np.allclose(after, before)  # the new weights were read
    assert loaded._logits_jit._cache_size() == 1  # by the same compiled program


def test_flip_averages_both_views_and_mirrors_with_the_input(exported):
    """With `predict.flip` the logits are the mean of the network on x and on x mirrored
    (mirrored back), so mirroring the input mirrors the logits exactly (the heads' mean:
    `test_flip_averaged_mirrors_the_mask_back_and_averages_the_heads`)."""
    path, model, variables = exported
    config = dig_jax.load_segmenter(path).config
    config.predict = {"flip": True}
    flipped = LoadedSegmenter(config, variables)
    x = jnp.asarray(np.random.default_rng(3).uniform(0, 1, (2, 32, 32, model.in_channels)))
    x = x.at[..., :3].multiply(255.0)
    plain = model.apply(variables, x, train=False)["mask"]
    mirror = model.apply(variables, x[:, :, ::-1], train=False)["mask"][:, :, ::-1]
    got = np.asarray(flipped.logits(x))
    np.testing.assert_allclose(got, 0.5 * (plain + mirror), rtol=1e-5, atol=1e-5)
    assert not np.allclose(got, plain)  # a random network is not mirror-symmetric
    again = np.asarray(jax.jit(flipped.predict_logits_fn())(x[:, :, ::-1]))
    np.testing.assert_allclose(again, got[:, :, ::-1], rtol=1e-5, atol=1e-5)
    outputs = flipped.apply_outputs(variables, x)
    assert outputs["mask"].shape == (2, 32, 32)


def test_predict_returns_a_binary_mask_at_any_size(exported):
    path, _, _ = exported
    loaded = dig_jax.load_segmenter(path)
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (30, 45, 3), dtype=np.uint8)
    gesture = np.zeros((30, 45), np.uint8)
    gesture[10:15, 20:25] = 1
    mask = loaded.predict(image, gesture)
    assert mask.shape == (30, 45) and mask.dtype == np.uint8
    assert set(np.unique(mask)) <= {0, 1}
    with pytest.raises(ValueError, match="gesture_map"):
        loaded.predict(image, gesture[:-1])


def test_load_rejects_other_files(tmp_path):
    path = tmp_path / "x.digjax"
    path.write_bytes(b"not a model")
    with pytest.raises(ValueError, match="magic"):
        dig_jax.load_segmenter(path)
    with pytest.raises(ValueError, match="does not exist"):
        dig_jax.load_segmenter(tmp_path / "missing.digjax")
