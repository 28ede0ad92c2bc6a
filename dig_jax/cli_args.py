"""The flags every `dig-jax` command spells the same way, and how each says what it wrote.

One spelling per meaning: `--checkpoint FILE.digjax`, `--datasets a,b`, `--limit N` (first N
records or instances per dataset), `--max-side PX` (photos shrunk to this long side),
`--batch-size N`, `--seed N`, `--out PATH` (default `results/<command>`), `--no-progress`.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path


def add_checkpoint(parser: argparse.ArgumentParser, default: str | None = "") -> None:
    parser.add_argument(
        "--checkpoint",
        default=default,
        help="an exported .digjax segmenter (default: the shipped gesture model)",
    )


def add_checkpoints(parser: argparse.ArgumentParser, help_text: str) -> None:
    """A required `--checkpoint` given once per model compared."""
    parser.add_argument("--checkpoint", action="append", required=True, type=Path, help=help_text)


def add_datasets(parser: argparse.ArgumentParser, default: str = "grabcut,berkeley") -> None:
    parser.add_argument(
        "--datasets", default=default, help="comma list of source specs (docs/data.md)"
    )


def add_limit(parser: argparse.ArgumentParser, what: str = "records") -> None:
    parser.add_argument("--limit", type=int, default=None, help=f"first N {what} per dataset")


def add_max_side(parser: argparse.ArgumentParser, default: int | None = None) -> None:
    parser.add_argument(
        "--max-side", type=int, default=default, help="shrink photos to this long side (px)"
    )


def add_batch_size(parser: argparse.ArgumentParser, default: int, what: str = "") -> None:
    parser.add_argument(
        "--batch-size", type=int, default=default, help=what or "network batch size"
    )


def add_seed(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=0, help="seed of every random draw")


def add_out(parser: argparse.ArgumentParser, command: str) -> None:
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("results") / command,
        help=f"output folder (default results/{command})",
    )


def add_progress(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def print_written(paths: Iterable[str | Path]) -> None:
    """One 'wrote PATH' line per output, so a user (or a script) knows where to look."""
    for path in paths:
        print(f"wrote {path}")
