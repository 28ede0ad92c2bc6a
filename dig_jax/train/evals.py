"""The `config.evals` evaluators inside the training loop (the objects `python -m
dig_jax.evaluate --config ...` runs), on a view of the current state.

Each entry runs every `every_steps` steps (0: once, at the end of training) on the primary
process; its metrics go to `metrics.jsonl` as `evals/<name>/<key>` and, with the items it
skipped, to `<workdir>/evals/<name>_step<N>.json`.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jax

from dig_jax.cpu import predict_compiler_options
from dig_jax.outputs import write_text_atomic


class LoopEvaluators:
    """`config.evals` for one training run; `run(step, variables, final)` runs the due ones."""

    def __init__(self, config: Any, model: Any, workdir: Path, writer: Any, primary: bool):
        self.config = config
        self.entries = dict(config.get("evals", {}))
        self.workdir = Path(workdir)
        self.writer = writer
        self.primary = primary
        self._apply = jax.jit(
            lambda v, x: model.apply(v, x, train=False)["mask"],
            compiler_options=predict_compiler_options() or None,
        )

    def due(self, step: int, final: bool) -> list[str]:
        """Names of the evaluators to run at `step` (`final`: the last step of training)."""
        out = []
        for name, entry in self.entries.items():
            every = int(entry.get("every_steps", 0))
            if (every and step % every == 0) or (final and (not every or step % every)):
                out.append(name)
        return out

    def run(self, step: int, variables: Any, final: bool = False) -> dict[str, float]:
        """Run the due evaluators on `variables`; returns their metrics (flat, named)."""
        from dig_jax.evaluation.evaluators import build_evaluators
        from dig_jax.evaluation.predictors import ModelView, segmenter_predictor

        names = self.due(step, final)
        if not (names and self.primary):
            return {}
        local = jax.device_put(jax.device_get(variables), jax.local_devices()[0])
        view = ModelView(self.config, functools.partial(self._apply, local))
        predict = segmenter_predictor(view, batch_size=int(self.config.eval.batch_size))
        evaluators = build_evaluators({n: self.entries[n] for n in names}, predict, progress=False)
        flat: dict[str, float] = {}
        for name, evaluator in evaluators.items():
            metrics = evaluator.compute(evaluator.run())
            self.writer.write(step, {f"evals/{name}/{k}": v for k, v in metrics.items()})
            path = self.workdir / "evals" / f"{name}_step{step}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            payload = {"step": step, "metrics": metrics, "skipped": evaluator.skipped.items}
            write_text_atomic(path, json.dumps(payload, indent=1))
            flat.update({f"{name}/{k}": v for k, v in metrics.items()})
        return flat
