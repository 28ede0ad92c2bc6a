"""`python -m dig_jax.train --config experiments/hrnet_dataaug.py:demo --workdir workdirs/x`.

`--config FILE.py[:ARG]` loads `get_config(ARG)` from FILE; `--set key=value` (repeatable)
overrides fields, e.g. `--set total_steps=100 --set optim.lr=1e-3` (values parsed as Python
literals when possible). Re-running with the same workdir resumes from its newest checkpoint.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import sys
from pathlib import Path

import ml_collections


def load_config(spec: str) -> ml_collections.ConfigDict:
    """`get_config(arg)` of the Python file in `spec` = "path/to/file.py[:arg]"."""
    path, _, arg = spec.partition(":")
    if not Path(path).is_file():
        raise ValueError(f"--config: file {path!r} does not exist")
    module_spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    if not hasattr(module, "get_config"):
        raise ValueError(f"--config: {path} has no get_config(arg) function")
    return module.get_config(arg) if arg else module.get_config()


def apply_overrides(config: ml_collections.ConfigDict, overrides: list[str]) -> None:
    """Set dotted `key=value` fields in place; unknown keys raise ValueError naming the key."""
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep:
            raise ValueError(f"--set {item!r}: expected key=value")
        *parents, leaf = key.split(".")
        node = config
        for depth, name in enumerate(parents):
            if name not in node:
                raise ValueError(f"--set: config has no key {key!r}")
            node = node[name]
            if not isinstance(node, ml_collections.ConfigDict):
                prefix = ".".join(parents[: depth + 1])
                raise ValueError(f"--set {key}: config.{prefix} is a value, not a group of keys")
        if leaf not in node:
            raise ValueError(f"--set: config has no key {key!r}")
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            value = text
        if isinstance(node[leaf], tuple) and isinstance(value, list):
            value = tuple(value)
        try:
            node[leaf] = value
        except TypeError as error:
            raise ValueError(f"--set {key}: {error}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dig_jax.train", description=__doc__)
    parser.add_argument("--config", required=True, help="experiments/FILE.py[:variant]")
    parser.add_argument("--workdir", required=True, help="checkpoints, metrics.jsonl, export")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
        apply_overrides(config, args.set)
    except ValueError as error:
        parser.error(str(error))
    from dig_jax.train.train import train

    try:
        result = train(config, args.workdir)
    except (ValueError, FloatingPointError, OSError) as error:
        # Bad config, changed model vs. checkpoints, divergence, unwritable checkpoints, a
        # data source without one valid sample: one line, non-zero exit, nothing exported.
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"done: step {result.step}, workdir {args.workdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
