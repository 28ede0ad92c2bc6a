"""Large host allocations on transparent huge pages (glibc's `glibc.malloc.hugetlb=1`), opt-in.

On CPU, XLA allocates a compiled call's temporaries as one block per call (990 MiB for the
Lite segmenter's train step at batch 8 × 256²) and frees it afterwards. glibc serves blocks
that large with a fresh `mmap` every time, so every step faults in each 4 KiB page anew: 258k
minor page faults and ~0.5 s of kernel time per Lite step on the 2-core machine. With the
tunable, glibc asks the kernel for transparent huge pages (2 MiB) for such blocks: ~750 faults
per step, and a train step timed alone in its process ran 1.14–1.27× faster.

It is off unless DIG_JAX_HUGEPAGES=1: where the kernel compacts memory on a huge-page fault
(THP `defrag` "madvise", Debian's default), each fresh block must find ~500 free 2 MiB pages,
and once other processes have allocated and freed memory in between — the training loop's own
grain worker does — a step can spend seconds in the kernel (`getrusage`: 2.6–7.0 s of kernel
time in the slow steps against 0.2–0.3 s, at the same ~1100 faults). Real training runs
(`python -m dig_jax.train`, the Lite `offline` config at 224² with its one grain worker,
alternated): 100 steps took 271 and 264 s with the tunable against 225 and 233 s without
(kernel CPU 91 / 91 s against 63 / 64 s), 60 steps 218 and 207 s against 190 and 187 s.

A glibc tunable is read once, when the process starts, so with DIG_JAX_HUGEPAGES=1 the
command-line entry points re-execute themselves with it set (`reexec_with_hugepages`, before
anything heavy is imported). Library users (notebooks, their own scripts) get the same by
starting Python with `GLIBC_TUNABLES=glibc.malloc.hugetlb=1` in the environment.
`dig_jax.train.host_memory.keep_temporaries_in_heap` (DIG_JAX_HEAP_TEMPORARIES=1) removes the
faults another way: the block stays mapped in glibc's main heap between calls.
Both are glibc's: on jemalloc, the entry points' default where it is installed
(`dig_jax.allocator`), which removes the faults by reusing the block, they do nothing.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping
from pathlib import Path

from dig_jax.allocator import reexec

TUNABLE = "glibc.malloc.hugetlb"
OPT_IN = "DIG_JAX_HUGEPAGES"
_THP_MODE = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def _glibc_has_tunable() -> bool:
    """True on Linux with glibc ≥ 2.35 (the first with `glibc.malloc.hugetlb`)."""
    if sys.platform != "linux":
        return False
    name, version = platform.libc_ver()
    try:
        major, minor = (int(part) for part in version.split(".")[:2])
    except ValueError:
        return False
    return name == "glibc" and (major, minor) >= (2, 35)


def _kernel_allows_thp(mode_file: Path = _THP_MODE) -> bool:
    """True unless the kernel's transparent huge pages are off ("[never]") or unknown."""
    try:
        return "[never]" not in mode_file.read_text()
    except OSError:
        return False


def hugepage_environment(env: Mapping[str, str]) -> dict[str, str] | None:
    """`env` with `glibc.malloc.hugetlb=1` added to GLIBC_TUNABLES (other tunables kept) when
    it opts in (DIG_JAX_HUGEPAGES=1); None when nothing should change: no opt-in, or the
    tunable is already set (to any value)."""
    if env.get(OPT_IN, "0") != "1":
        return None
    tunables = env.get("GLIBC_TUNABLES", "")
    if any(item.split("=", 1)[0] == TUNABLE for item in tunables.split(":") if item):
        return None
    return {**env, "GLIBC_TUNABLES": ":".join(filter(None, (tunables, f"{TUNABLE}=1")))}


def hugepages_supported() -> bool:
    """True where glibc has the tunable and the kernel's transparent huge pages are not off."""
    return _glibc_has_tunable() and _kernel_allows_thp()


def reexec_with_hugepages() -> None:
    """Replace this process by the same command line with the tunable set (same pid), where
    DIG_JAX_HUGEPAGES=1 opts in, glibc and the kernel support it and it is not set yet;
    otherwise return and do nothing.
    Call first thing under `if __name__ == "__main__":` — never from library code."""
    if not hugepages_supported():
        return
    env = hugepage_environment(os.environ)
    if env is not None:
        reexec(env)
