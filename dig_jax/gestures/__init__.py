"""Gestures: simulation (numpy/skimage), rasterisation (numpy reference, batched jnp, soft jnp),
distance maps and the encodings used by adapted baselines. See DESIGN.md for the conventions."""

from dig_jax.gestures.encode import box_outline_points, to_box, to_clicks
from dig_jax.gestures.raster import (
    distance_map,
    distance_uint8,
    pad_gestures,
    rasterize,
    rasterize_batch,
    rasterize_many,
    stroke_map,
)
from dig_jax.gestures.simulate import simulate_creation, simulate_many, simulate_refinement
from dig_jax.gestures.soft import distance_map_jnp, polyline_distance, soft_rasterize
from dig_jax.gestures.types import BRUSH_RADIUS, Context, Gesture, GestureKind

__all__ = [
    "BRUSH_RADIUS",
    "Context",
    "Gesture",
    "GestureKind",
    "box_outline_points",
    "distance_map",
    "distance_map_jnp",
    "distance_uint8",
    "pad_gestures",
    "polyline_distance",
    "rasterize",
    "rasterize_batch",
    "rasterize_many",
    "simulate_creation",
    "simulate_many",
    "simulate_refinement",
    "soft_rasterize",
    "stroke_map",
    "to_box",
    "to_clicks",
]
