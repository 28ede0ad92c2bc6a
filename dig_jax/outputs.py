"""Results written so that a failed or empty run never replaces an earlier one.

Every file is written under a temporary name beside its target, then renamed over it (atomic
on one filesystem); a folder is built in a staging folder beside its target and swapped in
whole. The command-line tools (build, evaluate, attack) write their results this way, and only
once they have something to write. Each records what it wrote in `MANIFEST`, and checks its
output folder before any work (`check_out_dir`): a file it did not write is never replaced.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any


def save_figure(fig: Any, path: str | Path, dpi: int = 100) -> Path:
    """Lay out a matplotlib figure, write it to `path` (parents created) and close it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


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


MANIFEST = ".dig-jax-outputs.json"


def written_here(folder: str | Path) -> set[str]:
    """The paths (relative to `folder`) that dig-jax commands recorded writing there."""
    try:
        names = json.loads((Path(folder) / MANIFEST).read_text())
    except (OSError, ValueError):
        return set()
    return {n for n in names if isinstance(n, str)} if isinstance(names, list) else set()


def record_written(folder: str | Path, names: list[str], forget: tuple[str, ...] = ()) -> None:
    """Add `names` to `folder`'s record of what dig-jax wrote there; entries under the
    folders `forget` (replaced whole) are dropped first."""
    kept = {n for n in written_here(folder) if not any(n.startswith(f) for f in forget)}
    write_text_atomic(Path(folder) / MANIFEST, json.dumps(sorted(kept | set(names)), indent=0))


def _foreign(folder: Path, name: str, ours: set[str]) -> list[str]:
    """What under `folder/name` dig-jax did not write (`name` ending in "/" is a folder)."""
    path = folder / name.rstrip("/")
    if not path.exists() and not path.is_symlink():
        return []
    if path.is_symlink():
        return [f"{name.rstrip('/')} (a link)"]
    if name.endswith("/") != path.is_dir():
        return [name.rstrip("/") + (" (a folder)" if path.is_dir() else " (not a folder)")]
    if not name.endswith("/"):
        return [] if name in ours else [name]
    files = sorted(p.relative_to(folder).as_posix() for p in path.rglob("*") if not p.is_dir())
    return [f for f in files if f not in ours]


def check_out_dir(out: str | Path, names: list[str], flag: str = "--out") -> Path:
    """Raise a one-line ValueError naming `flag` unless `out` can take the outputs `names`
    (relative paths; "images/" is a folder replaced whole): `out` must be a folder or not yet
    exist, be writable, and hold under those names only what dig-jax wrote there."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{flag} {out} is a file, not a folder")
    parent = out
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ValueError(f"{flag} {out} cannot be created: {parent} is a file")
    try:
        tempfile.TemporaryFile(dir=parent).close()
    except OSError as error:
        raise ValueError(f"{flag} {out}: cannot write in {parent} ({error.strerror})") from None
    ours = written_here(out)
    foreign = [f for name in names for f in _foreign(out, name, ours)]
    if foreign:
        more = f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
        them = "it" if len(foreign) == 1 else "them"
        raise ValueError(
            f"{flag} {out} holds {', '.join(foreign[:3])}{more}, not written by dig-jax; "
            f"move {them} or choose another {flag}"
        )
    return out
