"""Orbax CheckpointManager glue: train state + grain data-iterator position in one step folder.

`restore_latest` walks back from the newest step and deletes (with a warning) checkpoints that
cannot be read, so a run killed while writing, or a corrupted file, costs at most one interval,
and the resumed run can save that step again.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import grain
import jax
import orbax.checkpoint as ocp

STATE = "state"
DATA = "data"


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


def save(
    manager: ocp.CheckpointManager, step: int, state: Any, iterator: Any, force: bool = False
) -> bool:
    """Save `state` (a pytree) and the iterator position at `step` if due (or `force`).

    The state is fetched to host numpy first (it is replicated), which avoids per-device
    slicing work in orbax; restoring re-shards it onto the abstract state's shardings.
    """
    if not (force or manager.should_save(step)):
        return False
    items = {STATE: ocp.args.StandardSave(jax.device_get(state))}
    if _has_state(iterator):
        items[DATA] = grain.checkpoint.CheckpointSave(iterator)
    return manager.save(step, args=ocp.args.Composite(**items), force=force)


def restore_latest(
    manager: ocp.CheckpointManager, abstract_state: Any, iterator: Any
) -> tuple[int, Any] | None:
    """Restore the newest readable checkpoint: (step, state), also moving `iterator` there.

    Unreadable checkpoints are deleted with a `UserWarning` naming the step and the error (left
    on disk, they would block saving that step again). Returns None when there is no readable
    checkpoint (a fresh run).
    """
    for step in sorted(manager.all_steps(), reverse=True):
        try:
            restored = manager.restore(
                step, args=ocp.args.Composite(**{STATE: ocp.args.StandardRestore(abstract_state)})
            )
            if _has_state(iterator):
                manager.restore(
                    step,
                    args=ocp.args.Composite(**{DATA: grain.checkpoint.CheckpointRestore(iterator)}),
                )
        except Exception as error:  # any unreadable file means: try the previous checkpoint
            message = str(error).splitlines()[0][:200] if str(error) else type(error).__name__
            warnings.warn(
                f"checkpoint at step {step} in {manager.directory} could not be restored "
                f"({type(error).__name__}: {message}); deleting it and falling back to an "
                "earlier checkpoint",
                UserWarning,
                stacklevel=2,
            )
            manager.delete(step)
            continue
        return step, restored[STATE]
    return None
