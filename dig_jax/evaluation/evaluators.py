"""Evaluator objects built from `config.evals` (the big_vision pattern).

    evaluators = build_evaluators(config.evals, segmenter)
    for name, evaluator in evaluators.items():
        states = evaluator.run()          # {key: mergeable metric state}
        flat = evaluator.compute(states)  # {"name/key/metric": float}

An entry of `config.evals` names its `type` and its settings:
- "dig_tables": `DigTables` — RICE / IoU (local and global GT) per gesture kind for creation,
  refinement and multi-region samples (DIG Tables 2, 5, 6, 8), one `Averages` per dataset,
  on the paper's sampling (`sampling="paper"`: every part and occluded whole region, every
  correction of >= 100 px) or the earlier one (`"largest"`); `compute` adds sample counts;
- "iterative": `Iterative` — NoG / NoF at 80 / 85 / 90 % IoU, per gesture kind and "mixed",
  from scratch and from a prior (DIG Table 7), one `NoCTally` per (dataset, start, kind).
Both take any `Predictor` (a loaded segmenter through `segmenter_predictor`, or a classical
peer), iterate the same `Instance`s at the photos' own resolution, and are what both the
training loop and `python -m dig_jax.evaluate --config ...` run. `every_steps` (training loop
only) and `limit` (instances per dataset) keep in-loop evaluation cheap.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from dig_jax.evaluation.dig_tables import score_samples
from dig_jax.evaluation.iterative import MIXED, nog
from dig_jax.evaluation.predictors import Predictor
from dig_jax.evaluation.protocol import (
    MODES,
    SkipLog,
    _refinement_start,
    evaluation_samples,
    iter_instances,
    load_dataset,
)
from dig_jax.gestures.types import GestureKind
from dig_jax.metrics import MAX_INTERACTIONS, NoCTally
from dig_jax.metrics.noc import DEFAULT_THRESHOLDS

KIND_NAMES = tuple(k.name.lower() for k in GestureKind)
STARTS = ("scratch", "prior")


def kind_codes(kinds: Sequence[str | int]) -> tuple[int | str, ...]:
    """Gesture kinds by name or code (and "mixed" where allowed) -> codes; ValueError names
    the unknown ones."""
    out: list[int | str] = []
    for kind in kinds:
        if kind == MIXED:
            out.append(MIXED)
        elif isinstance(kind, str) and kind.upper() in GestureKind.__members__:
            out.append(int(GestureKind[kind.upper()]))
        elif isinstance(kind, (int, np.integer)) and int(kind) in set(GestureKind):
            out.append(int(kind))
        else:
            raise ValueError(f"kinds: unknown gesture kind {kind!r}; use {KIND_NAMES} or 'mixed'")
    return tuple(out)


def _name(kind: int | str) -> str:
    return MIXED if kind == MIXED else GestureKind(kind).name.lower()


def _without_global(counts: dict[str, int]) -> int:
    """Samples scored locally but not globally (their global GT unknown), from `counts`."""
    local = sum(v for k, v in counts.items() if k.startswith("iou_local/all/"))
    return local - sum(v for k, v in counts.items() if k.startswith("iou_global/all/"))


@dataclasses.dataclass
class DigTables:
    """DIG sample sets per dataset (creation / refinement / multi-region × kinds), scored at
    each photo's own resolution. `run()` -> {dataset: Averages}."""

    predict: Predictor
    datasets: Sequence[str]
    modes: Sequence[str] = MODES
    kinds: Sequence[str | int] = KIND_NAMES
    max_side: int | None = None
    seed: int = 0
    batch_size: int = 8
    limit: int | None = None
    progress: bool = True
    sampling: str = "paper"
    skipped: SkipLog = dataclasses.field(default_factory=SkipLog)

    def run(self) -> dict[str, Any]:
        kinds = kind_codes(self.kinds)
        if MIXED in kinds:
            raise ValueError("kinds: 'mixed' is a sequence of gestures, for Iterative only")
        states = {}
        for spec in self.datasets:
            records = load_dataset(spec)[: self.limit]
            # Streamed: a batch of samples at a time in memory, not the whole set (listed
            # first, the 775 COCO-MVal validation samples took the process 412 -> 2507 MiB).
            samples = evaluation_samples(
                records, max_side=self.max_side, kinds=kinds, modes=tuple(self.modes),
                seed=self.seed, skipped=self.skipped, sampling=self.sampling,
            )  # fmt: skip
            states[spec] = score_samples(
                self.predict, samples, batch_size=self.batch_size, desc=spec,
                progress=self.progress,
            )  # fmt: skip
            missing = _without_global(states[spec].counts())
            if missing:
                self.skipped.add(
                    spec,
                    f"rice_global/iou_global refused on {missing} sample(s): "
                    "no global GT (DIG JSON without obj_gt or source annotations)",
                )
        return states

    @staticmethod
    def compute(states: dict[str, Any]) -> dict[str, float]:
        """`<dataset>/<score>/<kind>/<phase>` means and `<dataset>/n/<kind>/<phase>` sample
        counts (those scored locally)."""
        out = {}
        for spec, state in states.items():
            out.update({f"{spec}/{k}": v for k, v in state.compute().items()})
            for k, v in state.counts().items():
                if k.startswith("iou_local/"):
                    out[f"{spec}/n/{k.partition('/')[2]}"] = float(v)
        return out


