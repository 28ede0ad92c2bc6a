"""Where real data lives (one setting, `DIG_JAX_DATA`, defaulting to `../shared/data`) and
where the shipped checkpoints are."""

from __future__ import annotations

import os
from pathlib import Path

DATA_ENV = "DIG_JAX_DATA"
_CHECKOUT_PARENT = Path(__file__).resolve().parents[1].parent
# The shared benchmark photos, then the public sets fetched by docs/data.md's steps.
_DEFAULT = (_CHECKOUT_PARENT / "shared" / "data", _CHECKOUT_PARENT / "dig_data")


def data_roots() -> tuple[Path, ...]:
    """Folders that hold real data sets, searched in order.

    `DIG_JAX_DATA` is a list of folders separated by `os.pathsep` (":" on Linux); unset, it is
    `../shared/data` then `../dig_data` beside the project checkout. The paths may not exist.
    """
    value = os.environ.get(DATA_ENV)
    if value is None:
        return _DEFAULT
    roots = tuple(Path(p).expanduser() for p in value.split(os.pathsep) if p)
    return roots or _DEFAULT


def data_root() -> Path:
    """The first of `data_roots()` (grabcut/, berkeley/, coco_mval/, bsds500_regions/)."""
    return data_roots()[0]


def dataset_dir(name: str) -> Path:
    """Folder of data set `name`: the first root that holds it, else under the first root."""
    for root in data_roots():
        if (root / name).is_dir():
            return root / name
    return data_root() / name


CHECKPOINT_DIR = Path(__file__).resolve().parents[1] / "checkpoints"
# The shipped checkpoints of a source checkout (checkpoints/ is not part of the wheel), newest
# first: the gesture-agnostic DIG model and the click-model-style context baseline.
SHIPPED_CHECKPOINTS = {
    "gesture": (
        "lite_iterative_offline_long3x",
        "lite_iterative_offline_long",
        "lite_iterative_offline",
        "lite_dataaug_offline",
        "hrnet_dataaug_offline",
    ),
    "context": (
        "lite_context_long3x9k_offline",
        "lite_context_long3x_offline",
        "lite_context_long_offline",
        "lite_context_real_offline",
        "lite_context_baseline_offline",
        "context_baseline_offline",
    ),
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
    if name:
        return dataset_dir(name).is_dir()
    return any(root.is_dir() for root in data_roots())


def figures_dir() -> Path:
    """Where notebooks and scripts save figures: `DIG_JAX_FIGURES` (set by `dig-jax notebooks
    --out DIR` to DIR/figures), else `results/figures` under the working folder; created."""
    path = Path(os.environ.get("DIG_JAX_FIGURES") or "results/figures")
    path.mkdir(parents=True, exist_ok=True)
    return path
