"""Differentiable (in the points) rasterisation and distance maps, single gesture, vmap-able.

Both start from `polyline_distance`: the Euclidean distance (px) from every pixel centre to the
gesture's polyline (segments i -> i+1 for i < length - 1, plus length-1 -> 0 when `closed`; a single
point is a disc centre). Padding points past `length` never contribute, and `length` 0 draws
nothing (distance +inf in effect). An optional `kind` (a GestureKind code; default -1 = use the
polyline as given) makes a CLICK keep only point 0, exactly like `rasterize_batch`. Segments are
visited in chunks by `lax.scan` with a running minimum, so memory is O(H * W * chunk), not
O(H * W * N).
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from dig_jax.gestures.raster import _check_shape, check_strokes, padded_segments
from dig_jax.gestures.types import BRUSH_RADIUS

_CHUNK = 16  # segments per scan step
_EPS = 1e-12  # squared-distance floor keeping sqrt differentiable at 0


def _segment_d2(px, py, a, b):
    """Squared distance from pixel centres (px, py) [H, W] to segments a->b [C, 2] -> [C, H, W]."""
    ax, ay = a[:, 0, None, None], a[:, 1, None, None]
    dx, dy = b[:, 0, None, None] - ax, b[:, 1, None, None] - ay
    rx, ry = px[None] - ax, py[None] - ay
    len2 = dx * dx + dy * dy
    t = jnp.clip((rx * dx + ry * dy) / jnp.where(len2 > 0, len2, 1.0), 0.0, 1.0)
    t = jnp.where(len2 > 0, t, 0.0)
    ex, ey = rx - t * dx, ry - t * dy
    return ex * ex + ey * ey


def polyline_distance(
    points: jax.Array,
    length: jax.Array,
    closed: jax.Array,
    shape: Sequence[int],
    *,
    kind: jax.Array | int = -1,
) -> jax.Array:
    """f32[H, W]: distance (px) from each pixel centre to the polyline of points f32[N, 2].

    No valid segment (length 0) gives a huge distance (1e15 px) everywhere.
    """
    h, w = _check_shape(shape)
    if np.ndim(points) != 2 or np.shape(points)[1] != 2:
        raise ValueError(f"points must have shape [N, 2], got {tuple(np.shape(points))}")
    check_strokes(jnp.asarray(points)[None], jnp.reshape(length, (1,)), jnp.reshape(kind, (1,)))
    points = jnp.asarray(points, jnp.float32)
    n = points.shape[0]
    a, b, valid = padded_segments(points, length, jnp.asarray(kind, jnp.int32), closed)
    chunk = min(_CHUNK, n)
    n_pad = -n % chunk
    if n_pad:
        a = jnp.concatenate([a, jnp.repeat(a[-1:], n_pad, 0)])
        b = jnp.concatenate([b, jnp.repeat(b[-1:], n_pad, 0)])
        valid = jnp.concatenate([valid, jnp.zeros(n_pad, bool)])
    py, px = jnp.meshgrid(
        jnp.arange(h, dtype=jnp.float32), jnp.arange(w, dtype=jnp.float32), indexing="ij"
    )
    big = jnp.float32(1e30)

    def step(best, xs):
        a_c, b_c, v_c = xs
        d2 = jnp.where(v_c[:, None, None], _segment_d2(px, py, a_c, b_c), big)
        return jnp.minimum(best, d2.min(axis=0)), None

    xs = (a.reshape(-1, chunk, 2), b.reshape(-1, chunk, 2), valid.reshape(-1, chunk))
    best, _ = jax.lax.scan(step, jnp.full((h, w), big), xs)
    return jnp.sqrt(jnp.maximum(best, _EPS))


def soft_rasterize(
    points: jax.Array,
    length: jax.Array,
    closed: jax.Array,
    shape: Sequence[int],
    radius: float = BRUSH_RADIUS,
    temperature: float = 0.5,
    *,
    kind: jax.Array | int = -1,
) -> jax.Array:
    """f32[H, W] in [0, 1]: sigmoid((radius - distance) / temperature), differentiable in points.

    Its hard limit (temperature -> 0, threshold >= 0.5) is the brush of `rasterize`; `kind`
    as in `rasterize_batch` (CLICK: point 0 only; default -1: the polyline as given).
    """
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    dist = polyline_distance(points, length, closed, shape, kind=kind)
    return jax.nn.sigmoid((radius - dist) / temperature)


def distance_map_jnp(
    points: jax.Array,
    length: jax.Array,
    closed: jax.Array,
    shape: Sequence[int],
    radius: float = BRUSH_RADIUS,
    *,
    kind: jax.Array | int = -1,
) -> jax.Array:
    """f32[H, W]: analytic stand-in for `distance_map(rasterize(...))`, differentiable in points.

    max(distance - radius, 0) is the exact distance to the continuous brush region; the EDT to the
    marked pixel *centres* is never smaller and at most ~1.4 px larger, so half a pixel is added
    outside the brush to centre the error (|error| <= 1 px for points inside the image extent
    [-0.5, W - 0.5] x [-0.5, H - 0.5], as simulated gestures are; checked in the tests). Points
    farther outside put brush area off the image, where no pixel is marked, so the EDT can exceed
    this estimate by more. Truncated at 255 px and divided by 255, like `distance_map` (so
    length 0 gives all ones). `kind` as in `soft_rasterize`.
    """
    dist = polyline_distance(points, length, closed, shape, kind=kind)
    outside = jnp.maximum(dist - radius, 0.0)
    est = jnp.where(dist > radius, outside + _OFFSET, 0.0)
    return jnp.minimum(est, 255.0) / 255.0


_OFFSET = 0.5  # px, see distance_map_jnp
