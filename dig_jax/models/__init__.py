"""Flax models: HRNet backbone, heads and the interactive segmenters."""

from dig_jax.models.hrnet import HRNet
from dig_jax.models.interactive import Segmenter, build_segmenter

__all__ = ["HRNet", "Segmenter", "build_segmenter"]
