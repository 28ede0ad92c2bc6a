"""Host memory (glibc): freed heap pages go back to the OS on demand; XLA's per-call
temporaries stay mapped between calls."""

from __future__ import annotations

import os
import subprocess
import sys

import jax
import numpy as np
import pytest
from temporaries_probe import FAULTS_PER_CALL

from dig_jax.train.host_memory import (
    OPT_IN,
    keep_temporaries_in_heap,
    release_freed_memory,
)


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


_FAULTS_SCRIPT = (
    """
from dig_jax.train.host_memory import keep_temporaries_in_heap
applied = keep_temporaries_in_heap()
import jax
jax.config.update("jax_platforms", "cpu")
"""
    + FAULTS_PER_CALL
    + """
print(applied, min(faults[2:]))
"""
)


def _temporaries_faults(opt_in: bool) -> tuple[str, int]:
    env = {**os.environ, OPT_IN: "1" if opt_in else "0", "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([sys.executable, "-c", _FAULTS_SCRIPT], env=env, capture_output=True,
                          text=True, timeout=300, check=True)  # fmt: skip
    applied, faults = done.stdout.split()[-2:]
    return applied, int(faults)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs glibc and getrusage")
def test_temporaries_stay_mapped_between_calls():
    # 64 MiB of temporaries = 16384 pages of 4 KiB. Mapped afresh by every call (the default),
    # each call faults most of them in; kept in the heap, later calls reuse resident pages
    # (not necessarily the second or third: the heap can fragment once, see the function).
    applied, faults = _temporaries_faults(opt_in=True)
    assert applied == "True"
    assert faults < 1000, faults
    applied, faults = _temporaries_faults(opt_in=False)
    assert applied == "False"
    assert faults > 8000, faults


def test_keep_temporaries_in_heap_leaves_a_running_backend_alone():
    jax.devices()  # the backend exists: its dispatch mode can no longer change
    assert keep_temporaries_in_heap({OPT_IN: "1"}) is False
    assert keep_temporaries_in_heap({}) is False
