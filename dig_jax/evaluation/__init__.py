"""Evaluation protocols: DIG tables (RICE per gesture kind), the iterative NoG/NoC protocol,
and the context strategies of the adapted click baselines."""

from dig_jax.evaluation.dig_tables import evaluate_samples, kind_table
from dig_jax.evaluation.iterative import iterative_ious, largest_error, nog
from dig_jax.evaluation.predictors import (
    CONTEXT_STRATEGIES,
    GESTURE_ENCODINGS,
    apply_context_strategy,
    segmenter_predictor,
)
from dig_jax.evaluation.protocol import SkipLog, batches, evaluation_samples, stack

__all__ = [
    "CONTEXT_STRATEGIES",
    "GESTURE_ENCODINGS",
    "SkipLog",
    "apply_context_strategy",
    "batches",
    "evaluate_samples",
    "evaluation_samples",
    "iterative_ious",
    "kind_table",
    "largest_error",
    "nog",
    "segmenter_predictor",
    "stack",
]
