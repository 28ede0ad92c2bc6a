"""Give memory that the process has freed back to the OS (glibc's malloc_trim).

glibc keeps freed heap memory mapped for reuse. After XLA compiles a step, and between steps
whose temporaries come and go, a JAX process on CPU holds far more resident memory than it
uses: in `benchmarks/vs_torch.py` runs the HRNet-18s train step's process peaked at 3.3 GiB RSS
without this, and at 2.2 GiB (a later run) when freed memory was returned once after warm-up.
The training loop calls `release_freed_memory` at every logging step (after the first compile,
and after evaluations that compile their own functions).

`keep_temporaries_in_heap` (opt-in, DIG_JAX_HEAP_TEMPORARIES=1) does the opposite for XLA's
per-call block of temporaries: it keeps the block mapped between calls, trading page faults
for the risk of a fragmented heap (see the function). The entry points' default, jemalloc
where installed (`dig_jax.allocator`), keeps the block without that risk; there
`release_freed_memory` purges jemalloc's free pages instead.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sys

from dig_jax.allocator import jemalloc_loaded, purge_jemalloc


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
    runs on jemalloc (`dig_jax.allocator`), glibc's malloc_trim(0) otherwise. True if either
    did it; False where there is neither (macOS, musl): nothing happens there."""
    if purge_jemalloc():
        return True
    libc = _libc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


OPT_IN = "DIG_JAX_HEAP_TEMPORARIES"  # "1": keep temporaries in the heap (off by default)
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4  # glibc's mallopt parameters (malloc.h)


def keep_temporaries_in_heap(environ: dict[str, str] | None = None) -> bool:
    """Keep XLA's per-call block of temporaries mapped between calls (CPU, glibc).

    XLA allocates a compiled call's temporaries as one block (990 MiB for the Lite segmenter's
    train step at batch 8 x 256²) and frees it after the call. glibc serves a block that large
    with a fresh `mmap` each time, so every call faults in every 4 KiB page again: ~258k minor
    faults and ~0.5 s of kernel time per Lite step on the 2-core machine. This turns `mmap`
    off for the heap (M_MMAP_MAX = 0), stops glibc giving the heap's top back after each free
    (M_TRIM_THRESHOLD), and runs JAX's CPU computations on the calling thread
    (`jax_cpu_enable_async_dispatch` False): the block then comes from the main thread's heap,
    where a freed block is reused by the next call. glibc's per-thread heaps would still `mmap`
    it, so both are needed. `release_freed_memory` still hands freed pages back on demand.

    Opt-in (DIG_JAX_HEAP_TEMPORARIES=1), because the heap can fragment: once anything else is
    allocated inside the freed block between calls, the next call takes a second block and
    both stay resident. Real training (`python -m dig_jax.train`, the Lite `offline` config at
    224², one grain worker, steps 30-130) ran 1.07-1.20x faster with it (1.055 / 0.910 / 0.972
    against 1.268 / 1.027 / 1.038 s per step, three pairs) but peaked at 2540 MiB RSS against
    1805 MiB (one run each), and a bare step loop with a thread reading /proc beside it went
    from 1592 to 2589 MiB at its second call. A loop with nothing else running (`vs_torch.py`)
    keeps one block: no faults after the first calls, the same RSS.

    Call it before JAX creates its CPU client (before the first computation); the entry points
    do. Returns True where it took effect; False without the opt-in, without glibc, or when
    the backend already exists (its dispatch mode is fixed then)."""
    environ = os.environ if environ is None else environ
    if environ.get(OPT_IN, "0") != "1":
        return False
    libc = _libc()
    if libc is None or not hasattr(libc, "mallopt") or jemalloc_loaded():
        return False
    if not _run_cpu_calls_inline():
        return False
    libc.mallopt(_M_MMAP_MAX, 0)
    libc.mallopt(_M_TRIM_THRESHOLD, ctypes.c_int(2**31 - 1))
    return True


def _run_cpu_calls_inline() -> bool:
    """Run JAX's CPU computations on the calling thread (`jax_cpu_enable_async_dispatch`
    False); False, changing nothing, once the backends exist (the mode is fixed then)."""
    from jax._src import xla_bridge

    if getattr(xla_bridge, "backends_are_initialized", lambda: False)():
        return False
    import jax

    jax.config.update("jax_cpu_enable_async_dispatch", False)
    return True


def free_temporaries_before_return() -> bool:
    """On jemalloc, run JAX's CPU computations on the calling thread, so that a call's block
    of temporaries is freed before the call returns.

    With asynchronous dispatch, XLA frees the block on its own thread just after it marks the
    outputs ready, so a next call dispatched at once can take a second block while the first
    is still held; jemalloc, which keeps freed pages for reuse (`dig_jax.allocator`), then
    keeps both resident. The Lite train step at batch 8 x 256², called back to back: 1599 MiB
    RSS for its first calls, 2590 from a later call on (at its 3rd-6th call in four runs);
    with 5 ms between calls, or with this, 1596-1625 MiB over 16 calls, at the same speed
    (0.44-0.61 s per step). Call it before JAX creates its backends; the entry points do.
    True where it took effect; False without jemalloc or once the backends exist."""
    return jemalloc_loaded() and _run_cpu_calls_inline()


def prepare_entry_point() -> None:
    """What each command-line entry point does first, before anything uses JAX: re-execute
    once (same pid) with jemalloc preloaded where installed (`dig_jax.allocator`, on unless
    DIG_JAX_JEMALLOC=0) and glibc's huge pages where DIG_JAX_HUGEPAGES=1 opts in
    (`dig_jax.hugepages`), then `keep_temporaries_in_heap` where DIG_JAX_HEAP_TEMPORARIES=1
    opts in (glibc only), and on jemalloc `free_temporaries_before_return`. The processes it
    starts afterwards (grain's workers) get the environment without jemalloc
    (`allocator.children_environment`). A DIG_JAX_JEMALLOC path that does not exist ends the
    process with a one-line error. Never from library code: all of it changes the whole
    process."""
    from dig_jax.allocator import (
        children_environment,
        find_jemalloc,
        jemalloc_environment,
        reexec,
    )
    from dig_jax.hugepages import hugepage_environment, hugepages_supported

    env = dict(os.environ)
    if hugepages_supported():
        env = hugepage_environment(env) or env
    if not jemalloc_loaded():  # a second call in the same process changes nothing
        try:
            env = jemalloc_environment(env, find_jemalloc()) or env
        except ValueError as error:
            sys.exit(f"error: {error}")
    if env != dict(os.environ):
        reexec(env)
    children = children_environment(os.environ)
    if children is not None:  # the processes this one starts run on glibc (see it)
        for key in set(os.environ) - set(children):
            del os.environ[key]
        os.environ.update(children)
    keep_temporaries_in_heap()
    free_temporaries_before_return()
