"""Give memory that the process has freed back to the OS (glibc's malloc_trim).

glibc keeps freed heap memory mapped for reuse. After XLA compiles a step, and between steps
whose temporaries come and go, a JAX process on CPU holds far more resident memory than it
uses: in `benchmarks/vs_torch.py` runs the HRNet-18s train step's process peaked at 3.3 GiB RSS
without this, and at 2.2 GiB (a later run) when freed memory was returned once after warm-up.
The training loop calls `release_freed_memory` at every logging step (after the first compile,
and after evaluations that compile their own functions).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools


@functools.cache
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") else None


def release_freed_memory() -> bool:
    """malloc_trim(0): return freed heap pages to the OS. True if glibc did it (Linux); False
    where there is no glibc (macOS, musl): nothing happens there."""
    libc = _libc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True
