"""The entry points' allocator (`dig_jax.allocator`): jemalloc preloaded where installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from temporaries_probe import FAULTS_PER_CALL

from dig_jax.allocator import (
    ADDED,
    CONFIG,
    SETTING,
    children_environment,
    find_jemalloc,
    jemalloc_environment,
)

LIBRARY = Path("/opt/lib/libjemalloc.so.2")


def test_preloads_the_library_first_and_keeps_the_rest():
    env = jemalloc_environment({"A": "1", "LD_PRELOAD": "/x/libfoo.so"}, LIBRARY)
    assert env == {"A": "1", "LD_PRELOAD": f"{LIBRARY}:/x/libfoo.so", "MALLOC_CONF": CONFIG,
                   ADDED: f"{LIBRARY}|1"}  # fmt: skip
    assert jemalloc_environment({}, LIBRARY)["LD_PRELOAD"] == str(LIBRARY)


def test_a_users_malloc_conf_wins():
    env = jemalloc_environment({"MALLOC_CONF": "narenas:4"}, LIBRARY)
    assert env["MALLOC_CONF"] == "narenas:4"


@pytest.mark.parametrize(
    "original",
    [
        {},
        {"A": "1"},
        {"LD_PRELOAD": "/x/libfoo.so"},
        {"MALLOC_CONF": "narenas:4", "B": "2"},
        {"LD_PRELOAD": "/x/a.so /x/b.so", "MALLOC_CONF": "narenas:4"},
    ],
)
def test_children_get_the_environment_back_without_jemalloc(original):
    added = jemalloc_environment(original, LIBRARY)
    expected = dict(original)
    if "LD_PRELOAD" in original:
        expected["LD_PRELOAD"] = original["LD_PRELOAD"].replace(" ", ":")
    assert children_environment(added) == expected
    assert children_environment(original) is None  # nothing added: nothing to take away


@pytest.mark.parametrize(
    ("env", "library"),
    [
        ({SETTING: "0"}, LIBRARY),  # turned off
        ({}, None),  # not installed
        ({"LD_PRELOAD": f"/x/libfoo.so {LIBRARY}"}, LIBRARY),  # already there (space-separated)
    ],
)
def test_nothing_changes(env, library):
    assert jemalloc_environment(env, library) is None


def test_a_path_setting_picks_the_library(tmp_path):
    library = tmp_path / "libjemalloc.so.2"
    library.write_bytes(b"")
    env = jemalloc_environment({SETTING: str(library)}, None)
    assert env["LD_PRELOAD"] == str(library)


def test_a_missing_path_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match=r"DIG_JAX_JEMALLOC=.*no such library"):
        jemalloc_environment({SETTING: str(tmp_path / "nope.so")}, LIBRARY)


def test_find_jemalloc_looks_in_the_given_folders(tmp_path):
    assert find_jemalloc((str(tmp_path),)) is None or sys.platform != "linux"
    (tmp_path / "libjemalloc.so.2").write_bytes(b"")
    expected = tmp_path / "libjemalloc.so.2" if sys.platform == "linux" else None
    assert find_jemalloc((str(tmp_path),)) == expected


def _run_entry(script: str, **env: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    full.update({"JAX_PLATFORMS": "cpu", **env})
    return subprocess.run([sys.executable, "-c", script], env=full, capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def test_a_missing_library_path_stops_the_entry_point_with_one_line(tmp_path):
    script = "from dig_jax.train.host_memory import prepare_entry_point as p; p(); print('ran')"
    done = _run_entry(script, **{SETTING: str(tmp_path / "nope.so")})
    assert done.returncode != 0 and "ran" not in done.stdout
    assert done.stderr.strip().splitlines() == [
        f'error: {SETTING}={str(tmp_path / "nope.so")!r}: no such library ("0" turns jemalloc off)'
    ]


_ENTRY_SCRIPT = (
    """
import os
print("pid", os.getpid(), flush=True)
from dig_jax.train.host_memory import prepare_entry_point, release_freed_memory
prepare_entry_point()
from dig_jax.allocator import jemalloc_loaded
"""
    + FAULTS_PER_CALL
    + """
