"""Flax models: HRNet backbone, heads and the interactive segmenters."""

from dig_jax.models.hrnet import HRNet
from dig_jax.models.interactive import (
    Segmenter,
    batch_to_input,
    build_segmenter,
    context_input,
    gesture_input,
)

__all__ = [
    "HRNet",
    "Segmenter",
    "batch_to_input",
    "build_segmenter",
    "context_input",
    "gesture_input",
]
