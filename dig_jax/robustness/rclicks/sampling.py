"""Draw clicks ∝ a clickability map, and the clicking groups G1..G10 (JAX, jit/vmap-able).

Clicking groups (RClicks, `Clicker._get_next_click` with `quantile_low/high`): sort the pixel
probabilities in ascending order and cut their cumulative mass at 10 % steps; G1 holds the
least likely 10 % of the mass, G10 the most likely. Choice: the reference keeps every pixel
whose *value* lies between the two cut values, so tied values (a uniform map, the integer
levels of a distance map) fall in several groups at once; here each pixel belongs to exactly
one group — the one containing the midpoint of its share of the cumulative mass, ties broken
in raster order — so the groups partition the map and each holds 10 % of the mass to within
one pixel's mass. Pixels of zero probability are in no group (label 0).

Everything works on maps of any shape (flattened in raster order); points are (x, y) =
(column, row) float32 of 2-D maps. A map with no mass gives `valid = False` and points
(-1, -1), never NaN. `group_labels` / `group_masses` follow the metrics' convention: numpy in →
numpy out (cumulative mass in float64; numpy's sort is several times faster than XLA's on CPU,
so the protocol cuts groups this way), jnp in → jnp out (float32, jit/vmap-safe). Public
functions check concrete (numpy) inputs and raise `ValueError` naming the argument; under
`jit`/`vmap` they run unchecked.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dig_jax.metrics.rclicks import N_GROUPS
from dig_jax.robustness.rclicks.maps import check_map


def _checked(prob_map: Any, ndim: int | None) -> jax.Array:
    if isinstance(prob_map, jax.core.Tracer):
        return prob_map
    return jnp.asarray(check_map(prob_map, "prob_map", ndim), jnp.float32)


def _check_groups(n_groups: int) -> None:
    if not isinstance(n_groups, int | np.integer) or n_groups < 1:
        raise ValueError(f"n_groups must be a positive integer, got {n_groups!r}")


@functools.partial(jax.jit, static_argnames="n_groups")
def _labels_flat(flat: jax.Array, n_groups: int) -> jax.Array:
    order = jnp.argsort(flat, stable=True)
    ordered = flat[order]
    cum = jnp.cumsum(ordered)
    total = cum[-1]
    centre = (cum - ordered / 2) / jnp.where(total > 0, total, 1.0)
    group = jnp.clip(jnp.floor(centre * n_groups).astype(jnp.int32) + 1, 1, n_groups)
    group = jnp.where(ordered > 0, group, 0)
    return jnp.zeros_like(group).at[order].set(group)


def _labels_numpy(flat: np.ndarray, n_groups: int) -> np.ndarray:
    order = np.argsort(flat, kind="stable")
    ordered = flat[order]
    cum = np.cumsum(ordered)
    total = cum[-1]
    centre = (cum - ordered / 2) / (total if total > 0 else 1.0)
    group = np.clip(np.floor(centre * n_groups).astype(np.int32) + 1, 1, n_groups)
    group[ordered <= 0] = 0
    labels = np.empty_like(group)
    labels[order] = group
    return labels


def group_labels(prob_map: Any, n_groups: int = N_GROUPS) -> Any:
    """int32, the map's shape: the clicking group 1..n_groups of each pixel (1 = least likely
    mass), 0 where the probability is 0. numpy in → numpy out; jnp in → jnp out."""
    _check_groups(n_groups)
    if isinstance(prob_map, np.ndarray | list | tuple):
        flat = check_map(prob_map, "prob_map", None)
        return _labels_numpy(flat.reshape(-1), n_groups).reshape(flat.shape)
    prob_map = _checked(prob_map, None)
    return _labels_flat(prob_map.reshape(-1), n_groups).reshape(prob_map.shape)


def group_masses(prob_map: Any, n_groups: int = N_GROUPS) -> Any:
    """float[n_groups]: the share of the map's mass in G1..Gn (all 0 for an empty map).
    numpy in → numpy float64 out; jnp in → jnp float32 out."""
    _check_groups(n_groups)
    if isinstance(prob_map, np.ndarray | list | tuple):
        flat = check_map(prob_map, "prob_map", None).reshape(-1)
        mass = np.bincount(_labels_numpy(flat, n_groups), flat, n_groups + 1)[1:]
        total = mass.sum()
        return mass / total if total > 0 else mass
    flat = _checked(prob_map, None).reshape(-1)
    labels = _labels_flat(flat, n_groups)
    mass = jnp.zeros(n_groups + 1, jnp.float32).at[labels].add(flat)[1:]
    total = mass.sum()
    return mass / jnp.where(total > 0, total, 1.0)


def _draw(key: jax.Array, weights: jax.Array, n: int) -> tuple[jax.Array, jax.Array]:
    """n flat indices drawn ∝ weights (1-D, >= 0) by inverse CDF, and validity (mass > 0)."""
    cdf = jnp.cumsum(weights)
    total = cdf[-1]
    u = jax.random.uniform(key, (n,), jnp.float32) * total
    idx = jnp.searchsorted(cdf, u, side="right")
    last = weights.shape[0] - 1 - jnp.argmax(weights[::-1] > 0)  # never land on zero mass
    valid = total > 0
    return jnp.where(valid, jnp.minimum(idx, last), -1).astype(jnp.int32), valid


def _points(idx: jax.Array, width: int) -> jax.Array:
    xy = jnp.stack([idx % width, idx // width], axis=-1).astype(jnp.float32)
    return jnp.where(idx[..., None] >= 0, xy, -1.0)


@functools.partial(jax.jit, static_argnames="n")
def _sample_points(key: jax.Array, prob_map: jax.Array, n: int) -> tuple[jax.Array, jax.Array]:
    idx, valid = _draw(key, prob_map.reshape(-1), n)
    return _points(idx, prob_map.shape[1]), valid


@functools.partial(jax.jit, static_argnames=("n", "n_groups"))
def _sample_group_points(
    key: jax.Array, prob_map: jax.Array, group: jax.Array, n: int, n_groups: int
) -> tuple[jax.Array, jax.Array]:
    flat = prob_map.reshape(-1)
    inside = jnp.where(_labels_flat(flat, n_groups) == group, flat, 0.0)
    idx, valid = _draw(key, inside, n)
    return _points(idx, prob_map.shape[1]), valid


def sample_clicks(key: jax.Array, prob_map: Any, n: int = 1) -> tuple[jax.Array, jax.Array]:
    """`n` clicks drawn independently ∝ `prob_map` [H, W] (weights >= 0, any scale).

    Returns (points float32[n, 2] as (x, y), valid bool[]): valid is False and the points are
    (-1, -1) when the map has no mass. vmap over keys and maps for batches.
    """
    if int(n) < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    return _sample_points(key, _checked(prob_map, 2), int(n))


def sample_group_clicks(
    key: jax.Array, prob_map: Any, group: Any, n: int = 1, n_groups: int = N_GROUPS
) -> tuple[jax.Array, jax.Array]:
    """`n` clicks drawn ∝ `prob_map` [H, W] within clicking group `group` (1..n_groups; 1 = G1,
    the least likely mass). Same outputs as `sample_clicks`."""
    _check_groups(n_groups)
    if int(n) < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not isinstance(group, jax.core.Tracer) and not 1 <= int(group) <= n_groups:
        raise ValueError(f"group must be in 1..{n_groups}, got {group}")
    return _sample_group_points(key, _checked(prob_map, 2), jnp.int32(group), int(n), n_groups)


@jax.jit
def draw_batch(keys: jax.Array, weights: jax.Array) -> tuple[jax.Array, jax.Array]:
    """One flat index per row ∝ weights float32[B, L] (>= 0) with keys [B]: (index int32[B],
    -1 where a row has no mass; valid bool[B])."""
    idx, valid = jax.vmap(lambda k, w: _draw(k, w, 1))(keys, weights)
    return idx[:, 0], valid


@functools.partial(jax.jit, static_argnames="n_groups")
def sample_groups_batch(
    keys: jax.Array, weights: jax.Array, groups: jax.Array, n_groups: int = N_GROUPS
) -> tuple[jax.Array, jax.Array]:
    """One click per row: keys [B], weights float32[B, L] (flattened maps, zero-padded to a
    common length), groups int32[B] (1..n_groups, or 0 = the whole map). Returns (flat index
    int32[B], -1 where invalid; valid bool[B]). Used by the protocol for all trajectories of
    a round at once."""

    def one(key, w, g):
        inside = jnp.where((g == 0) | (_labels_flat(w, n_groups) == g), w, 0.0)
        idx, valid = _draw(key, inside, 1)
        return idx[0], valid

    return jax.vmap(one)(keys, weights, groups)
