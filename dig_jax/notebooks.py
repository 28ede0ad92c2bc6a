"""Execute the jupytext notebooks in notebooks/ into executed .ipynb files and figures.

python -m dig_jax.notebooks [01_gestures 05_breps ...] [--out results/notebooks]

All run when none is named; an unknown name is an error. The executed notebooks go to `--out`
and their figures to `--out`/figures (`DIG_JAX_FIGURES`); nothing is written into notebooks/.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from dig_jax.cli_args import add_out, print_written
from dig_jax.outputs import check_out_dir, record_written

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
PAPER_ATTACK_STEPS = 50  # BREPS: Adam steps per attack
QUICK_ATTACK_STEPS = 20


def notebook_attack_steps() -> int:
    """Attack steps of notebook 05: the paper's 50, or 20 when `DIG_JAX_QUICK` is set to a
    non-empty value other than 0 (a quick run, e.g. the test suite's on 2 CPU cores)."""
    quick = os.environ.get("DIG_JAX_QUICK", "")
    return QUICK_ATTACK_STEPS if quick not in ("", "0") else PAPER_ATTACK_STEPS


def run_notebook(path: Path, timeout: int = 900, output_dir: Path | None = None) -> Path:
    """Execute one paired `.py` notebook (cwd = notebooks/) and save it as `.ipynb` beside it,
    or in `output_dir`."""
    import jupytext
    import nbformat
    from nbclient import NotebookClient

    notebook = jupytext.read(path)
    NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    ).execute()
    out = (Path(output_dir) / path.name if output_dir else path).with_suffix(".ipynb")
    nbformat.write(notebook, out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help="notebook stems; all when empty")
    add_out(parser, "notebooks")
    args = parser.parse_args(argv)
    paths = sorted(NOTEBOOK_DIR.glob("[0-9]*.py"))
    unknown = sorted(set(args.names) - {p.stem for p in paths})
    if unknown:
        parser.error(f"no notebook named {unknown}; there are {[p.stem for p in paths]}")
    if args.names:
        paths = [p for p in paths if p.stem in args.names]
    names = [p.with_suffix(".ipynb").name for p in paths]
    try:
        check_out_dir(args.out, names)
    except ValueError as error:
        parser.error(str(error))
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    record_written(out, names)
    os.environ["DIG_JAX_FIGURES"] = str(out / "figures")  # the kernels inherit it
    for path in paths:
        print(f"running {path.name} ...", flush=True)
        print_written([run_notebook(path, output_dir=out)])
    print_written([out / "figures"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
