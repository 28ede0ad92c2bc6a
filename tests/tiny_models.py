"""A tiny gesture-agnostic HRNet and random variables for it (tests of code paths, not numbers).

Importable from every test module: `tests/` is on sys.path through its conftest.py.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from dig_jax.models.interactive import build_segmenter

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
    "aux_hidden": [8],
}
# TINY_MODEL as config values (tuples, not lists) and as `python -m dig_jax.train` flags: the
# training tests' `tiny` variants shrunk to it compile in a fraction of the time.
TINY_MODEL_CONFIG = {k: tuple(v) if isinstance(v, list) else v for k, v in TINY_MODEL.items()}
TINY_MODEL_FLAGS = [f"--config.model.{k}={v}" for k, v in TINY_MODEL_CONFIG.items()]


def tiny_variables(head_width: int = 4, var: float = 1.0, nan: bool = False) -> tuple[dict, dict]:
    """(config dict, random variables) of the tiny model without running `init` (slow to compile
    on CPU): BatchNorm variances = `var`, every other leaf 0.3·N(0, 1) (NaN with `nan`)."""
    config = {"model": {**TINY_MODEL, "head_width": head_width}, "image_size": 32}
    model = build_segmenter(ml_collections.ConfigDict(config).model)
    shapes = jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.zeros((1, 32, 32, 6))))
    rng = np.random.default_rng(0)

    def fill(path, leaf):
        if "var" in jax.tree_util.keystr(path):
            return np.full(leaf.shape, var, leaf.dtype)
        return (0.3 * rng.standard_normal(leaf.shape)).astype(leaf.dtype) * (np.nan if nan else 1)

    return config, jax.tree_util.tree_map_with_path(fill, shapes)
