"""`njit`: numba's `njit`, applied on a kernel's first call.

Importing numba (and LLVM with it) costs ~0.2 s and ~50 MiB of memory. The gesture and
data modules hold numba kernels but are imported by everything that predicts, so the
decorator below defers numba until a kernel first runs: a process that loads a segmenter and
runs its network never imports it (`benchmarks/vs_torch.py` measures such processes).

Kernels with `cache=True` keep their machine code on disk in a folder named by
`sources_stamp()`, a hash of the package's numba sources (`NUMBA_CACHE_DIR`, set before numba
is imported unless the user set it). numba's own key (the kernel's bytecode, its file's time
stamp) misses a change to a kernel it calls in another module: a caller loaded from the cache
then runs the callee's old code (seen here: `row_runs` edited, `longest_contour`'s cached
caller still ran the previous version and answered wrongly); a new stamp is a new folder.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


@functools.cache
def sources_stamp() -> str:
    """sha256 (16 hex digits) of the package's .py files that mention numba, by relative
    path: read once per process, at the first kernel compile (~100 files, a few ms)."""
    root = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        text = path.read_bytes()
        if b"numba" in text:
            digest.update(path.relative_to(root).as_posix().encode() + b"\0" + text)
    return digest.hexdigest()[:16]


CACHE_ROOT = Path("~/.cache/dig_jax/numba")


def _import_numba() -> Any:
    """numba, imported with `NUMBA_CACHE_DIR` = CACHE_ROOT/<sources_stamp()> unless the user
    set it or imported numba first (then numba's own cache folders are used)."""
    if "numba" not in sys.modules:
        os.environ.setdefault("NUMBA_CACHE_DIR", str(CACHE_ROOT.expanduser() / sources_stamp()))
    import numba

    return numba


class _Lazy:
    """A module-level kernel that becomes `numba.njit(**options)(fn)` on first call; the
    compiled dispatcher then replaces it in its module, so kernels that call it see numba's."""

    def __init__(self, fn: Callable, options: dict[str, Any]) -> None:
        self.fn = fn
        self.options = options
        functools.update_wrapper(self, fn)

    @functools.cached_property
    def dispatcher(self) -> Any:
        numba = _import_numba()
        module_globals = self.fn.__globals__
        for name in self.fn.__code__.co_names:  # kernels this one calls compile first
            callee = module_globals.get(name)
            if isinstance(callee, _Lazy):
                module_globals[name] = callee.dispatcher
            elif isinstance(callee, _NumbaGlobal):
                module_globals[name] = callee.value
        compiled = numba.njit(**self.options)(self.fn)
        module_globals[self.fn.__name__] = compiled
        return compiled

    def __call__(self, *args: Any) -> Any:
        return self.dispatcher(*args)


class _NumbaGlobal:
    """A global of a module that imports numba at import (`dig_jax._intrinsics`), imported
    when the first kernel that names it compiles."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    @functools.cached_property
    def value(self) -> Any:
        _import_numba()
        return getattr(importlib.import_module(self.module), self.name)

    def __call__(self, *args: Any) -> Any:
        return self.value(*args)


def intrinsic(name: str) -> Any:
    """`dig_jax._intrinsics.<name>` (a numba intrinsic or kernel), for kernels to call; numba
    and the module are imported on the first such kernel's compile."""
    return _NumbaGlobal("dig_jax._intrinsics", name)


def njit(**options: Any) -> Callable[[Callable], Callable]:
    """Decorator: `numba.njit(**options)` for a module-level function, deferred to its first
    call (or to the first call of a kernel that calls it)."""
    return lambda fn: _Lazy(fn, options)
