"""Where real data lives (one setting, `DIG_JAX_DATA`, defaulting to `../shared/data`) and
where the shipped checkpoints are."""

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


CHECKPOINT_DIR = Path(__file__).resolve().parents[1] / "checkpoints"
# The shipped checkpoints of a source checkout (checkpoints/ is not part of the wheel), newest
# first: the gesture-agnostic DIG model and the click-model-style context baseline.
SHIPPED_CHECKPOINTS = {
    "gesture": ("lite_dataaug_offline", "hrnet_dataaug_offline"),
    "context": ("lite_context_baseline_offline", "context_baseline_offline"),
}


def shipped_checkpoints(kind: str = "gesture") -> tuple[Path, ...]:
    """Candidate files of the shipped `kind` ("gesture" or "context") checkpoint, best first."""
    return tuple(CHECKPOINT_DIR / f"{name}.digjax" for name in SHIPPED_CHECKPOINTS[kind])


def shipped_checkpoint(kind: str = "gesture") -> Path | None:
    """The shipped `kind` checkpoint that exists here, or None."""
    return next((p for p in shipped_checkpoints(kind) if p.is_file()), None)


def checkpoint_name(path: str | Path) -> str:
    """A checkpoint's name in tables: its stem, or its folder's name for generic stems
    (`workdirs/x/segmenter.digjax` -> x)."""
    path = Path(path)
    return path.parent.name if path.stem in ("segmenter", "model") else path.stem


def has_data(name: str | None = None) -> bool:
    """True if the data root (or its sub-folder `name`) exists."""
    root = data_root()
    return (root / name).is_dir() if name else root.is_dir()
