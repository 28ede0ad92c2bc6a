"""The one switch of `dig_jax.cpu`: `DIG_JAX_CPU` (read each time a function is traced).

  unset, "auto" or "1"  the pure-JAX CPU lowerings, on the CPU backend only (the default);
  "0" or "off"          none: the models are plain Flax / lax on every backend;
  "native"              as "auto", plus the C++ kernels of `dig_jax.cpu.native` (built on
                        first use with the system's C++ compiler; XLA's where they cannot be).
On any other backend (GPU, TPU) nothing of this package runs, whatever the setting.

Custom VJPs (the CPU backward passes) apply only inside `reverse_mode_only()`, where a caller
promises to differentiate in reverse mode alone (the train step, the attacks' box and gesture
gradients). Outside it the forward passes are plain or forward-mode aware, so `jax.jvp`,
`jax.jacfwd` and Hessian-vector products work through every model.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import jax

SWITCH_ENV = "DIG_JAX_CPU"
SETTINGS = {"": "auto", "auto": "auto", "1": "auto", "0": "off", "off": "off", "native": "native"}
_REVERSE_ONLY = [0]


def setting() -> str:
    """ "auto", "off" or "native" (see the module docstring); ValueError on another value."""
    value = os.environ.get(SWITCH_ENV, "").strip().lower()
    if value not in SETTINGS:
        raise ValueError(f"{SWITCH_ENV}={value!r}: expected auto, 1, 0, off or native")
    return SETTINGS[value]


def active(backend: str | None = None) -> bool:
    """True where the CPU lowerings apply: the switch is not off and `backend` (default JAX's)
    is the CPU."""
    return setting() != "off" and (backend or jax.default_backend()) == "cpu"


def native_requested(backend: str | None = None) -> bool:
    """True where the switch asks for the C++ kernels on the CPU backend (whether they build is
    `dig_jax.cpu.native.load_kernels`)."""
    return setting() == "native" and active(backend)


@contextlib.contextmanager
def reverse_mode_only() -> Iterator[None]:
    """Trace inside this block a function that will be differentiated in reverse mode only:
    the CPU lowerings with custom VJPs then apply (they do not support `jax.jvp`)."""
    _REVERSE_ONLY[0] += 1
    try:
        yield
    finally:
        _REVERSE_ONLY[0] -= 1


def in_reverse_mode_only() -> bool:
    """Whether tracing happens inside `reverse_mode_only()`."""
    return _REVERSE_ONLY[0] > 0
