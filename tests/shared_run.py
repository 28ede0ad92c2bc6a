"""A folder built once per test run, shared by every pytest-xdist worker (the first one to ask
builds it while the others wait on a file lock, then all read it).

Importable from every test module: `tests/` is on sys.path through its conftest.py.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def once_per_run(
    tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]
) -> Path:
    """`<this run's temp folder>/<name>/run`, created empty and filled by `build(folder)` the
    first time any worker asks for it (a failed build is retried by the next worker that asks)."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # this run's folder
    folder, done = root / name / "run", root / name / "done"
    with (root / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(folder.parent, ignore_errors=True)
            folder.mkdir(parents=True)
            build(folder)
            done.touch()
    return folder
