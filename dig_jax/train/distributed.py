"""Training on several processes: the launch flags and `jax.distributed.initialize`.

One process per host (or several on one machine), started with the same config and workdir:

    python -m dig_jax.train --config FILE.py[:ARG] --workdir DIR \
        --coordinator HOST:PORT --num-processes N --process-id I [--heartbeat-timeout S]

`--coordinator auto` calls `jax.distributed.initialize()` with no arguments (jax then finds the
coordinator, the process count and this process's id itself: Slurm, Open MPI, Cloud TPU VMs,
Kubernetes). Without the flags, a process started under Slurm with several tasks, under Open
MPI, or with `JAX_COORDINATOR_ADDRESS` set initializes the same way. On CPU the processes
exchange gradients through gloo (`jax_cpu_collectives_implementation`). A process that stops
sending heartbeats for `--heartbeat-timeout` seconds (default 100, jax's) counts as dead: the
others then stop with an error instead of waiting for it. See docs/scale.md.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

import jax

# Environment variables that mean "launched as one of several processes".
MULTIHOST_ENV = ("JAX_COORDINATOR_ADDRESS", "COORDINATOR_ADDRESS", "MEGASCALE_COORDINATOR_ADDRESS")
AUTO = "auto"
DEFAULT_HEARTBEAT_TIMEOUT = 100  # seconds, jax.distributed.initialize's default
FLAGS = ("--coordinator", "--num-processes", "--process-id", "--heartbeat-timeout")


@dataclasses.dataclass(frozen=True)
class Launch:
    """How this process joins the others; `coordinator` None: only through the environment."""

    coordinator: str | None = None  # "HOST:PORT" or AUTO
    num_processes: int | None = None
    process_id: int | None = None
    heartbeat_timeout: int = DEFAULT_HEARTBEAT_TIMEOUT


def _int(flag: str, text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = low - 1
    if value < low:
        raise ValueError(f"{flag}={text!r}: expected an integer >= {low}")
    return value


def _check_coordinator(text: str) -> str:
    host, sep, port = text.rpartition(":")
    if text != AUTO and not (sep and host and port.isdigit() and 0 < int(port) < 65536):
        raise ValueError(f"--coordinator={text!r}: expected HOST:PORT (port 1-65535) or {AUTO}")
    return text


def parse_launch_flags(argv: Sequence[str]) -> tuple[Launch, list[str]]:
    """(Launch, the other arguments) from `argv`; ValueError with one line for a bad value."""
    values: dict[str, str] = {}
    rest: list[str] = []
    args = list(argv)
    i = 0
    while i < len(args):
        name, eq, value = args[i].partition("=")
        if name not in FLAGS:
            rest.append(args[i])
            i += 1
            continue
        if not eq:
            if i + 1 >= len(args) or args[i + 1].startswith("--"):
                raise ValueError(f"{name} needs a value")
            value, i = args[i + 1], i + 1
        if name in values:
            raise ValueError(f"{name} is given twice")
        values[name] = value
        i += 1
    coordinator = values.get("--coordinator")
    if coordinator is not None:
        _check_coordinator(coordinator)
    count = values.get("--num-processes")
    index = values.get("--process-id")
    num_processes = None if count is None else _int("--num-processes", count, 1)
    process_id = None if index is None else _int("--process-id", index, 0)
    given = [f for f in ("--num-processes", "--process-id") if f in values]
    if coordinator == AUTO and given:
        raise ValueError(f"--coordinator={AUTO} finds {' and '.join(given)} itself: drop them")
    if coordinator not in (None, AUTO) and len(given) < 2:
        raise ValueError(f"--coordinator={coordinator} needs --num-processes and --process-id")
    if coordinator is None and given:
        raise ValueError(f"{given[0]} needs --coordinator HOST:PORT")
    if num_processes is not None and process_id is not None and process_id >= num_processes:
        raise ValueError(
            f"--process-id={process_id}: expected 0 <= id < --num-processes={num_processes}"
        )
    timeout = values.get("--heartbeat-timeout")
    heartbeat = DEFAULT_HEARTBEAT_TIMEOUT if timeout is None else _int(FLAGS[3], timeout, 1)
    return Launch(coordinator, num_processes, process_id, heartbeat), rest


def launched_multihost() -> bool:
    """True when the environment says this is one of several processes (Slurm, Open MPI, a
    coordinator address)."""
    env = os.environ
    multi = any(k in env for k in MULTIHOST_ENV) or int(env.get("SLURM_NTASKS", "1")) > 1
    return multi or int(env.get("OMPI_COMM_WORLD_SIZE", "1")) > 1


def initialize(launch: Launch | None = None) -> None:
    """`jax.distributed.initialize` for `launch` (or the environment); no-op for one process
    or when already initialized."""
    launch = launch or Launch()
    if jax.distributed.is_initialized():
        return
    if launch.coordinator is None and not launched_multihost():
        return
    if jax.config.jax_cpu_collectives_implementation is None:  # the default before gloo was
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    kwargs = {}
    if launch.coordinator not in (None, AUTO):
        kwargs = dict(
            coordinator_address=launch.coordinator,
            num_processes=launch.num_processes,
            process_id=launch.process_id,
        )
    jax.distributed.initialize(**kwargs, heartbeat_timeout_seconds=launch.heartbeat_timeout)
