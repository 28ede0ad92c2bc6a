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

import numpy as np

from dig_jax.cli_args import add_out, print_written
from dig_jax.outputs import check_out_dir, record_written

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
PAPER_ATTACK_STEPS = 50  # BREPS: Adam steps per attack
QUICK_ATTACK_STEPS = 20
CHECKPOINT_ENV = "DIG_JAX_CHECKPOINT"


def quick_mode() -> bool:
    """True when `DIG_JAX_QUICK` is set to a non-empty value other than 0: a quick run (e.g. the
    test suite's, on 2 CPU cores), where the notebooks take fewer photos, steps and clicks."""
    return os.environ.get("DIG_JAX_QUICK", "") not in ("", "0")


def notebook_attack_steps() -> int:
    """Attack steps of notebooks 05 and 06: the paper's 50, or 20 in `quick_mode()`."""
    return QUICK_ATTACK_STEPS if quick_mode() else PAPER_ATTACK_STEPS


def notebook_checkpoint(kind: str = "gesture") -> Path | None:
    """The segmenter a notebook runs: the file named by `DIG_JAX_CHECKPOINT` when it is set (the
    test suite's tiny random model; not checked here, loading a missing file fails), else the
    shipped `kind` checkpoint (`dig_jax.paths.shipped_checkpoint`), else None."""
    from dig_jax.paths import shipped_checkpoint

    named = os.environ.get(CHECKPOINT_ENV)
    return Path(named) if named else shipped_checkpoint(kind)


def synthetic_scene(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A 150 x 200 photo uint8[H, W, 3] of a noisy ellipse on noise and its mask uint8[H, W]:
    the stand-in for real photos where the data root has none."""
    rng = np.random.default_rng(seed)
    h, w = 150, 200
    yy, xx = np.mgrid[:h, :w]
    cy, cx, ry, rx = (
        rng.uniform(60, 90),
        rng.uniform(80, 120),
        rng.uniform(25, 45),
        rng.uniform(30, 60),
    )
    gt = (((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1).astype(np.uint8)
    image = rng.normal(90, 25, (h, w, 3)) + gt[..., None] * np.array([90, 40, -30])
    return np.clip(image, 0, 255).astype(np.uint8), gt


def first_instances(
    n: int, max_side: int | None = None
) -> tuple[list[tuple[np.ndarray, np.ndarray]], str]:
    """(photo, GT with void = 255) of the first object of each of the first `n` GrabCut photos
    when `dig_jax.paths.data_root()` holds them (shrunk to a long side of `max_side` when
    given), else `n` synthetic scenes; and the source's name ("grabcut" or "synthetic")."""
    from dig_jax.paths import data_root, has_data

    if not has_data("grabcut"):
        return [synthetic_scene(s) for s in range(n)], "synthetic"
    from dig_jax.data.sources.benchmark_folder import benchmark_folder
    from dig_jax.evaluation.protocol import load_record

    samples = []
    for rec in benchmark_folder(data_root() / "grabcut")[:n]:
        loaded = load_record(rec, max_side)
        gt = loaded.instances[0].copy()
        gt[loaded.void > 0] = 255
        samples.append((loaded.image, gt))
    return samples, "grabcut"


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
