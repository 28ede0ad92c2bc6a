"""Host memory on CPU: freed pages handed back, and help for processes run on jemalloc.

XLA on CPU allocates a compiled call's temporaries as one block per call (about 760 MiB for the
Lite segmenter's train step at batch 8 x 224²) and frees it when the call ends. glibc keeps
freed heap memory mapped; `release_freed_memory` hands it back (glibc's `malloc_trim`, or
jemalloc's purge), which the training loop does after compiles and at logging steps.

jemalloc can keep that block for the next call instead of faulting it in afresh (training ran
about 1.5x faster on it on one machine, docs/speed.md). Nothing here restarts a process: run a
command on it yourself, e.g.

    LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 MALLOC_CONF=oversize_threshold:0,\\
    narenas:1,dirty_decay_ms:-1,muzzy_decay_ms:-1 make train

`prepare_entry_point` (every command calls it first) then runs JAX's CPU calls on the calling
thread, so a call's block is freed before the next call takes one (otherwise jemalloc keeps
both resident), and `release_freed_memory` purges jemalloc's free pages.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

JEMALLOC_CONFIG = "oversize_threshold:0,narenas:1,dirty_decay_ms:-1,muzzy_decay_ms:-1"
_NAMES = ("libjemalloc.so.2", "libjemalloc.so")
_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
         "/usr/local/lib")  # fmt: skip
_ALL_ARENAS = 4096  # jemalloc's MALLCTL_ARENAS_ALL


def find_jemalloc(dirs: tuple[str, ...] = _DIRS) -> Path | None:
    """The system's jemalloc shared library, or None (not Linux, or not installed)."""
    if sys.platform != "linux":
        return None
    for directory in dirs:
        for name in _NAMES:
            if (Path(directory) / name).is_file():
                return Path(directory) / name
    return None


def jemalloc_environment(env: Mapping[str, str], library: Path) -> dict[str, str]:
    """`env` for a child process on jemalloc: `library` first in LD_PRELOAD (earlier entries
    kept) and MALLOC_CONF = `JEMALLOC_CONFIG` unless `env` sets one (benchmarks use it)."""
    preload = [p for p in env.get("LD_PRELOAD", "").replace(" ", ":").split(":") if p]
    if str(library) not in preload:
        preload.insert(0, str(library))
    return {**env, "LD_PRELOAD": ":".join(preload),
            "MALLOC_CONF": env.get("MALLOC_CONF", JEMALLOC_CONFIG)}  # fmt: skip


def _mallctl():
    return getattr(ctypes.CDLL(None), "mallctl", None)


def jemalloc_loaded() -> bool:
    """True when this process allocates with jemalloc (its `mallctl` is linked in)."""
    return _mallctl() is not None


def purge_jemalloc() -> bool:
    """Hand jemalloc's free pages in every arena back to the OS; False (nothing done) when the
    process does not run on jemalloc."""
    mallctl = _mallctl()
    if mallctl is None:
        return False
    name = f"arena.{_ALL_ARENAS}.purge".encode()
    return mallctl(name, None, None, None, ctypes.c_size_t(0)) == 0


def _decay_ms(name: bytes, value: int | None = None) -> int | None:
    """Read (and with `value`, set) arena 0's `name` decay time in ms; None without jemalloc."""
    mallctl = _mallctl()
    if mallctl is None:
        return None
    old, size = ctypes.c_ssize_t(), ctypes.c_size_t(ctypes.sizeof(ctypes.c_ssize_t))
    new = ctypes.c_ssize_t(value) if value is not None else None
    status = mallctl(name, ctypes.byref(old), ctypes.byref(size),
                     ctypes.byref(new) if new is not None else None,
                     ctypes.sizeof(ctypes.c_ssize_t) if new is not None else 0)  # fmt: skip
    return old.value if status == 0 else None


@contextlib.contextmanager
def freed_pages_returned() -> Iterator[None]:
    """Inside, jemalloc returns freed pages to the OS at once (decay 0); afterwards it keeps
    them again. For XLA's compiles, whose many short-lived blocks would otherwise stay
    resident until the next purge. Nothing happens without jemalloc."""
    names = (b"arena.0.dirty_decay_ms", b"arena.0.muzzy_decay_ms")
    kept = [_decay_ms(name, 0) for name in names]
    try:
        yield
    finally:
        for name, value in zip(names, kept, strict=True):
            if value is not None:
                _decay_ms(name, value)


@functools.cache
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") else None


def release_freed_memory() -> bool:
    """Return freed heap pages to the OS: jemalloc's purge of every arena where the process
    runs on jemalloc, glibc's malloc_trim(0) otherwise. True if either did it; False where
    there is neither (macOS, musl): nothing happens there."""
    if purge_jemalloc():
        return True
    libc = _libc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


def prepare_entry_point() -> bool:
    """What each command does first, before anything uses JAX: on jemalloc, run JAX's CPU
    computations on the calling thread (`jax_cpu_enable_async_dispatch` False), so that a
    call's block of temporaries is freed before the next call is dispatched. Returns True
    where it did so; the process is never restarted."""
    if not jemalloc_loaded():
        return False
    import jax

    jax.config.update("jax_cpu_enable_async_dispatch", False)
    return True
