"""Test setup: 4 simulated CPU devices, a persistent compile cache, the real-data fixture and a
tiny exported segmenter."""

from __future__ import annotations

import os
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

jax.config.update("jax_num_cpu_devices", 4)
jax.config.update("jax_platforms", "cpu")
_CACHE = Path(__file__).resolve().parents[1] / ".jax_cache"
jax.config.update("jax_compilation_cache_dir", os.environ.get("JAX_CACHE_DIR", str(_CACHE)))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)

from hypothesis import settings  # noqa: E402

settings.register_profile("ci", max_examples=40, deadline=None, derandomize=True)
settings.register_profile("dev", max_examples=60, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

from dig_jax.paths import DATA_ENV, data_root  # noqa: E402


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Root of the real photos; skips the test when it is absent."""
    root = data_root()
    if not root.is_dir():
        pytest.skip(f"real data not found at {root} (set {DATA_ENV} to its folder)")
    return root


TINY_MODEL = {
    "widths": [4, 8],
    "stem_width": 4,
    "stage1_planes": 4,
    "blocks": 1,
    "stage_modules": [1],
    "head_width": 4,
    "input_kind": "gesture",
    "context_encoding": "gesture",
    "multihead": False,
    "aux_reduce": 4,
    "aux_pool": 4,
    "aux_hidden": [16, 8],
}


def random_variables(model):
    """Variables of the right structure without running `init` (slow to compile on CPU)."""
    shapes = jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.zeros((1, 32, 32, 6))))
    rng = np.random.default_rng(0)

    def fill(path, leaf):
        name = str(path[-1])
        if "var" in name or "scale" in name:
            return np.ones(leaf.shape, leaf.dtype)
        if "mean" in name or "bias" in name:
            return np.zeros(leaf.shape, leaf.dtype)
        return (0.3 * rng.standard_normal(leaf.shape)).astype(leaf.dtype)

    return jax.tree_util.tree_map_with_path(fill, shapes)


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory) -> Path:
    """A tiny gesture-agnostic HRNet exported as `<tmp>/tiny/segmenter.digjax` (random weights:
    for tests of code paths, not of numbers)."""
    import ml_collections

    from dig_jax.export import save_segmenter
    from dig_jax.models.interactive import build_segmenter

    config = ml_collections.ConfigDict({"model": TINY_MODEL, "image_size": 32})
    model = build_segmenter(config.model)
    path = tmp_path_factory.mktemp("ckpt") / "tiny" / "segmenter.digjax"
    return save_segmenter(path, random_variables(model), config)
