"""Run a function over items on a few threads, one contiguous chunk per thread.

For batches of small jobs whose time is in compiled kernels that release the GIL (numba's
`nogil=True`): one thread per chunk rather than a pool's future per item, so a 50 µs job is
not dwarfed by the pool's own ~20 µs per future.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")
S = TypeVar("S")


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


def map_in_order(
    fn: Callable[[T], R], then: Callable[[R], S], items: Sequence[T], workers: int | None = None
) -> list[S]:
    """`[then(fn(x)) for x in items]`: `fn` on `workers` threads (the calling thread among
    them; default `available_cpus()`), `then` in the calling thread, in item order, as each
    result is ready — while it waits for the next one, it runs `fn` on an item no thread has
    taken. For a compiled `fn` that releases the GIL and a `then` that holds it (a gesture's
    outline, then its random draws): `then` overlaps the other items' `fn` instead of
    following all of them. The first exception in item order is re-raised, after `then` ran
    on the items before it (as the loop would)."""
    items = list(items)
    n = len(items)
    workers = min(resolve_workers(workers), n)
    if workers <= 1:
        return [then(fn(x)) for x in items]
    results: list[tuple[bool, object] | None] = [None] * n
    ready = [threading.Event() for _ in range(n)]
    claims = itertools.count()  # next() is atomic: each item is taken by one thread
    stopping = threading.Event()

    def run(i: int) -> None:
        try:
            results[i] = (True, fn(items[i]))
        except BaseException as err:  # re-raised in the calling thread, in item order
            results[i] = (False, err)
        ready[i].set()

    def work() -> None:
        while not stopping.is_set():
            i = next(claims)
            if i >= n:
                return
            run(i)

    threads = [threading.Thread(target=work) for _ in range(workers - 1)]
    for thread in threads:
        thread.start()
    out: list[S] = []
    try:
        for i in range(n):
            while not ready[i].is_set():
                j = next(claims)
                if j < n:
                    run(j)
                else:
                    ready[i].wait()
            ok, value = results[i]
            if not ok:
                raise value
            out.append(then(value))
    finally:
        stopping.set()
        for thread in threads:
            thread.join()
    return out
