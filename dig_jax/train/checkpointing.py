"""Orbax CheckpointManager glue: train state + grain data-iterator position in one step folder.

`restore_latest` walks back from the newest step and tells two failures apart:
- the saved tree does not match the config's abstract state (the model config changed): a
  `CheckpointMismatchError` naming the workdir, the differing keys (and config values, when the
  workdir's `config.json` says); nothing is moved or deleted;
- the step's files are unreadable, or hold NaN/Inf (a state the loop never saves): the step is
  moved aside to `<step>.corrupt` with a warning (not deleted; it would block saving that step
  again), and the previous step is tried. A run killed while writing costs one interval.
`save` refuses a non-finite state and first checks that the folder is writable: orbax's async
save hangs when it cannot create its step folder, so that failure is raised here instead.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import grain
import jax
import numpy as np
import orbax.checkpoint as ocp

STATE = "state"
DATA = "data"
CORRUPT_SUFFIX = ".corrupt"
MAX_LISTED = 8  # differing keys named in a mismatch message


class CheckpointMismatchError(ValueError):
    """A checkpoint's tree (shapes, keys) differs from what the current config builds."""


class CheckpointSaveError(OSError):
    """A checkpoint could not be written (the training loop stops)."""


def make_manager(
    directory: str | Path, *, save_every: int, keep: int, async_save: bool = True
) -> ocp.CheckpointManager:
    """A manager saving every `save_every` steps into `directory`, keeping the newest `keep`."""
    if save_every < 1:
        raise ValueError(f"checkpoint.save_every must be >= 1, got {save_every}")
    if keep < 1:
        raise ValueError(f"checkpoint.keep must be >= 1, got {keep}")
    options = ocp.CheckpointManagerOptions(
        max_to_keep=keep,
        save_interval_steps=save_every,
        create=True,
        enable_async_checkpointing=async_save,
    )
    return ocp.CheckpointManager(
        Path(directory).absolute(), options=options, item_names=(STATE, DATA)
    )


def _has_state(iterator: Any) -> bool:
    return hasattr(iterator, "get_state") and hasattr(iterator, "set_state")


def all_finite(tree: Any) -> bool:
    """True when every floating-point leaf of `tree` is free of NaN and Inf."""
    for leaf in jax.tree.leaves(tree):
        if jax.dtypes.issubdtype(getattr(leaf, "dtype", np.int32), np.inexact):
            if not bool(np.isfinite(np.asarray(jax.device_get(leaf))).all()):
                return False
    return True


def check_writable(directory: str | Path) -> None:
    """Raise CheckpointSaveError unless a file can be created in `directory`."""
    probe = Path(directory) / f".write-probe-{os.getpid()}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        raise CheckpointSaveError(
            f"cannot write checkpoints to {directory} ({type(error).__name__}: {error})"
        ) from None


def save(
    manager: ocp.CheckpointManager, step: int, state: Any, iterator: Any, force: bool = False
) -> bool:
    """Save `state` (a pytree) and the iterator position at `step` if due (or `force`).

    The state is fetched to host numpy first (it is replicated), which avoids per-device
    slicing work in orbax; restoring re-shards it onto the abstract state's shardings.
    Raises FloatingPointError for a state holding NaN/Inf (never saved: the rotation would
    delete good checkpoints for it) and CheckpointSaveError when writing fails, including the
    failure of an earlier asynchronous save.
    """
    if not (force or manager.should_save(step)):
        return False
    host_state = jax.device_get(state)
    if not all_finite(host_state):
        raise FloatingPointError(f"refusing to save step {step}: the state holds NaN or Inf")
    check_writable(manager.directory)
    items = {STATE: ocp.args.StandardSave(host_state)}
    if _has_state(iterator):
        items[DATA] = grain.checkpoint.CheckpointSave(iterator)
    try:
        return manager.save(step, args=ocp.args.Composite(**items), force=force)
    except Exception as error:  # an async save's failure surfaces on the next save
        raise CheckpointSaveError(
            f"saving checkpoint step {step} in {manager.directory} failed "
            f"({type(error).__name__}: {_first_line(error)})"
        ) from error


def _first_line(error: BaseException) -> str:
    text = str(error)
    return text.splitlines()[0][:200] if text else type(error).__name__


def _key_name(key: Any) -> str:
    for attr in ("key", "name", "idx"):
        if hasattr(key, attr):
            return str(getattr(key, attr))
    return str(key)


def _leaf_shapes(tree: Any) -> dict[str, tuple[int, ...]]:
    """{"a/b/c": shape} of every leaf (orbax metadata or abstract arrays alike)."""
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {"/".join(_key_name(k) for k in path): tuple(leaf.shape) for path, leaf in leaves}


def stored_shapes(manager: ocp.CheckpointManager, step: int) -> dict[str, tuple[int, ...]]:
    """Leaf shapes of the state saved at `step`, read from orbax's metadata (no arrays)."""
    directory = Path(manager.directory) / str(step) / STATE
    metadata = ocp.StandardCheckpointHandler().metadata(directory)
    return _leaf_shapes(getattr(metadata, "tree", metadata))


