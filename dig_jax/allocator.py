"""The command-line entry points run on jemalloc where it is installed (on by default).

On CPU, XLA allocates a compiled call's temporaries as one block per call (760 MiB for the Lite
segmenter's train step at batch 8 × 224², 990 MiB at 256²) and frees it when the call ends.
glibc serves a block that large with a fresh `mmap` each time, so every step faults in every
4 KiB page again: ~220k minor page faults and ~0.5 s of kernel time per Lite training step on
the 2-core machine. jemalloc, configured here to keep freed pages until told
(`dirty_decay_ms:-1`), hands the same pages to the next call, which then faults nothing.

Why this configuration (`MALLOC_CONF`, README Speed has the runs): a caching allocator keeps
the block only if nothing else is carved out of it between calls, else the next call takes a
second block and both stay resident. tcmalloc and glibc's own heap (`host_memory.
keep_temporaries_in_heap`) did exactly that in training (2509-2540 MiB of RSS against 1742
MiB on glibc); jemalloc does not split an extent for a request 64x smaller
(`lg_extent_max_active_fit`), and one arena (`narenas:1`) keeps a single free block for
whichever thread runs the next call. Oversize requests go to that arena too
(`oversize_threshold:0`: by default they bypass the cache). `dig_jax.train.host_memory.
release_freed_memory` purges the free pages on demand (after compiles, at logging steps), and
`freed_pages_returned` hands them back at once while XLA compiles (whose many short-lived
blocks would otherwise stay resident until that purge). A call dispatched while XLA's thread
is still freeing the last call's block also takes a second block, so on jemalloc the entry
points run CPU calls on the calling thread (`host_memory.free_temporaries_before_return`).
Only the entry point's own process runs so: the processes it starts (grain's workers) get the
environment back without jemalloc (`children_environment`), since nothing purges theirs.

An allocator is chosen when a process starts (the dynamic loader's LD_PRELOAD), so the
entry points re-execute themselves once, same pid, with it set (`dig_jax.train.host_memory.
prepare_entry_point`). DIG_JAX_JEMALLOC selects: unset or "1" — the system's libjemalloc
(Debian/Ubuntu: `apt install libjemalloc2`) where found, glibc otherwise; "0" — glibc; a path —
that library. Library users (notebooks, their own scripts) get the same by starting Python
with the variables of `jemalloc_environment` and calling `free_temporaries_before_return`
before their first JAX computation.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

SETTING = "DIG_JAX_JEMALLOC"
CONFIG = "oversize_threshold:0,narenas:1,dirty_decay_ms:-1,muzzy_decay_ms:-1"
ADDED = "_DIG_JAX_JEMALLOC_ADDED"  # "library|1": what jemalloc_environment added (1: MALLOC_CONF)
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


def _preloaded(env: Mapping[str, str]) -> list[str]:
    """The libraries of env's LD_PRELOAD (separated by colons or spaces)."""
    return [p for p in env.get("LD_PRELOAD", "").replace(" ", ":").split(":") if p]


def jemalloc_environment(env: Mapping[str, str], library: Path | None) -> dict[str, str] | None:
    """`env` with `library` first in LD_PRELOAD (earlier entries kept) and MALLOC_CONF set to
    CONFIG (a user's MALLOC_CONF is kept); None when nothing should change:
    DIG_JAX_JEMALLOC="0", no library, or the library is already preloaded. A DIG_JAX_JEMALLOC
    path overrides `library`; one that is not a file raises ValueError."""
    choice = env.get(SETTING, "1")
    if choice == "0":
        return None
    if choice != "1":
        library = Path(choice)
        if not library.is_file():
            raise ValueError(f'{SETTING}={choice!r}: no such library ("0" turns jemalloc off)')
    if library is None:
        return None
    preload = _preloaded(env)
    if str(library) in preload:
        return None
    return {**env, "LD_PRELOAD": ":".join([str(library), *preload]),
            "MALLOC_CONF": env.get("MALLOC_CONF", CONFIG),
            ADDED: f"{library}|{int('MALLOC_CONF' not in env)}"}  # fmt: skip


def children_environment(env: Mapping[str, str]) -> dict[str, str] | None:
    """`env` without what `jemalloc_environment` added to it (its library in LD_PRELOAD, its
    MALLOC_CONF, its marker); None when it added nothing. For the processes an entry point
    starts (grain's workers): with decay off and never purged, a worker on jemalloc grew from
    439 to 547 MiB over 100 training steps where on glibc it stayed at ~400-423 MiB (one Lite
    `offline` run each); an entry point among them re-adds jemalloc for itself."""
    if ADDED not in env:
        return None
    library, conf_added = env[ADDED].rsplit("|", 1)
    out = {k: v for k, v in env.items() if k != ADDED}
    preload = [p for p in _preloaded(out) if p != library]
    if preload:
        out["LD_PRELOAD"] = ":".join(preload)
    else:
        out.pop("LD_PRELOAD", None)
    if conf_added == "1":
        out.pop("MALLOC_CONF", None)
    return out


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
    """Inside, jemalloc returns freed pages to the OS at once (decay 0), as glibc does with
    large blocks; afterwards it keeps them again. For XLA's compiles: their many short-lived
    blocks would otherwise stay resident until the next purge (the Lite train step at batch
    8 x 256²: 1354 MiB peak RSS compiling without, 1247 with; one run each). Nothing happens
    without jemalloc."""
    names = (b"arena.0.dirty_decay_ms", b"arena.0.muzzy_decay_ms")
    kept = [_decay_ms(name, 0) for name in names]
    try:
        yield
    finally:
        for name, value in zip(names, kept, strict=True):
            if value is not None:
                _decay_ms(name, value)


def reexec(env: Mapping[str, str]) -> None:
    """Replace this process by the same command line under `env` (same pid); returns only
    where exec fails (a sandbox without it), the process then runs on as it is."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(sys.executable, sys.orig_argv, dict(env))
    except OSError:
        return
