"""Host memory (`dig_jax.cpu.memory`): freed pages go back to the OS on demand; a process the
user starts on jemalloc keeps XLA's temporaries mapped between calls; nothing restarts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dig_jax.cpu.memory import (
    JEMALLOC_CONFIG,
    find_jemalloc,
    jemalloc_environment,
    release_freed_memory,
)

FAULTS_PER_CALL = """
import resource
import jax, jax.numpy as jnp
f = jax.jit(lambda x, w1, w2: (x @ w1) @ w2)  # x @ w1: a 64 MiB temporary (16384 pages)
args = jnp.ones((8192, 32)), jnp.ones((32, 2048)), jnp.ones((2048, 8))
compiled = f.lower(*args).compile()
assert compiled.memory_analysis().temp_size_in_bytes >= 2**26
faults = []
for _ in range(10):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    compiled(*args).block_until_ready()
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""
ENTRY_SCRIPT = (
    """
import os
print("pid", os.getpid(), flush=True)
from dig_jax.cpu.memory import jemalloc_loaded, prepare_entry_point, release_freed_memory
ran = prepare_entry_point()
"""
    + FAULTS_PER_CALL
    + """
print("after", os.getpid(), ran, jemalloc_loaded(), release_freed_memory(), min(faults[2:]),
      jax.config.read("jax_cpu_enable_async_dispatch"))
"""
)
needs_jemalloc = pytest.mark.skipif(
    find_jemalloc() is None, reason="jemalloc is not installed (libjemalloc2)"
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


def test_jemalloc_environment_preloads_first_and_keeps_a_users_config():
    library = Path("/opt/lib/libjemalloc.so.2")
    env = jemalloc_environment({"A": "1", "LD_PRELOAD": "/x/libfoo.so"}, library)
    assert env == {"A": "1", "LD_PRELOAD": f"{library}:/x/libfoo.so",
                   "MALLOC_CONF": JEMALLOC_CONFIG}  # fmt: skip
    assert jemalloc_environment({"MALLOC_CONF": "narenas:4"}, library)["MALLOC_CONF"] == "narenas:4"


def _run(script: str, env: dict[str, str]) -> list[str]:
    full = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "MALLOC_CONF")}
    full.update({"JAX_PLATFORMS": "cpu", **env})
    done = subprocess.run([sys.executable, "-c", script], env=full, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split("\n")


def test_on_glibc_the_entry_point_changes_nothing_and_never_restarts():
    lines = _run(ENTRY_SCRIPT, {})
    assert len([line for line in lines if line.startswith("pid")]) == 1
    after = next(line.split()[1:] for line in lines if line.startswith("after"))
    assert after[1:3] == ["False", "False"] and after[5] == "True"  # async dispatch kept


@needs_jemalloc
def test_on_jemalloc_temporaries_stay_mapped_and_calls_run_on_the_calling_thread():
    lines = _run(ENTRY_SCRIPT, jemalloc_environment({}, find_jemalloc()))
    assert len([line for line in lines if line.startswith("pid")]) == 1  # no restart
    after = next(line.split()[1:] for line in lines if line.startswith("after"))
    assert after[1:4] == ["True", "True", "True"] and after[5] == "False"
    # 64 MiB of temporaries = 16384 pages; glibc maps them afresh on every call, jemalloc hands
    # the same resident pages to the next call.
    assert int(after[4]) < 1000, after


_DECAY_SCRIPT = """
from dig_jax.cpu.memory import _decay_ms, freed_pages_returned
name = b"arena.0.dirty_decay_ms"
before = _decay_ms(name)
with freed_pages_returned():
    inside = _decay_ms(name)
print(before, inside, _decay_ms(name))
"""


@needs_jemalloc
def test_compiles_return_freed_pages_at_once_then_jemalloc_keeps_them_again():
    lines = _run(_DECAY_SCRIPT, jemalloc_environment({}, find_jemalloc()))
    assert lines[0].split() == ["-1", "0", "-1"]


def test_freed_pages_returned_does_nothing_on_glibc():
    assert _run(_DECAY_SCRIPT, {})[0].split() == ["None", "None", "None"]
