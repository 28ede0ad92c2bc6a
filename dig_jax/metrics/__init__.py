"""Metrics: IoU, RICE, NoC/NoG/NoF, box IoU / CIoU, mergeable accumulators.

All functions take numpy arrays (and return numpy) or jnp arrays (jit/vmap-safe, batched over
leading axes). Semantics follow DESIGN.md ("Semantics that must not drift").
"""

from dig_jax.metrics.accumulators import Averages, Mean, NoCTally
from dig_jax.metrics.boxes import box_iou, ciou_loss, tight_box
from dig_jax.metrics.iou import VOID, iou, rice, rice_scores
from dig_jax.metrics.noc import DEFAULT_THRESHOLDS, MAX_INTERACTIONS, noc, noc_summary
from dig_jax.metrics.rclicks import RClicksTally, iou_auc, rclicks_table

__all__ = [
    "DEFAULT_THRESHOLDS",
    "MAX_INTERACTIONS",
    "VOID",
    "Averages",
    "Mean",
    "NoCTally",
    "RClicksTally",
    "box_iou",
    "ciou_loss",
    "iou",
    "iou_auc",
    "noc",
    "noc_summary",
    "rclicks_table",
    "rice",
    "rice_scores",
    "tight_box",
]
