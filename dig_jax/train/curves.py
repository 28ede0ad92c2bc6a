"""Training curves from a workdir's `metrics.jsonl`, saved as a PNG (matplotlib, Agg).

python -m dig_jax.train.curves workdirs/lite_dataaug_offline [--out curves.png]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from dig_jax.outputs import check_out_dir, record_written, save_figure

EVAL_SCORES = ("eval/rice_local/all/create", "eval/rice_local/all/refine")


def read_metrics(path: str | Path) -> list[dict]:
    """Rows of a metrics.jsonl file (one JSON object per line, each with `step`)."""
    rows = []
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except OSError as error:
        raise ValueError(f"{path}: cannot be read ({error.strerror})") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 text (byte {error.start})") from None
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{n}: not JSON ({error.msg})") from None
            except RecursionError:
                raise ValueError(f"{path}:{n}: JSON nested too deep") from None
            if not isinstance(rows[-1], dict) or "step" not in rows[-1]:
                raise ValueError(f"{path}:{n}: not a metrics row (an object with 'step')")
    return rows


def _series(rows: list[dict], key: str) -> tuple[list[int], list[float]]:
    pairs = [(r["step"], r[key]) for r in rows if key in r]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def plot_curves(metrics_path: str | Path, out_path: str | Path, title: str = "") -> Path:
    """Three panels: training loss, learning rate, validation RICE (creation / refinement)."""
    rows = read_metrics(metrics_path)
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    steps, loss = _series(rows, "loss")
    axes[0].plot(steps, loss, lw=0.8, alpha=0.4, label="logged")
    if len(loss) >= 5:
        window = max(len(loss) // 20, 5)
        smooth = np.convolve(loss, np.ones(window) / window, mode="valid")
        axes[0].plot(steps[window - 1 :], smooth, lw=1.5, label=f"mean of {window}")
        axes[0].legend()
    axes[0].set(title="training loss", xlabel="step")
    steps, lr = _series(rows, "lr")
    axes[1].plot(steps, lr, lw=1)
    axes[1].set(title="learning rate", xlabel="step")
    for key in EVAL_SCORES:
        steps, values = _series(rows, key)
        if steps:
            axes[2].plot(steps, values, marker="o", label=key.split("/")[-1])
    axes[2].set(title="validation RICE (local, all kinds)", xlabel="step")
    if axes[2].lines:
        axes[2].legend()
    fig.suptitle(title or str(Path(metrics_path).parent.name))
    return save_figure(fig, out_path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("workdir")
    parser.add_argument("--out", default=None, help="PNG path (default <workdir>/curves.png)")
    args = parser.parse_args(argv)
    out = Path(args.out or Path(args.workdir) / "curves.png")
    try:
        if args.out:  # a path of the user's: never over a file dig-jax did not write
            check_out_dir(out.parent, [out.name])
        print(f"wrote {plot_curves(Path(args.workdir) / 'metrics.jsonl', out)}")
    except ValueError as error:  # no or unreadable metrics.jsonl, or an --out of the user's
        parser.error(str(error))
    if args.out:
        record_written(out.parent, [out.name])
    return 0


if __name__ == "__main__":
    sys.exit(main())
