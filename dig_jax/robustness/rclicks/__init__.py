"""RClicks: realistic click simulation for benchmarking interactive segmentation.

Clickability maps (UD, DT, SM in `maps`; the learned CM in `model` / `train`), sampling and the
clicking groups G1..G10 (`sampling`), the baseline clicker (`clicker`), the multi-round
protocol (`protocol`), scores of maps against recorded clicks (`scores`) and figures.
The metrics (Sample NoC, ΔSB, ΔGR, ΔHH, IoU-AUC, NSR) are `dig_jax.metrics.rclicks`; the
command is `python -m dig_jax.rclicks`. Follows github.com/emb-ai/rclicks; every choice the
paper leaves open is stated in the module that makes it.
"""

from dig_jax.metrics.rclicks import N_GROUPS
from dig_jax.robustness.rclicks.clicker import Click, ErrorChoice, baseline_click, choose_error
from dig_jax.robustness.rclicks.maps import (
    MAP_KINDS,
    clickability_map,
    dt_map,
    error_masks,
    map_function,
    padded_edt,
    saliency_map,
    spectral_residual,
    uniform_map,
)
from dig_jax.robustness.rclicks.model import (
    ClickabilityModel,
    init_clickability,
    load_clickability,
    save_clickability,
)
from dig_jax.robustness.rclicks.protocol import BASELINE, TRAJECTORIES, RClicksRun, rclicks_ious
from dig_jax.robustness.rclicks.sampling import (
    draw_batch,
    group_labels,
    group_masses,
    sample_clicks,
    sample_group_clicks,
    sample_groups_batch,
)
from dig_jax.robustness.rclicks.scores import map_scores
from dig_jax.robustness.rclicks.train import (
    RecordedClicks,
    TrainingExample,
    examples_from_clicks,
    read_clicks_csv,
    target_map,
    train_clickability,
)

__all__ = [
    "BASELINE",
    "MAP_KINDS",
    "N_GROUPS",
    "TRAJECTORIES",
    "Click",
    "ClickabilityModel",
    "ErrorChoice",
    "RClicksRun",
    "RecordedClicks",
    "TrainingExample",
    "baseline_click",
    "choose_error",
    "clickability_map",
    "draw_batch",
    "dt_map",
    "error_masks",
    "examples_from_clicks",
    "group_labels",
    "group_masses",
    "init_clickability",
    "load_clickability",
    "map_function",
    "map_scores",
    "padded_edt",
    "rclicks_ious",
    "read_clicks_csv",
    "saliency_map",
    "sample_clicks",
    "sample_group_clicks",
    "sample_groups_batch",
    "save_clickability",
    "spectral_residual",
    "target_map",
    "train_clickability",
    "uniform_map",
]
