"""dig_jax: gesture-agnostic interactive segmentation and prompt-robustness tools in JAX."""

__version__ = "0.1.0"
