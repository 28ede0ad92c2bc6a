"""release_freed_memory gives freed heap pages back to the OS (glibc)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from dig_jax.train.host_memory import release_freed_memory


def _rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs glibc and /proc")
def test_freed_heap_pages_go_back_to_the_os():
    # 3000 blocks of 64 KiB (below glibc's mmap threshold: they live on the heap), written so
    # they are resident; freeing all but the last leaves ~190 MiB free inside the heap, which
    # glibc keeps mapped because the last block pins the heap's top.
    blocks = [np.ones(8192) for _ in range(3000)]
    keep = blocks[-1]
    del blocks
    before = _rss_mib()
    assert release_freed_memory() is True
    after = _rss_mib()
    assert before - after > 100, (before, after)
    assert keep.sum() == 8192
