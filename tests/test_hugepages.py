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


ON = {"DIG_JAX_HUGEPAGES": "1"}


def test_adds_the_tunable_and_keeps_others_when_opted_in():
    expected = {"A": "1", **ON, "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}
    assert hugepage_environment({"A": "1", **ON}) == expected
    env = hugepage_environment({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2", **ON})
    assert env["GLIBC_TUNABLES"] == "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"


@pytest.mark.parametrize(
    "env",
    [
        {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0", **ON},  # the user's own choice wins
        {"GLIBC_TUNABLES": "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1", **ON},
        {},  # off by default
        {"DIG_JAX_HUGEPAGES": "0"},
        {"DIG_JAX_HUGEPAGES": "yes"},  # only "1" opts in
    ],
)
def test_leaves_a_set_tunable_or_no_opt_in_alone(env):
    assert hugepage_environment(env) is None


def test_a_similar_tunable_name_is_not_taken_for_it():
    env = hugepage_environment({"GLIBC_TUNABLES": "glibc.malloc.hugetlbx=1", **ON})
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
    assert _run(env) == ""
    assert _run({**env, **ON}) == "glibc.malloc.hugetlb=1"
    users_own = {**env, **ON, "GLIBC_TUNABLES": "glibc.malloc.hugetlb=0"}
    assert _run(users_own) == "glibc.malloc.hugetlb=0"
