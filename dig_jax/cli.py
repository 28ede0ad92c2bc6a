"""`dig-jax` command: one entry point for the module CLIs.

dig-jax train --config experiments/hrnet_dataaug.py:demo --workdir workdirs/demo
dig-jax evaluate --checkpoint FILE.digjax --datasets grabcut,berkeley
dig-jax attack --checkpoint FILE.digjax --datasets grabcut,berkeley
dig-jax build --source grabcut --out build/dig
dig-jax beam-build --coco-json instances.json --images DIR --out build/tfds  # Apache Beam
dig-jax demo --port 8000
dig-jax predict --image photo.jpg --points "120,80" --out mask.png
dig-jax export workdirs/run --out run.digjax     # any saved step of a training workdir
dig-jax snapshot pack workdirs/run --out run.tar # a resumable run in one file (and unpack)
dig-jax curves workdirs/run                      # loss / lr / validation curves (PNG)
dig-jax tables results/a/metrics.json results/b/metrics.json --out results/all

Every command takes --help; flags mean the same everywhere (`dig_jax.cli_args`) and each
command ends by printing the paths it wrote.
"""

from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "train": "dig_jax.train.__main__",
    "evaluate": "dig_jax.evaluate",
    "attack": "dig_jax.attack",
    "rclicks": "dig_jax.rclicks",
    "build": "dig_jax.data.build",
    "beam-build": "dig_jax.data.beam_build",
    "notebooks": "dig_jax.notebooks",
    "demo": "dig_jax.demo.__main__",
    "predict": "dig_jax.predict",
    "export": "dig_jax.train.export_step",
    "snapshot": "dig_jax.train.snapshot",
    "curves": "dig_jax.train.curves",
    "tables": "dig_jax.evaluation.tables",
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in COMMANDS:
        names = ", ".join(COMMANDS)
        print(f"usage: dig-jax {{{names}}} [args...]  (each takes --help)", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[argv[0]])
    return int(module.main(argv[1:]) or 0)


def console_main() -> int:
    """The `dig-jax` console script: `main` after `dig_jax.cpu.prepare_entry_point`."""
    from dig_jax.cpu import prepare_entry_point

    prepare_entry_point()
    return main()


if __name__ == "__main__":
    sys.exit(console_main())
