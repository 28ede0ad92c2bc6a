"""Export a segmenter file from any saved step of a training workdir (e.g. while it still runs).

python -m dig_jax.train.export_step workdirs/lite_dataaug_offline [--step 12000] [--out F.digjax]
    [--set predict.focus_pass=true]

Reads `<workdir>/config.json` and the orbax checkpoint of `--step` (default: the newest),
and writes params + BatchNorm statistics with the config, as the end of training does.
`--set KEY=VALUE` (repeatable; VALUE is JSON, else a string) changes an inference setting of
the exported config, e.g. the focus pass of `predict`. A segmenter file in place of the workdir
is written again to `--out` with the settings applied (the same weights):

python -m dig_jax.train.export_step checkpoints/lite_iterative_offline.digjax --out F.digjax \
    --set predict.click_size=320
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

import jax
import ml_collections
import numpy as np

from dig_jax.export import save_segmenter
from dig_jax.models.interactive import build_segmenter
from dig_jax.train import checkpointing
from dig_jax.train.state import make_optimizer


def parse_setting(text: str) -> tuple[str, object]:
    """'a.b=VALUE' -> ('a.b', VALUE parsed as JSON, else the string); ValueError if no '='."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"--set needs KEY=VALUE, got {text!r}")
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    return key.strip(), value


def apply_settings(config: ml_collections.ConfigDict, settings: dict[str, object]) -> None:
    """Set dotted `settings` in `config`, creating sub-dicts (e.g. `predict`) as needed."""
    for key, value in settings.items():
        *parents, leaf = key.split(".")
        node = config
        for name in parents:
            if name not in node:
                node[name] = ml_collections.ConfigDict()
            node = node[name]
        node[leaf] = value


def export_step(
    workdir: str | Path,
    step: int | None = None,
    out: str | Path | None = None,
    settings: dict[str, object] | None = None,
):
    """Write the segmenter of `step` (None = newest) of `workdir`, with `settings` applied to
    its config; returns (path, step)."""
    import orbax.checkpoint as ocp

    from dig_jax.train.train import init_state

    workdir = Path(workdir)
    config_path = workdir / "config.json"
    if not config_path.is_file():
        raise ValueError(f"workdir {workdir} has no config.json")
    config = ml_collections.ConfigDict(json.loads(config_path.read_text()))
    apply_settings(config, settings or {})
    model = build_segmenter(config.model)
    tx = make_optimizer(config.optim, config.total_steps)
    shape = (1, config.image_size, config.image_size, model.in_channels)
    abstract = jax.eval_shape(functools.partial(init_state, model, tx, shape), jax.random.key(0))
    items = (checkpointing.STATE, checkpointing.DATA)
    manager = ocp.CheckpointManager((workdir / "checkpoints").absolute(), item_names=items)
    steps = manager.all_steps()
    if not steps:
        raise ValueError(f"workdir {workdir} has no checkpoint")
    step = max(steps) if step is None else int(step)
    if step not in steps:
        raise ValueError(f"workdir {workdir} has no checkpoint at step {step} (has {steps})")
    restored = manager.restore(
        step,
        args=ocp.args.Composite(**{checkpointing.STATE: ocp.args.StandardRestore(abstract)}),
    )[checkpointing.STATE]
    out = Path(out) if out else workdir / f"segmenter_step{step}.digjax"
    return save_segmenter(out, restored.variables, config), step


def resave_segmenter(source: str | Path, out: str | Path, settings: dict[str, object]) -> Path:
    """Write the segmenter file `source` again as `out` (another path) with `settings` applied
    to its config: the same weights with other inference settings (e.g.
    `predict.click_size`). ValueError for a bad source or `out` = `source`."""
    from dig_jax.export import LoadedSegmenter, load_segmenter

    source, out = Path(source), Path(out)
    if out.absolute() == source.absolute():
        raise ValueError(f"--out {out} is the source file; name another file")
    segmenter = load_segmenter(source)  # checks the file, its config and its weights
    config = ml_collections.ConfigDict(segmenter.config.to_dict())
    apply_settings(config, settings)
    LoadedSegmenter(config, segmenter.variables)  # the new settings must load
    variables = jax.tree.map(np.asarray, segmenter.variables)
    return save_segmenter(out, variables, config)


def check_export_target(out: str | Path) -> None:
    """ValueError unless `out` is free, or an earlier segmenter file (which it may replace):
    a folder or any other file of the user's is never overwritten."""
    from dig_jax.export import MAGIC

    out = Path(out)
    if out.is_dir():
        raise ValueError(f"--out {out} is a folder; name the .digjax file to write")
    if out.exists():
        with out.open("rb") as f:
            if f.read(len(MAGIC)) != MAGIC:
                raise ValueError(
                    f"--out {out} exists and is not a segmenter file; not replacing it"
                )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("workdir", help="training workdir, or a .digjax file to re-save")
    parser.add_argument("--step", type=int, default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--set", action="append", default=[], help="KEY=VALUE in the config")
    args = parser.parse_args(argv)
    try:
        settings = dict(parse_setting(text) for text in args.set)
        if args.out:
            check_export_target(args.out)
        if Path(args.workdir).is_file():  # a segmenter file: the same weights, new settings
            if not args.out or args.step is not None:
                raise ValueError("a segmenter file as source needs --out and takes no --step")
            print(f"wrote {resave_segmenter(args.workdir, args.out, settings)}")
            return 0
        path, step = export_step(args.workdir, args.step, args.out, settings)
    except ValueError as error:
        parser.error(str(error))
    print(f"exported step {step}")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
