"""`python -m dig_jax.train --config experiments/hrnet_dataaug.py:demo --workdir workdirs/x`.

Settings are `ml_collections.config_flags`: `--config FILE.py[:ARG]` loads `get_config(ARG)`
from FILE, and `--config.KEY=VALUE` overrides any field, e.g. `--config.total_steps=100
--config.optim.lr=1e-3 --config.model.widths="(8, 16, 32, 64)"`; every field is then validated
in one place (`validate_config`). Re-running with the same workdir resumes from its newest
checkpoint.

Several processes (one per host) train one model together: add `--coordinator HOST:PORT
--num-processes N --process-id I` (or `--coordinator auto` where jax finds them: Slurm, Open MPI,
Cloud TPU) and optionally `--heartbeat-timeout SECONDS`; every process gets the same config and
workdir (`dig_jax.train.distributed`, docs/scale.md).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import ml_collections
from absl import flags
from ml_collections import config_flags


def load_config(spec: str) -> ml_collections.ConfigDict:
    """`get_config(arg)` of the Python file in `spec` = "path/to/file.py[:arg]"."""
    path, _, arg = spec.partition(":")
    if not Path(path).is_file():
        raise ValueError(f"--config: file {path!r} does not exist")
    module_spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    if module_spec is None or module_spec.loader is None:
        raise ValueError(f"--config: {path} is not a Python file")
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except SyntaxError as error:
        raise ValueError(f"--config: {path} line {error.lineno}: {error.msg}") from None
    except Exception as error:  # the file runs code: name what it raised, in one line
        raise ValueError(f"--config: {path} raised {_one_line(error)}") from None
    if not hasattr(module, "get_config"):
        raise ValueError(f"--config: {path} has no get_config(arg) function")
    try:
        return module.get_config(arg) if arg else module.get_config()
    except ValueError:
        raise
    except Exception as error:
        raise ValueError(
            f"--config: get_config({arg!r}) of {path} raised {_one_line(error)}"
        ) from None


def _one_line(error: BaseException) -> str:
    """'TypeName: first line of the message'."""
    message = str(error).strip().splitlines()
    return f"{type(error).__name__}: {message[0]}" if message else type(error).__name__


def parse_flags(argv: Sequence[str]) -> tuple[ml_collections.ConfigDict, str]:
    """(config with its `--config.KEY=VALUE` overrides, workdir) from command-line arguments.

    ValueError with one line naming the problem: a missing file or flag, an unknown key, a
    value of the wrong type.
    """
    args = list(argv)
    spec = next(
        (a.split("=", 1)[1] if "=" in a else args[i + 1] for i, a in enumerate(args)
         if a.split("=", 1)[0] == "--config" and (i + 1 < len(args) or "=" in a)),
        None,
    )  # fmt: skip
    if spec is None:
        raise ValueError("--config is required (experiments/FILE.py[:variant])")
    config = load_config(spec)  # a missing file or bad variant: a clear error before absl's
    for arg in args:
        if arg.startswith("--config."):
            key = arg[len("--config.") :].split("=", 1)[0]
            node: object = config
            for part in key.split("."):
                if not isinstance(node, ml_collections.ConfigDict) or part not in node:
                    raise ValueError(f"--config.{key}: the config has no field {key!r}")
                node = node[part]
    values = flags.FlagValues()
    full = ["dig_jax.train", *args]
    config_flags.DEFINE_config_file(
        "config", None, "experiments/FILE.py[:variant]", flag_values=values, lock_config=True,
        sys_argv=full,
    )  # fmt: skip
    flags.DEFINE_string("workdir", None, "checkpoints, metrics.jsonl, export", flag_values=values)
    try:
        values(full)
    except (flags.Error, AttributeError, KeyError, TypeError) as error:
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ValueError(message) from None
    if not values.workdir:
        raise ValueError("--workdir is required")
    return values.config, values.workdir


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help", "--helpfull") for a in argv):
        print(__doc__)
        return 0
    from dig_jax.train import distributed

    try:
        launch, argv = distributed.parse_launch_flags(argv)
        config, workdir = parse_flags(argv)
    except ValueError as error:
        print(f"python -m dig_jax.train: error: {error}", file=sys.stderr)
        return 2
    try:
        distributed.initialize(launch)
    except Exception as error:  # no coordinator reachable, a bad cluster environment
        hint = ""
        if isinstance(error, ValueError) and launch.coordinator in (None, distributed.AUTO):
            hint = (
                " (jax found no cluster it knows in the environment: give --coordinator "
                "HOST:PORT --num-processes N --process-id I)"
            )
        print(
            f"error: jax.distributed.initialize failed: {_one_line(error)}{hint}", file=sys.stderr
        )
        return 1
    import jax

    from dig_jax.train.train import train

    processes = jax.process_count()
    try:
        result = train(config, workdir)
    except (ValueError, FloatingPointError, OSError) as error:
        # Bad config, changed model vs. checkpoints, divergence, unwritable checkpoints, a
        # data source without one valid sample: one line, non-zero exit, nothing exported.
        print(f"error: {error}", file=sys.stderr)
        if processes > 1:
            _exit_now(1)
        return 1
    except Exception as error:
        if processes <= 1:
            raise
        traceback.print_exc()
        print(
            f"error: process {jax.process_index()} of {processes} stopped: {_one_line(error)}. "
            f"If another process of this run died, start all {processes} again with the same "
            "--workdir: training resumes from the newest checkpoint.",
            file=sys.stderr,
        )
        _exit_now(1)
    if result.stopped_by is not None and result.step < config.total_steps:
        print(
            f"stopped by {result.stopped_by} after step {result.step} of {config.total_steps} "
            f"(checkpoint saved): run the same command to resume from {workdir}",
            file=sys.stderr,
        )
        return 130 if result.stopped_by == "SIGINT" else 143  # 128 + the signal's number
    print(f"done: step {result.step}, workdir {workdir}")
    return 0


def _exit_now(code: int) -> NoReturn:
    """Leave at once, skipping jax.distributed's shutdown barrier: after a failure the other
    processes may be stuck in a collective with this one, and only its exit (closing the
    connections) or the heartbeat timeout lets them stop instead of waiting out the barrier."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    from dig_jax.cpu import prepare_entry_point

    prepare_entry_point()  # on jemalloc: CPU calls on this thread (see it)
    sys.exit(main())
