"""Dataset-level averages as mergeable states (sharded or chunked evaluation = one pass).

States are `flax.struct` pytrees, so they can also be built and merged inside `jax.jit`.
`Mean` is a (total, count) pair; `Averages` maps names (e.g. `rice_local/click/refine`) to
`Mean`s; `NoCTally` sums NoC values and failures per threshold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import flax.struct
import numpy as np

from dig_jax.metrics.noc import DEFAULT_THRESHOLDS


@flax.struct.dataclass
class Mean:
    """Running mean: `total` (sum of values) and `count` (how many)."""

    total: Any
    count: Any

    @classmethod
    def empty(cls) -> Mean:
        return cls(total=np.float64(0.0), count=np.int64(0))

    @classmethod
    def from_values(cls, values: Any, mask: Any | None = None) -> Mean:
        """State of `values` (any shape); `mask` (same shape, bool) selects which count."""
        values = np.asarray(values, dtype=np.float64)
        if mask is None:
            mask = np.ones(values.shape, dtype=bool)
        mask = np.asarray(mask, dtype=bool)
        try:
            mask = np.broadcast_to(mask, values.shape)
        except ValueError:
            raise ValueError(
                f"mask of shape {mask.shape} does not match values of shape {values.shape}"
            ) from None
        if np.isnan(values[mask]).any():
            raise ValueError("values contains NaN where mask selects it")
        return cls(total=np.float64(values[mask].sum()), count=np.int64(mask.sum()))

    def merge(self, other: Mean) -> Mean:
        return Mean(total=self.total + other.total, count=self.count + other.count)

    def compute(self) -> float:
        """The mean; NaN when nothing was counted."""
        count = int(self.count)
        return float(self.total) / count if count else float("nan")


@flax.struct.dataclass
class Averages:
    """Named means that merge key by key (a key missing on one side counts as empty)."""

    means: Mapping[str, Mean] = flax.struct.field(default_factory=dict)

    def add(self, name: str, values: Any, mask: Any | None = None) -> Averages:
        """A new state with `values` added under `name`."""
        update = Averages({name: Mean.from_values(values, mask)})
        return self.merge(update)

    def merge(self, other: Averages) -> Averages:
        keys = sorted(set(self.means) | set(other.means))
        empty = Mean.empty()
        merged = {k: self.means.get(k, empty).merge(other.means.get(k, empty)) for k in keys}
        return Averages(merged)

    def compute(self) -> dict[str, float]:
        return {k: m.compute() for k, m in sorted(self.means.items())}

    def counts(self) -> dict[str, int]:
        return {k: int(m.count) for k, m in sorted(self.means.items())}


@flax.struct.dataclass
class NoCTally:
    """Per-threshold sums of NoC and failure counts over instances."""

    noc_total: Any
    failures: Any
    count: Any
    thresholds: tuple[float, ...] = flax.struct.field(pytree_node=False, default=DEFAULT_THRESHOLDS)

    @classmethod
    def from_result(
        cls, result: Mapping[str, Any], thresholds: Sequence[float] = DEFAULT_THRESHOLDS
    ) -> NoCTally:
        """State from the output of `noc(...)` over any number of instances."""
        k = len(thresholds)
        counts = np.asarray(result["noc"]).reshape(-1, k)
        failed = np.asarray(result["failed"]).reshape(-1, k)
        return cls(
            noc_total=counts.sum(axis=0).astype(np.int64),
            failures=failed.sum(axis=0).astype(np.int64),
            count=np.int64(counts.shape[0]),
            thresholds=tuple(thresholds),
        )

    def merge(self, other: NoCTally) -> NoCTally:
        if self.thresholds != other.thresholds:
            raise ValueError(f"thresholds differ: {self.thresholds} vs {other.thresholds}")
        return NoCTally(
            noc_total=self.noc_total + other.noc_total,
            failures=self.failures + other.failures,
            count=self.count + other.count,
            thresholds=self.thresholds,
        )

    def compute(self) -> dict[str, float]:
        """`NoC@t` (mean over instances) and `NoF@t` (number of failures) per threshold."""
        out: dict[str, float] = {}
        n = int(self.count)
        for k, t in enumerate(self.thresholds):
            tag = f"{round(100 * t)}"
            out[f"NoC@{tag}"] = float(self.noc_total[k]) / n if n else float("nan")
            out[f"NoF@{tag}"] = int(self.failures[k])
        return out
