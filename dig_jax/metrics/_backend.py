"""Pick numpy or jax.numpy from the inputs, and the shared input checks of the metrics.

Values are checked on every concrete array, numpy or jax; only tracers (inside `jax.jit`,
`vmap`, `grad`) skip the value checks, so the metrics stay traceable. Shapes and dtypes are
checked always.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def is_jax(*arrays: Any) -> bool:
    """True when any argument is a jax Array (tracers included)."""
    return any(isinstance(a, jax.Array) for a in arrays)


def xp_of(*arrays: Any) -> ModuleType:
    """`jax.numpy` if any argument is a jax Array, else `numpy`."""
    return jnp if is_jax(*arrays) else np


def as_array(value: Any) -> Any:
    """jax Arrays (tracers included) as they are; anything else (lists, scalars) as numpy."""
    return value if is_jax(value) else np.asarray(value)


def concrete(value: Any) -> np.ndarray | None:
    """`value` as a numpy array when its values are known (numpy, lists, concrete jax Arrays);
    None for a tracer, whose values exist only when the traced function runs, and for an array
    spread over several hosts (this process cannot read it whole)."""
    if isinstance(value, jax.core.Tracer):
        return None
    if isinstance(value, jax.Array) and not value.is_fully_addressable:
        return None
    return np.asarray(value)


def check_mask(name: str, mask: Any, *, allow_void: bool, void: int = 255) -> None:
    """Raise ValueError unless `mask` is bool/integer with values in {0, 1} (or `void`)."""
    dtype = np.dtype(mask.dtype)
    if dtype != np.bool_ and not np.issubdtype(dtype, np.integer):
        raise ValueError(f"{name} must be a bool or integer mask, got dtype {dtype}")
    if mask.ndim < 2:
        raise ValueError(f"{name} must have shape [..., H, W], got {tuple(mask.shape)}")
    if dtype == np.bool_:
        return  # binary by construction
    mask = concrete(mask)
    if mask is None:
        return  # a tracer: values cannot be inspected
    bad = mask > 1 if dtype.kind == "u" else (mask < 0) | (mask > 1)
    if allow_void:
        bad &= mask != void
    if bad.any():
        values = np.unique(np.asarray(mask)[bad])[:5].tolist()
        kind = "{0, 1, void}" if allow_void else "{0, 1}"
        raise ValueError(f"{name} must hold values in {kind}, found {values}")


def check_same_shape(**arrays: Any) -> None:
    """Raise ValueError naming the arguments when their shapes differ."""
    shapes = {name: tuple(a.shape) for name, a in arrays.items()}
    if len(set(shapes.values())) > 1:
        listed = ", ".join(f"{n}={s}" for n, s in shapes.items())
        raise ValueError(f"shape mismatch: {listed}")


def check_broadcast(**arrays: Any) -> tuple[int, ...]:
    """The broadcast shape of the arguments; ValueError naming them when they do not broadcast."""
    shapes = {name: tuple(np.shape(a)) for name, a in arrays.items()}
    try:
        return np.broadcast_shapes(*shapes.values())
    except ValueError:
        listed = ", ".join(f"{n}={s}" for n, s in shapes.items())
        raise ValueError(f"shapes do not broadcast: {listed}") from None


def check_unit_interval(name: str, value: Any) -> None:
    """Raise ValueError unless every value is a number in [0, 1] (NaN named; tracers pass)."""
    arr = concrete(value)
    if arr is None:
        return
    if arr.dtype == object or not (arr.dtype == np.bool_ or np.issubdtype(arr.dtype, np.number)):
        raise ValueError(f"{name} must be numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if arr.size == 0:
        return
    if np.isnan(arr).any():
        raise ValueError(f"{name} contains NaN")
    if (arr < 0).any() or (arr > 1).any():
        raise ValueError(f"{name} must lie in [0, 1], got min {arr.min()} max {arr.max()}")