@dataclasses.dataclass
class Iterative:
    """NoG protocol per dataset × start ("scratch" | "prior") × kind (incl. "mixed").
    `run()` -> {"dataset/start/kind": NoCTally} at `thresholds`; it also keeps each key's
    per-instance IoU trajectories in `trajectories` ({"instances": names, "ious":
    float64[n, max_interactions]}), which paired comparisons of two predictors need."""

    predict: Predictor
    datasets: Sequence[str]
    kinds: Sequence[str | int] = (*KIND_NAMES, MIXED)
    starts: Sequence[str] = STARTS
    thresholds: Sequence[float] = DEFAULT_THRESHOLDS
    max_interactions: int = MAX_INTERACTIONS
    max_side: int | None = None
    seed: int = 0
    limit: int | None = None
    progress: bool = True
    skipped: SkipLog = dataclasses.field(default_factory=SkipLog)
    trajectories: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)

    def run(self) -> dict[str, NoCTally]:
        kinds = kind_codes(self.kinds)
        unknown = set(self.starts) - set(STARTS)
        if unknown:
            raise ValueError(f"starts: unknown {sorted(unknown)}, expected a subset of {STARTS}")
        states = {}
        self.trajectories = {}
        for spec in self.datasets:
            records = load_dataset(spec)[: self.limit]
            instances = list(iter_instances(records, max_side=self.max_side, skipped=self.skipped))
            for start in self.starts:
                items, masks, names = self._items(instances, start)
                if not items:
                    continue
                for kind in tqdm(kinds, desc=f"{spec} NoG {start}",
                                 disable=not self.progress):  # fmt: skip
                    out = nog(
                        self.predict, items, kind, thresholds=self.thresholds, seed=self.seed,
                        max_interactions=self.max_interactions, start=masks,
                    )  # fmt: skip
                    key = f"{spec}/{start}/{_name(kind)}"
                    states[key] = NoCTally.from_result(out, tuple(self.thresholds))
                    self.trajectories[key] = {"instances": names, "ious": out["ious"]}
        return states

    def _items(self, instances, start):
        items, masks, names = [], [], []
        for instance in instances:
            if start == "prior":
                prev, _ = _refinement_start(instance, (self.seed, *instance.index), self.skipped)
                if prev is None:
                    continue
                masks.append(prev)
            largest = instance.region.parts[instance.largest_part] > 0
            items.append((instance.loaded.image, instance.gt, largest))
            names.append(instance.name)
        return items, (masks if start == "prior" else None), names

    @staticmethod
    def compute(states: dict[str, NoCTally]) -> dict[str, float]:
        return {f"{key}/{k}": v for key, state in states.items() for k, v in
                state.compute().items()}  # fmt: skip


EVALUATORS = {"dig_tables": DigTables, "iterative": Iterative}


def build_evaluators(evals: Any, predict: Predictor, **overrides: Any) -> dict[str, Any]:
    """Evaluator objects from `config.evals` ({name: {type, ...settings}}), all on `predict`.

    `every_steps` is read by the training loop and not passed on; ValueError names an entry
    with an unknown type or setting.
    """
    out = {}
    for name, entry in dict(evals.to_dict() if hasattr(evals, "to_dict") else evals).items():
        settings = dict(entry)
        kind = settings.pop("type", None)
        if kind not in EVALUATORS:
            raise ValueError(f"evals.{name}.type must be one of {sorted(EVALUATORS)}, got {kind!r}")
        settings.pop("every_steps", None)
        cls = EVALUATORS[kind]
        known = {f.name for f in dataclasses.fields(cls)} - {"predict", "skipped"}
        unknown = set(settings) - known
        if unknown:
            raise ValueError(f"evals.{name}: unknown settings {sorted(unknown)} for {kind!r}")
        out[name] = cls(predict, **{**settings, **overrides})
    return out
