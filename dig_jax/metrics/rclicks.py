"""RClicks robustness metrics over clicking groups G1..G10 and the baseline clicker.

Per instance the protocol yields 20 IoUs for each of the ten clicking-group trajectories and for
the baseline trajectory (click the centre of the largest error). Following the RClicks
reference (`compute_benchmark_metrics.ipynb` of emb-ai/rclicks), per instance and threshold t:

- NoC_g@t (g = 1..10) and NoC_base@t as in `noc` (first click with IoU >= t, else 20);
- Sample NoC@t = mean_g NoC_g; its "±" is the per-instance std over groups (population std);
- ΔSB@t = (mean_g NoC_g − NoC_base) / NoC_base (NoC >= 1, so never a division by zero);
- ΔGR@t = (NoC_G1 − NoC_G10) / NoC_G10;
- ΔHH@t = mean over k = 1..5 of (NoC_Gk − NoC_G(k+5)) / NoC_G(k+5): the reference pairs the
  groups of the two halves one to one rather than comparing the halves' means;
- IoU-AUC = trapezoid of the T IoUs over clicks 1..T, divided by T − 1 (19 for 20 clicks);
- NSR = std_g(IoU_g,1) / mean_g(IoU_g,1) on the first-round clicks (RClicks: the spread of the
  IoU a person's first click gives, over where people click); 0 when every such IoU is 0 (the
  reference would give NaN); NaN (and not counted) for NoC tables given without them;
- the IoU forms of the Δs (RClicks supplementary Tab. 11): ΔSB-AUC = mean_g AUC_g − AUC_base,
  ΔGR-AUC = AUC_G1 − AUC_G10 (differences, not ratios). They stay informative when no
  trajectory reaches the threshold and every NoC is 20.

Dataset values are means over instances of these per-instance values; `RClicksTally` keeps
their sums (a mergeable `flax.struct` state, like `NoCTally`) so shards merge exactly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import flax.struct
import numpy as np

from dig_jax.metrics.noc import MAX_INTERACTIONS, noc

N_GROUPS = 10
RCLICKS_THRESHOLDS = (0.85, 0.90)
_PER_THRESHOLD = ("sample_noc", "sample_noc_std", "base_noc", "dsb", "dgr", "dhh",
                  "sample_nof", "base_nof")  # fmt: skip
_NEEDS_BASE = ("base_auc", "dsb_auc")
_NEEDS_FIRST = ("nsr",)
_SCALAR = ("sample_auc", "sample_auc_std", "base_auc", "nsr", "dsb_auc", "dgr_auc")


def _tag(t: float) -> str:
    return f"{round(100 * t)}"


def iou_auc(ious: Any) -> np.ndarray:
    """Area under the IoU-per-click curve, float64[...] from ious [..., T] (T >= 2): the
    trapezoid over clicks 1..T divided by T − 1, so an IoU of 1 throughout gives 1."""
    ious = np.asarray(ious, np.float64)
    if ious.ndim < 1 or ious.shape[-1] < 2:
        raise ValueError(f"ious must have shape [..., T] with T >= 2, got {ious.shape}")
    if not np.isfinite(ious).all() or (ious < 0).any() or (ious > 1).any():
        raise ValueError("ious must be finite values in [0, 1]")
    return np.trapezoid(ious, axis=-1) / (ious.shape[-1] - 1)


def _check_counts(name: str, value: Any, shape: tuple[int, ...], max_clicks: int) -> np.ndarray:
    arr = np.asarray(value, np.float64)
    if arr.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {arr.shape}")
    if not np.isfinite(arr).all() or (arr < 1).any() or (arr > max_clicks).any():
        raise ValueError(f"{name} must hold click counts in [1, {max_clicks}]")
    return arr


def instance_scores(
    noc_groups: Any,
    noc_base: Any,
    auc_groups: Any,
    auc_base: Any | None = None,
    *,
    max_clicks: int = MAX_INTERACTIONS,
    first_groups: Any | None = None,
) -> dict[str, np.ndarray]:
    """Per-instance RClicks values from NoC tables.

    Args:
      noc_groups: [N, 10, K] NoC of groups G1..G10 at K thresholds (values 1..max_clicks).
      noc_base: [N, K] NoC of the baseline clicker.
      auc_groups: [N, 10] IoU-AUC per group; auc_base: [N] or None (then NaN, not counted).
      first_groups: [N, 10] IoU after each group's first click, or None (NSR NaN).
    Returns float64 arrays: sample_noc, sample_noc_std, base_noc, dsb, dgr, dhh, sample_nof,
    base_nof ([N, K]; NoF = 1 where the count is max_clicks) and sample_auc, sample_auc_std,
    base_auc, nsr, dsb_auc, dgr_auc ([N]; base_auc and dsb_auc NaN without auc_base).
    """
    groups = np.asarray(noc_groups)
    if groups.ndim != 3 or groups.shape[1] != N_GROUPS:
        raise ValueError(f"noc_groups must have shape [N, {N_GROUPS}, K], got {groups.shape}")
    n, _, k = groups.shape
    groups = _check_counts("noc_groups", groups, (n, N_GROUPS, k), max_clicks)
    base = _check_counts("noc_base", noc_base, (n, k), max_clicks)
    auc = np.asarray(auc_groups, np.float64)
    if auc.shape != (n, N_GROUPS):
        raise ValueError(f"auc_groups must have shape {(n, N_GROUPS)}, got {auc.shape}")
    if not np.isfinite(auc).all() or (auc < 0).any() or (auc > 1).any():
        raise ValueError("auc_groups must be finite values in [0, 1]")
    if auc_base is None:
        auc_b = np.full(n, np.nan)
    else:
        auc_b = np.asarray(auc_base, np.float64)
        if auc_b.shape != (n,) or not np.isfinite(auc_b).all():
            raise ValueError(f"auc_base must be finite with shape {(n,)}, got {auc_b.shape}")
    nsr = np.full(n, np.nan)
    if first_groups is not None:
        first = np.asarray(first_groups, np.float64)
        if first.shape != (n, N_GROUPS) or not np.isfinite(first).all():
            raise ValueError(f"first_groups must be finite with shape {(n, N_GROUPS)}")
        first_mean = first.mean(axis=1)
        nsr = np.divide(first.std(axis=1), first_mean, out=np.zeros(n), where=first_mean > 0)
    mean_g = groups.mean(axis=1)
    half = N_GROUPS // 2
    auc_mean = auc.mean(axis=1)
    auc_std = auc.std(axis=1)
    return {
        "sample_noc": mean_g,
        "sample_noc_std": groups.std(axis=1),
        "base_noc": base,
        "dsb": (mean_g - base) / base,
        "dgr": (groups[:, 0] - groups[:, -1]) / groups[:, -1],
        "dhh": ((groups[:, :half] - groups[:, half:]) / groups[:, half:]).mean(axis=1),
        "sample_nof": (groups == max_clicks).mean(axis=1),
        "base_nof": (base == max_clicks).astype(np.float64),
        "sample_auc": auc_mean,
        "sample_auc_std": auc_std,
        "base_auc": auc_b,
        "nsr": nsr,
        "dsb_auc": auc_mean - auc_b,
        "dgr_auc": auc[:, 0] - auc[:, -1],
    }


@flax.struct.dataclass
class RClicksTally:
    """Sums over instances of the per-instance RClicks values (see module docstring).

    `sums` maps each name of `instance_scores` to a float64 sum ([K] per threshold or scalar);
    `count` instances, `base_auc_count` of them with a baseline AUC, `first_count` with their
    first-round IoUs (NSR).
    """

    sums: Mapping[str, Any]
    count: Any
    base_auc_count: Any
    thresholds: tuple[float, ...] = flax.struct.field(pytree_node=False, default=RCLICKS_THRESHOLDS)
    first_count: Any = 0

    @classmethod
    def empty(cls, thresholds: Sequence[float] = RCLICKS_THRESHOLDS) -> RClicksTally:
        k = len(thresholds)
        sums = {name: np.zeros(k) for name in _PER_THRESHOLD}
        sums.update({name: np.float64(0.0) for name in _SCALAR})
        return cls(sums, np.int64(0), np.int64(0), tuple(thresholds), np.int64(0))

    @classmethod
    def from_noc(
        cls,
        noc_groups: Any,
        noc_base: Any,
        auc_groups: Any,
        auc_base: Any | None = None,
        *,
        thresholds: Sequence[float] = RCLICKS_THRESHOLDS,
        max_clicks: int = MAX_INTERACTIONS,
        first_groups: Any | None = None,
    ) -> RClicksTally:
        """State from hand-made or computed NoC tables (shapes as in `instance_scores`)."""
        scores = instance_scores(noc_groups, noc_base, auc_groups, auc_base,
                                 max_clicks=max_clicks, first_groups=first_groups)  # fmt: skip
        if scores["base_noc"].shape[1] != len(thresholds):
            raise ValueError(
                f"thresholds has {len(thresholds)} levels, the NoC tables have "
                f"{scores['base_noc'].shape[1]}"
            )
        sums = {name: scores[name].sum(axis=0) for name in _PER_THRESHOLD}
        has_base, has_first = np.isfinite(scores["base_auc"]), np.isfinite(scores["nsr"])
        for name in _SCALAR:
            values = scores[name]
            if name in _NEEDS_BASE or name in _NEEDS_FIRST:
                values = values[has_base if name in _NEEDS_BASE else has_first]
            sums[name] = np.float64(values.sum())
        n = len(scores["base_noc"])
        counts = (np.int64(n), np.int64(has_base.sum()), tuple(thresholds))
        return cls(sums, *counts, np.int64(has_first.sum()))

    @classmethod
    def from_ious(
        cls,
        group_ious: Any,
        base_ious: Any,
        *,
        thresholds: Sequence[float] = RCLICKS_THRESHOLDS,
        max_clicks: int = MAX_INTERACTIONS,
    ) -> RClicksTally:
        """State from IoU trajectories: group_ious [N, 10, T], base_ious [N, T] (T >= 2)."""
        group_ious = np.asarray(group_ious, np.float64)
        base_ious = np.asarray(base_ious, np.float64)
        if group_ious.ndim != 3 or group_ious.shape[1] != N_GROUPS:
            raise ValueError(
                f"group_ious must have shape [N, {N_GROUPS}, T], got {group_ious.shape}"
            )
        if base_ious.shape != (group_ious.shape[0], group_ious.shape[2]):
            raise ValueError(
                f"base_ious must have shape {(group_ious.shape[0], group_ious.shape[2])}, "
                f"got {base_ious.shape}"
            )
        auc_groups, auc_base = iou_auc(group_ious), iou_auc(base_ious)
        noc_groups = noc(group_ious, thresholds, max_clicks)["noc"]
        noc_base = noc(base_ious, thresholds, max_clicks)["noc"]
        return cls.from_noc(
            noc_groups, noc_base, auc_groups, auc_base, thresholds=thresholds,
            max_clicks=max_clicks, first_groups=group_ious[..., 0],
        )  # fmt: skip

    def merge(self, other: RClicksTally) -> RClicksTally:
        if self.thresholds != other.thresholds:
            raise ValueError(f"thresholds differ: {self.thresholds} vs {other.thresholds}")
        sums = {k: self.sums[k] + other.sums[k] for k in self.sums}
        return RClicksTally(
            sums,
            self.count + other.count,
            self.base_auc_count + other.base_auc_count,
            self.thresholds,
            self.first_count + other.first_count,
        )

    def compute(self) -> dict[str, float]:
        """Means over instances: `sample_noc@90`, `sample_noc_std@90`, `base_noc@90`, `dsb@90`,
        `dgr@90`, `dhh@90` (Δs as fractions), `sample_nof@90` / `base_nof@90` (failures per
        instance), `sample_auc`, `sample_auc_std`, `base_auc`, `nsr`, `dsb_auc`, `dgr_auc`, and
        `n`. NaN when empty."""
        n = int(self.count)
        mean = lambda total, count: float(total) / count if count else float("nan")
        out: dict[str, float] = {"n": n}
        for name in _PER_THRESHOLD:
            for k, t in enumerate(self.thresholds):
                out[f"{name}@{_tag(t)}"] = mean(np.asarray(self.sums[name])[k], n)
        for name in _SCALAR:
            count = int(self.base_auc_count) if name in _NEEDS_BASE else n
            count = int(self.first_count) if name in _NEEDS_FIRST else count
            out[name] = mean(self.sums[name], count)
        return out


def rclicks_table(
    rows: Mapping[str, Mapping[str, float]],
    threshold: float = 0.90,
    digits: int = 2,
    max_clicks: int | None = None,
) -> str:
    """Markdown table in the RClicks layout (Table 4 + NSR) from `RClicksTally.compute()`
    results keyed by row label (e.g. the dataset): Sample NoC@t ± std, Base NoC@t, ΔSB, ΔGR,
    ΔHH (in %), IoU-AUC of the groups (± std over groups) and of the baseline, ΔGR-AUC, NSR (%).
    With `max_clicks`, rows whose NoC saturates at the limit get a note below the table: there
    the NoC-based columns carry no signal and the IoU-AUC columns do."""
    t = _tag(threshold)
    header = (
        f"| dataset | n | Sample NoC@{t} | Base NoC@{t} | ΔSB % | ΔGR % | ΔHH % "
        "| IoU-AUC sample | IoU-AUC base | ΔGR IoU-AUC | NSR % |"
    )
    lines = [header, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    f = lambda v, scale=1.0, d=digits: f"{scale * v:.{d}f}"
    for label, m in rows.items():
        lines.append(
            f"| {label} | {m['n']} | {f(m[f'sample_noc@{t}'])} ± {f(m[f'sample_noc_std@{t}'])} "
            f"| {f(m[f'base_noc@{t}'])} | {f(m[f'dsb@{t}'], 100)} | {f(m[f'dgr@{t}'], 100)} "
            f"| {f(m[f'dhh@{t}'], 100)} | {f(m['sample_auc'], d=3)} "
            f"± {f(m['sample_auc_std'], d=3)} | {f(m['base_auc'], d=3)} "
            f"| {f(m['dgr_auc'], d=3)} | {f(m['nsr'], 100)} |"
        )
    saturated = [
        label for label, m in rows.items()
        if max_clicks is not None and min(m[f"sample_noc@{t}"], m[f"base_noc@{t}"]) >= max_clicks
    ]  # fmt: skip
    if saturated:
        lines.append(
            f"\nNoC@{t} saturates at the {max_clicks}-click limit in {', '.join(saturated)}: no "
            f"trajectory reached {threshold:.0%}, so Sample / Base NoC, ΔSB, ΔGR and ΔHH carry no "
            "signal there; compare the IoU-AUC columns (and NSR)."
        )
    return "\n".join(lines)