print("after", os.getpid(), jemalloc_loaded(), release_freed_memory(), min(faults[2:]))
"""
)


@pytest.mark.skipif(find_jemalloc() is None, reason="jemalloc is not installed (libjemalloc2)")
def test_the_entry_point_restarts_on_jemalloc_and_keeps_temporaries_mapped():
    done = _run_entry(_ENTRY_SCRIPT)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.split("\n")
    pids = {line.split()[1] for line in lines if line.startswith("pid")}
    after = next(line.split()[1:] for line in lines if line.startswith("after"))
    assert pids == {after[0]}  # printed twice, before and after the re-execution: same pid
    assert after[1:3] == ["True", "True"]  # jemalloc linked in; its purge ran
    # 64 MiB of temporaries = 16384 pages; glibc maps them afresh on every call
    # (test_host_memory), jemalloc hands the same resident pages to the next call.
    assert int(after[3]) < 1000, after


_BACK_TO_BACK_SCRIPT = """
from dig_jax.train.host_memory import prepare_entry_point
prepare_entry_point()
import jax, jax.numpy as jnp
def rss_mib():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS"))
f = jax.jit(lambda x, w1, w2: (x @ w1) @ w2)  # x @ w1: a 64 MiB temporary
args = jnp.ones((8192, 32)), jnp.ones((32, 2048)), jnp.ones((2048, 8))
compiled = f.lower(*args).compile()
compiled(*args).block_until_ready()
first = peak = rss_mib()
for _ in range(100):
    compiled(*args).block_until_ready()
    peak = max(peak, rss_mib())
print(jax.config.read("jax_cpu_enable_async_dispatch"), round(peak - first))
"""


@pytest.mark.skipif(find_jemalloc() is None, reason="jemalloc is not installed (libjemalloc2)")
def test_back_to_back_calls_reuse_one_block_of_temporaries_on_jemalloc():
    # Dispatched asynchronously, the next call could take a second block before XLA's thread
    # freed the first, and jemalloc would keep both (+64 MiB here, every run seen).
    done = _run_entry(_BACK_TO_BACK_SCRIPT)
    assert done.returncode == 0, done.stderr[-2000:]
    asynchronous, growth = done.stdout.split()
    assert asynchronous == "False"
    assert int(growth) < 32, done.stdout


_CHILDREN_SCRIPT = """
import os, subprocess, sys
print("pid", os.getpid(), flush=True)
from dig_jax.train.host_memory import prepare_entry_point
prepare_entry_point()
prepare_entry_point()  # a second call (dig-jax, then the command's own main): no restart
from dig_jax.allocator import jemalloc_loaded
probe = "from dig_jax.allocator import jemalloc_loaded as j; print(j())"
child = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
print("after", jemalloc_loaded(), child.stdout.strip(), "MALLOC_CONF" in os.environ,
      repr(os.environ.get("LD_PRELOAD", "")))
"""


@pytest.mark.skipif(find_jemalloc() is None, reason="jemalloc is not installed (libjemalloc2)")
def test_processes_the_entry_point_starts_run_on_glibc():
    done = _run_entry(_CHILDREN_SCRIPT)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.split("\n")
    assert len([line for line in lines if line.startswith("pid")]) == 2  # one restart only
    after = next(line.split()[1:] for line in lines if line.startswith("after"))
    assert after == ["True", "False", "False", "''"]


def test_the_entry_point_stays_on_glibc_when_turned_off():
    done = _run_entry(_ENTRY_SCRIPT, **{SETTING: "0"})
    assert done.returncode == 0, done.stderr[-2000:]
    after = next(line.split()[1:] for line in done.stdout.split("\n") if line.startswith("after"))
    assert after[1] == "False"
    assert int(after[3]) > 8000, after


_DECAY_SCRIPT = """
from dig_jax.allocator import _decay_ms, freed_pages_returned
name = b"arena.0.dirty_decay_ms"
before = _decay_ms(name)
with freed_pages_returned():
    inside = _decay_ms(name)
print(before, inside, _decay_ms(name))
"""


@pytest.mark.skipif(find_jemalloc() is None, reason="jemalloc is not installed (libjemalloc2)")
def test_compiles_return_freed_pages_at_once_then_jemalloc_keeps_them_again():
    env = jemalloc_environment({}, find_jemalloc())
    done = _run_entry(_DECAY_SCRIPT, **env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["-1", "0", "-1"]


def test_freed_pages_returned_does_nothing_on_glibc():
    done = _run_entry(_DECAY_SCRIPT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["None", "None", "None"]
