"""Evaluation protocols: DIG tables (RICE per gesture kind), the iterative NoG/NoC protocol,
the context strategies of the adapted click baselines, and the classical peers."""

from dig_jax.evaluation.dig_tables import evaluate_samples, kind_table
from dig_jax.evaluation.iterative import iterative_ious, largest_error, nog
from dig_jax.evaluation.peers import PEERS, peer_predictor
from dig_jax.evaluation.predictors import (
    CONTEXT_STRATEGIES,
    GESTURE_ENCODINGS,
    apply_context_strategy,
    segmenter_predictor,
)
from dig_jax.evaluation.protocol import SkipLog, chunks, evaluation_samples, load_record, stack

__all__ = [
    "CONTEXT_STRATEGIES",
    "GESTURE_ENCODINGS",
    "PEERS",
    "SkipLog",
    "apply_context_strategy",
    "chunks",
    "evaluate_samples",
    "evaluation_samples",
    "iterative_ious",
    "kind_table",
    "largest_error",
    "load_record",
    "nog",
    "peer_predictor",
    "segmenter_predictor",
    "stack",
]