def tree_differences(stored: dict, expected: dict) -> list[str]:
    """One line per key missing, unexpected, or of another shape (stored vs expected);
    parameters first, optimizer state last (it repeats the parameters' keys)."""

    def order(key: str) -> tuple[int, str]:
        head = key.split("/")[0]
        return ({"params": 0, "batch_stats": 1, "opt_state": 3}.get(head, 2), key)

    lines = []
    for key in sorted(set(stored) | set(expected), key=order):
        if key not in stored:
            lines.append(f"{key}: missing in the checkpoint")
        elif key not in expected:
            lines.append(f"{key}: not in this config's model")
        elif stored[key] != expected[key]:
            lines.append(f"{key}: shape {stored[key]} in the checkpoint, {expected[key]} now")
    return lines


def _config_differences(workdir: Path, config: Any) -> list[str]:
    """'key: saved -> now' for config leaves that differ from the workdir's config.json."""
    path = workdir / "config.json"
    if config is None or not path.is_file():
        return []
    try:
        saved = json.loads(path.read_text())
        now = json.loads(config.to_json_best_effort())
    except (ValueError, AttributeError):
        return []

    def flat(tree: Any, prefix: str = "") -> dict[str, Any]:
        if not isinstance(tree, dict):
            return {prefix: tree}
        out: dict[str, Any] = {}
        for key, sub in tree.items():
            out.update(flat(sub, f"{prefix}.{key}" if prefix else str(key)))
        return out

    a, b = flat(saved), flat(now)
    missing = "<absent>"
    keys = sorted(k for k in set(a) | set(b) if a.get(k, missing) != b.get(k, missing))
    return [f"{k}: {a.get(k, missing)!r} -> {b.get(k, missing)!r}" for k in keys]


def _mismatch(
    manager: ocp.CheckpointManager, step: int, lines: list[str], config: Any
) -> CheckpointMismatchError:
    workdir = Path(manager.directory).parent
    changed = _config_differences(workdir, config)
    hint = f" (config changes since that run: {'; '.join(changed)})" if changed else ""
    listed = "; ".join(lines[:MAX_LISTED]) + (" ..." if len(lines) > MAX_LISTED else "")
    return CheckpointMismatchError(
        f"workdir {workdir}: the checkpoint at step {step} was saved by a different model "
        f"config{hint}; {len(lines)} state keys differ: {listed}. Nothing was deleted: resume "
        "with the original config, or train this config in a new workdir."
    )


def move_aside(manager: ocp.CheckpointManager, step: int, reason: str) -> Path:
    """Rename step folder `<step>` to `<step>.corrupt` (or `.corrupt-2`, ...), with a warning."""
    directory = Path(manager.directory)
    target = directory / f"{step}{CORRUPT_SUFFIX}"
    n = 1
    while target.exists():
        n += 1
        target = directory / f"{step}{CORRUPT_SUFFIX}-{n}"
    if jax.process_index() == 0:
        os.rename(directory / str(step), target)
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(f"dig_jax checkpoint move_aside {step}")
    warnings.warn(
        f"checkpoint at step {step} in {directory} could not be restored ({reason}); moved it "
        f"to {target.name} and falling back to an earlier checkpoint",
        UserWarning,
        stacklevel=3,
    )
    manager.reload()
    return target


def _data_state_parses(manager: ocp.CheckpointManager, step: int) -> bool:
    """True when the saved data position files are readable JSON (so a failure to apply them
    is a config mismatch, not corruption)."""
    files = sorted((Path(manager.directory) / str(step) / DATA).glob("*.json"))
    try:
        return bool(files) and all(isinstance(json.loads(f.read_text()), dict) for f in files)
    except (OSError, ValueError):
        return False


def restore_latest(
    manager: ocp.CheckpointManager, abstract_state: Any, iterator: Any, config: Any = None
) -> tuple[int, Any] | None:
    """Restore the newest readable checkpoint: (step, state), also moving `iterator` there.

    Raises CheckpointMismatchError when the saved tree differs from `abstract_state` (deletes
    nothing; `config`, if given, is compared with the workdir's config.json for the message).
    Steps whose files cannot be read, or hold NaN/Inf, are moved aside (see `move_aside`).
    Returns None when no usable checkpoint is left (a fresh run).
    """
    expected = _leaf_shapes(abstract_state)
    for step in sorted(manager.all_steps(), reverse=True):
        try:
            stored = stored_shapes(manager, step)
        except Exception as error:  # unreadable metadata: a corrupt or half-written step
            move_aside(manager, step, f"{type(error).__name__}: {_first_line(error)}")
            continue
        differences = tree_differences(stored, expected)
        if differences:
            raise _mismatch(manager, step, differences, config)
        try:
            restored = manager.restore(
                step, args=ocp.args.Composite(**{STATE: ocp.args.StandardRestore(abstract_state)})
            )[STATE]
        except Exception as error:  # the tree matches, so the array files are damaged
            move_aside(manager, step, f"{type(error).__name__}: {_first_line(error)}")
            continue
        if not all_finite(restored):
            move_aside(manager, step, "the restored state holds NaN or Inf")
            continue
        if _has_state(iterator):
            try:
                manager.restore(
                    step,
                    args=ocp.args.Composite(**{DATA: grain.checkpoint.CheckpointRestore(iterator)}),
                )
            except Exception as error:
                if _data_state_parses(manager, step):
                    raise CheckpointMismatchError(
                        f"workdir {Path(manager.directory).parent}: the data position saved at "
                        f"step {step} does not fit this config's data pipeline "
                        f"({type(error).__name__}: {_first_line(error)}); nothing was deleted"
                    ) from error
                move_aside(manager, step, f"{type(error).__name__}: {_first_line(error)}")
                continue
        return step, restored
    return None
