"""Where real data lives: one setting, `DIG_JAX_DATA`, defaulting to `../shared/data`."""

from __future__ import annotations

import os
from pathlib import Path

DATA_ENV = "DIG_JAX_DATA"
_DEFAULT = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def data_root() -> Path:
    """Root of the real photo folders (grabcut/, berkeley/, coco_mval/, bsds500_regions/).

    Set the environment variable `DIG_JAX_DATA` to point elsewhere; the default is the
    `shared/data` folder beside the project checkout. The path may not exist.
    """
    return Path(os.environ.get(DATA_ENV, _DEFAULT)).expanduser()


def has_data(name: str | None = None) -> bool:
    """True if the data root (or its sub-folder `name`) exists."""
    root = data_root()
    return (root / name).is_dir() if name else root.is_dir()
