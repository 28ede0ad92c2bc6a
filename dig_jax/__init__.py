"""dig_jax: gesture-agnostic interactive segmentation and prompt-robustness tools in JAX."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def load_segmenter(path: Any) -> Any:
    """Load an exported segmenter file (see `dig_jax.export`); imports JAX on first use."""
    from dig_jax.export import load_segmenter as _load

    return _load(path)
