"""Gesture encodings for the adapted baselines: box outlines, bounding boxes, clicks from a map.

Coordinates: points (x, y) have pixel centres at integers, so pixel c spans [c - 0.5, c + 0.5];
boxes are in pixel-edge coordinates where pixel c spans [c, c + 1]. Point = edge - 0.5.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from scipy import ndimage
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components, depth_first_order
from skimage.morphology import skeletonize

from dig_jax.gestures.types import Gesture

_CORNERS = np.array([[0, 1], [2, 1], [2, 3], [0, 3]])  # (x1, y1), (x2, y1), (x2, y2), (x1, y2)


def box_outline_points(box: Any) -> Any:
    """Corners f32[..., 4, 2] of the outline of box f32[..., 4] = (x1, y1, x2, y2), in point coords.

    Order: (x1, y1), (x2, y1), (x2, y2), (x1, y2), each minus 0.5 (a closed polyline along the
    box's pixel edges). Accepts numpy (returns numpy) or jnp (returns jnp, jit/grad-safe).
    """
    xp = jnp if isinstance(box, jax.Array) else np
    box = xp.asarray(box, dtype=xp.float32)
    if box.shape[-1:] != (4,):
        raise ValueError(f"box must have a last axis of 4 (x1, y1, x2, y2), got shape {box.shape}")
    if xp is np:  # one gather: a rectangle's simulation is a few of these calls long
        return box[..., _CORNERS] - np.float32(0.5)
    x1, y1, x2, y2 = (box[..., i] - 0.5 for i in range(4))
    xs = xp.stack([x1, x2, x2, x1], axis=-1)
    ys = xp.stack([y1, y1, y2, y2], axis=-1)
    return xp.stack([xs, ys], axis=-1)


def to_box(gesture: Gesture) -> np.ndarray:
    """Bounding box f32[4] (x1, y1, x2, y2), pixel-edge coords, of the gesture's points.

    The points' extent [min, max] maps to [min + 0.5, max + 0.5], so `to_box` inverts
    `box_outline_points`. An axis narrower than one pixel (a click, a straight stroke) is widened
    symmetrically to 1 px, so the box is never degenerate: a click at (x, y) gives the box of its
    pixel (x, y, x + 1, y + 1).
    """
    pts = np.asarray(gesture.points, np.float64)
    lo = pts.min(axis=0) + 0.5
    hi = pts.max(axis=0) + 0.5
    centre = (lo + hi) / 2
    narrow = hi - lo < 1.0
    lo = np.where(narrow, centre - 0.5, lo)
    hi = np.where(narrow, centre + 0.5, hi)
    return np.array([lo[0], lo[1], hi[0], hi[1]], np.float32)


def _traversal_order(rows: np.ndarray, cols: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Indices of the skeleton pixels in depth-first order along each 8-connected component.

    Each component starts from its first end point (one neighbour) in raster order, or its first
    pixel if it is a loop; components follow in raster order of their start.
    """
    n = len(rows)
    index = -np.ones(shape, np.int64)
    index[rows, cols] = np.arange(n)
    padded = np.pad(index, 1, constant_values=-1)
    src, dst = [], []
    for dr in (-1, 0, 1):
        for dc in (-1, 0, 1):
            if dr == 0 and dc == 0:
                continue
            nb = padded[rows + 1 + dr, cols + 1 + dc]
            ok = nb >= 0
            src.append(np.arange(n)[ok])
            dst.append(nb[ok])
    src, dst = np.concatenate(src), np.concatenate(dst)
    graph = coo_matrix((np.ones(len(src)), (src, dst)), shape=(n, n)).tocsr()
    degree = np.diff(graph.indptr)
    n_comp, labels = connected_components(graph, directed=False)
    order = []
    for comp in range(n_comp):
        members = np.flatnonzero(labels == comp)  # raster order
        ends = members[degree[members] == 1]
        start = ends[0] if len(ends) else members[0]
        order.append(depth_first_order(graph, start, directed=False, return_predecessors=False))
    return np.concatenate(order)


def to_clicks(gesture_map: np.ndarray, max_points: int = 24) -> np.ndarray:
    """Clicks f32[K, 2] (x, y), K <= max_points, evenly spaced along the skeleton of the marks.

    The marked pixels are skeletonised (scikit-image), ordered depth-first along each connected
    piece, and K = min(max_points, #skeleton pixels) evenly spaced ones are kept. A click's disc
    gives its centre. An empty map gives f32[0, 2]. Deterministic.
    """
    gesture_map = np.asarray(gesture_map)
    if gesture_map.ndim != 2:
        raise ValueError(f"gesture_map must be 2-D [H, W], got shape {gesture_map.shape}")
    if int(max_points) < 1:
        raise ValueError(f"max_points must be >= 1, got {max_points}")
    marked = gesture_map.astype(bool)
    if not marked.any():
        return np.zeros((0, 2), np.float32)
    skeleton = skeletonize(marked)
    if not skeleton.any():  # cannot happen for a non-empty map, kept as a guard
        skeleton = marked
    rows, cols = np.nonzero(skeleton)
    order = _traversal_order(rows, cols, marked.shape)
    k = min(int(max_points), len(order))
    pick = order[np.round(np.linspace(0, len(order) - 1, k)).astype(np.int64)]
    if k == 1:  # a single click: the skeleton's most central pixel
        centre = ndimage.center_of_mass(skeleton)
        nearest = np.argmin((rows - centre[0]) ** 2 + (cols - centre[1]) ** 2)
        pick = np.array([nearest])
    return np.stack([cols[pick], rows[pick]], axis=-1).astype(np.float32)
