"""Test setup: 4 simulated CPU devices, a persistent compile cache, the real-data fixture and a
tiny exported segmenter."""

from __future__ import annotations

import os
from pathlib import Path

import jax
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


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory) -> Path:
    """A tiny gesture-agnostic HRNet exported as `<tmp>/tiny/segmenter.digjax` (random weights:
    for tests of code paths, not of numbers)."""
    from tiny_models import tiny_variables

    from dig_jax.export import save_segmenter

    config, variables = tiny_variables()
    path = tmp_path_factory.mktemp("ckpt") / "tiny" / "segmenter.digjax"
    return save_segmenter(path, variables, config)
