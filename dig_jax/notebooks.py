"""Execute the jupytext notebooks in notebooks/ and write the executed .ipynb beside them.

python -m dig_jax.notebooks [01_gestures 05_breps ...]   (all when none is named)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"


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
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="*", help="notebook stems; all when empty")
    args = parser.parse_args(argv)
    paths = sorted(NOTEBOOK_DIR.glob("[0-9]*.py"))
    if args.names:
        paths = [p for p in paths if p.stem in args.names]
    for path in paths:
        print(f"running {path.name} ...", flush=True)
        print(f"  wrote {run_notebook(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
