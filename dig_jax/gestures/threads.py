"""Run a function over items on a few threads, one contiguous chunk per thread.

For batches of small jobs whose time is in compiled kernels that release the GIL (numba's
`nogil=True`): one thread per chunk rather than a pool's future per item, so a 50 µs job is
not dwarfed by the pool's own ~20 µs per future.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def available_cpus() -> int:
    """CPUs this process may run on (its affinity where the OS says, else the CPU count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def resolve_workers(workers: int | None) -> int:
    """Threads to use: `workers` (ValueError below 1), or `available_cpus()` for None."""
    workers = available_cpus() if workers is None else int(workers)
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    return workers


def map_chunked(fn: Callable[[T], R], items: Sequence[T], workers: int | None = None) -> list[R]:
    """`[fn(x) for x in items]`, the items split into `workers` contiguous chunks: the first
    runs in the calling thread, each other one on a thread of its own (default
    `available_cpus()`; 1, or a single item, runs in the calling thread alone). The first
    exception raised by `fn`, in item order, is re-raised."""
    items = list(items)
    workers = min(resolve_workers(workers), len(items))
    if workers <= 1:
        return [fn(x) for x in items]
    bounds = [len(items) * k // workers for k in range(workers + 1)]
    results: list[list[R] | BaseException | None] = [None] * workers

    def run(k: int) -> None:
        try:
            results[k] = [fn(x) for x in items[bounds[k] : bounds[k + 1]]]
        except BaseException as err:  # re-raised in the calling thread, in item order
            results[k] = err

    threads = [threading.Thread(target=run, args=(k,)) for k in range(1, workers)]
    for thread in threads:
        thread.start()
    run(0)
    for thread in threads:
        thread.join()
    out: list[R] = []
    for chunk in results:
        if isinstance(chunk, BaseException):
            raise chunk
        out.extend(chunk)
    return out
