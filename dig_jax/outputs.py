"""Results written so that a failed or empty run never replaces an earlier one.

Every file is written under a temporary name beside its target, then renamed over it (atomic
on one filesystem); a folder is built in a staging folder beside its target and swapped in
whole. The command-line tools (build, evaluate, attack) write their results this way, and only
once they have something to write.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write `text` to `path` through a temporary file and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def staging_dir(target: str | Path) -> Path:
    """A fresh empty folder beside `target` to build it in (see `replace_with`)."""
    target = Path(target)
    stage = target.with_name(f".{target.name}.partial-{os.getpid()}")
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    return stage


def replace_with(staged: str | Path, target: str | Path) -> Path:
    """Move the file or folder `staged` to `target`, replacing what is there; an old folder is
    renamed away first and removed only once the new one is in place."""
    staged, target = Path(staged), Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    if staged.is_dir() and target.exists():
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        shutil.rmtree(old, ignore_errors=True)
        os.rename(target, old)
        os.rename(staged, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(staged, target)
    return target
