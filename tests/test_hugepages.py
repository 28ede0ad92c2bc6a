"""The CLIs' re-execution with glibc's huge-page tunable (`dig_jax.hugepages`)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dig_jax import hugepages
from dig_jax.hugepages import hugepage_environment

PRINT_TUNABLES = (
    "import os; from dig_jax.hugepages import reexec_with_hugepages as r; r(); "
    "print(os.getpid(), os.environ.get('GLIBC_TUNABLES', ''))"
)


def test_adds_the_tunable_and_keeps_others():
    expected = {"A": "1", "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}
    assert hugepage_environment({"A": "1"}) == expected
    env = hugepage_environment({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"})
    assert env["GLIBC_TUNABLES"] == "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"


@pytest.mark.parametrize(
    "env",
    [
        {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0"},  # the user's own choice wins
        {"GLIBC_TUNABLES": "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"},
        {"DIG_JAX_HUGEPAGES": "0"},
    ],
)
def test_leaves_a_set_tunable_or_an_opt_out_alone(env):
    assert hugepage_environment(env) is None


def test_a_similar_tunable_name_is_not_taken_for_it():
    env = hugepage_environment({"GLIBC_TUNABLES": "glibc.malloc.hugetlbx=1"})
    assert env["GLIBC_TUNABLES"].endswith(":glibc.malloc.hugetlb=1")


@pytest.mark.parametrize(
    ("text", "allowed"),
    [("always [madvise] never\n", True), ("[always] madvise never\n", True),
     ("always madvise [never]\n", False)],
)  # fmt: skip
def test_kernel_mode(tmp_path, text, allowed):
    mode = tmp_path / "enabled"
    mode.write_text(text)
    assert hugepages._kernel_allows_thp(mode) is allowed
    assert hugepages._kernel_allows_thp(tmp_path / "missing") is False


def test_hint_only_when_the_tunable_would_change_something(monkeypatch):
    monkeypatch.setattr(hugepages, "_glibc_has_tunable", lambda: True)
    monkeypatch.setattr(hugepages, "_kernel_allows_thp", lambda: True)
    assert "GLIBC_TUNABLES=glibc.malloc.hugetlb=1" in hugepages.missing_hint({})
    assert hugepages.missing_hint({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}) is None
    assert hugepages.missing_hint({"DIG_JAX_HUGEPAGES": "0"}) is None
    monkeypatch.setattr(hugepages, "_kernel_allows_thp", lambda: False)
    assert hugepages.missing_hint({}) is None


def _run(env: dict[str, str]) -> str:
    """The tunables a child ended with; it must have kept its pid (execve, not a new child)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", PRINT_TUNABLES], env=env, stdout=subprocess.PIPE, text=True
    )
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    pid, _, tunables = out.strip().partition(" ")
    assert int(pid) == proc.pid
    return tunables


def test_reexec_sets_the_tunable_in_the_same_process():
    if not (hugepages._glibc_has_tunable() and hugepages._kernel_allows_thp()):
        pytest.skip("needs Linux, glibc >= 2.35 and transparent huge pages not 'never'")
    env = {k: v for k, v in os.environ.items() if k not in ("GLIBC_TUNABLES", "DIG_JAX_HUGEPAGES")}
    assert _run(env) == "glibc.malloc.hugetlb=1"
    assert _run({**env, "DIG_JAX_HUGEPAGES": "0"}) == ""
    assert _run({**env, "GLIBC_TUNABLES": "glibc.malloc.hugetlb=0"}) == "glibc.malloc.hugetlb=0"
