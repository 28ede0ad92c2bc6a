"""Markdown tables from evaluation results (the `results` of `python -m dig_jax.evaluate`'s
`metrics.json`: {predictor: {evaluator name: {"type", "metrics": {flat name: value}}}}), used by
the command and by `notebooks/03_dig_tables.py`, so a results file always renders the same."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dig_jax.metrics import MAX_INTERACTIONS, noc

KINDS = ("click", "scribble", "loose_lasso", "tight_lasso", "rectangle")
PHASE_NAMES = {"create": "creation", "refine": "refinement", "multi": "multi-region"}


def _cell(value: float | None, digits: int = 3) -> str:
    return (
        "–"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else (f"{value:.{digits}f}")
    )


def _datasets(metrics: Mapping[str, float], depth: int) -> list[str]:
    """Dataset specs of flat metric names `<dataset>/<rest with depth parts>` (specs may hold
    '/', e.g. bsds500_regions/val)."""
    out = []
    for name in metrics:
        spec = name.rsplit("/", depth)[0]
        if spec not in out:
            out.append(spec)
    return out


def _count(value: float | None) -> str:
    return "–" if value is None else str(int(value))


def kind_table(
    results: Mapping[str, Mapping[str, Any]], score: str = "iou_global", phase: str = "create"
) -> str:
    """Rows dataset × predictor, columns gesture kinds + all + n (samples in the row, from
    `<dataset>/n/all/<phase>` when the results hold counts): `score` in `phase` of every
    dig_tables evaluator; "" when no evaluator has that phase."""
    rows = []
    for predictor, evals in results.items():
        for entry in evals.values():
            if entry.get("type") != "dig_tables":
                continue
            metrics = entry["metrics"]
            for spec in _datasets(metrics, 3):
                cells = [metrics.get(f"{spec}/{score}/{k}/{phase}") for k in (*KINDS, "all")]
                if all(c is None for c in cells):
                    continue
                n = _count(metrics.get(f"{spec}/n/all/{phase}"))
                rows.append(
                    f"| {spec} | {predictor} | " + " | ".join(map(_cell, cells)) + f" | {n} |"
                )
    if not rows:
        return ""
    title = f"**{score}, {PHASE_NAMES.get(phase, phase)}** (higher is better)"
    if phase == "create" and score.endswith("_local"):
        title = f"**{score} (= {_other(score)}: no previous mask), creation** (higher is better)"
    header = "| dataset | predictor | " + " | ".join((*KINDS, "all")) + " | n |"
    rule = "|---|---|" + "---:|" * (len(KINDS) + 2)
    return "\n".join([title, "", header, rule, *rows])


def _other(score: str) -> str:
    """rice_local <-> iou_local (equal in creation)."""
    kind, _, truth = score.partition("_")
    return f"{'iou' if kind == 'rice' else 'rice'}_{truth}"


def nog_table(results: Mapping[str, Mapping[str, Any]], threshold: int = 90) -> str:
    """Rows dataset × predictor × start, columns kinds (incl. mixed): `NoC@t (NoF@t)` of every
    iterative evaluator (lower is better); "" when there is none. The title states the cap on
    gestures each entry ran with (its `max_interactions`, 20 when the entry does not say)."""
    rows, kinds, caps = [], [], []
    for evals in results.values():
        for entry in evals.values():
            if entry.get("type") == "iterative":
                for name in entry["metrics"]:
                    kind = name.rsplit("/", 2)[-2]
                    if kind not in kinds:
                        kinds.append(kind)
    for predictor, evals in results.items():
        for entry in evals.values():
            if entry.get("type") != "iterative":
                continue
            cap = int(entry.get("max_interactions", MAX_INTERACTIONS))
            caps += [cap] if cap not in caps else []
            metrics = entry["metrics"]
            for prefix in _datasets(metrics, 2):  # "<dataset>/<start>"
                spec, start = prefix.rsplit("/", 1)
                cells = []
                for kind in kinds:
                    noc = metrics.get(f"{prefix}/{kind}/NoC@{threshold}")
                    nof = metrics.get(f"{prefix}/{kind}/NoF@{threshold}")
                    cells.append("–" if noc is None else f"{noc:.2f} ({int(nof)})")
                rows.append(f"| {spec} | {predictor} | {start} | " + " | ".join(cells) + " |")
    if not rows:
        return ""
    cap = " / ".join(map(str, sorted(caps)))
    title = f"**NoG@{threshold} (NoF@{threshold})**, at most {cap} gestures (lower is better)"
    header = "| dataset | predictor | start | " + " | ".join(kinds) + " |"
    rule = "|---|---|---|" + "---:|" * len(kinds)
    return "\n".join([title, "", header, rule, *rows])


def _same_table(results: Mapping[str, Mapping[str, Any]], a: str, b: str, phase: str) -> bool:
    """True when scores `a` and `b` print the same cells in `phase` (e.g. creation on regions
    of one part, where local and global GT coincide)."""
    first, second = kind_table(results, a, phase), kind_table(results, b, phase)
    return first.split("\n", 1)[-1] == second.split("\n", 1)[-1]  # the cells, not the titles


def all_tables(
    results: Mapping[str, Mapping[str, Any]],
    scores: Sequence[str] = ("iou_global", "rice_local", "rice_global"),
) -> str:
    """Every kind table (each phase and score present) and NoG table, in a fixed order.
    Creation is printed once: RICE = IoU without a previous mask, so its table is `rice_local`
    (= iou_local), followed by `iou_global` only where the global GT (the whole region)
    changes a cell."""
    creation = [kind_table(results, "rice_local", "create")]
    if not _same_table(results, "rice_local", "iou_global", "create"):
        creation.append(kind_table(results, "iou_global", "create"))
    tables = creation + [kind_table(results, s, p) for p in PHASE_NAMES if p != "create"
                         for s in scores]  # fmt: skip
    tables += [nog_table(results, t) for t in (80, 85, 90)]
    return "\n\n".join(t for t in tables if t)


def _trajectories(results: Mapping[str, Mapping[str, Any]], predictor: str) -> dict[str, Any]:
    """{"dataset/start/kind": ({"instances", "ious"}, cap)} of a predictor's NoG runs."""
    if predictor not in results:
        raise ValueError(f"paired: no predictor {predictor!r} in the results ({sorted(results)})")
    out = {}
    for entry in results[predictor].values():
        if entry.get("type") == "iterative":
            cap = int(entry.get("max_interactions", MAX_INTERACTIONS))
            out.update({k: (t, cap) for k, t in entry.get("trajectories", {}).items()})
    return out


def paired_nog(
    results: Mapping[str, Mapping[str, Any]],
    base: str,
    other: str,
    threshold: int = 90,
    *,
    draws: int = 10_000,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """NoG@`threshold` % of `other` against `base`, paired over the instances both ran (matched
    by name), per "dataset/start/kind" and pooled over datasets ("all/start/kind", where there
    are several): rows {"key", "n", "base", "other", "diff" (other - base), "low", "high"},
    the last two the 95 % percentile interval of the mean difference over `draws` bootstrap
    resamplings of the instances (numpy Generator(`seed`)). ValueError when a predictor is
    missing, has no saved trajectories (results written before they were), or the two ran
    with different caps."""
    a, b = _trajectories(results, base), _trajectories(results, other)
    if not a or not b:
        empty = base if not a else other
        raise ValueError(f"paired: {empty!r} has no NoG trajectories (run evaluate --nog-kinds)")
    rng = np.random.default_rng(seed)
    rows, pooled = [], {}

    def row(key: str, pairs: np.ndarray) -> dict[str, Any]:
        diff = pairs[:, 1] - pairs[:, 0]
        means = diff[rng.integers(0, len(diff), (draws, len(diff)))].mean(axis=1)
        low, high = np.percentile(means, [2.5, 97.5])
        n, (mean_a, mean_b) = len(diff), pairs.mean(axis=0)
        return {"key": key, "n": n, "base": float(mean_a), "other": float(mean_b),
                "diff": float(diff.mean()), "low": float(low), "high": float(high)}  # fmt: skip

    for key in (k for k in a if k in b):
        (ta, cap_a), (tb, cap_b) = a[key], b[key]
        if cap_a != cap_b:
            raise ValueError(f"paired: {key} ran with at most {cap_a} and {cap_b} gestures")
        index = {name: i for i, name in enumerate(tb["instances"])}
        both = [(i, index[name]) for i, name in enumerate(ta["instances"]) if name in index]
        if not both:
            continue
        counts = []
        for t, rows_of in ((ta, [i for i, _ in both]), (tb, [j for _, j in both])):
            ious = np.asarray(t["ious"], np.float64)[rows_of]
            counts.append(noc(ious, (threshold / 100,), cap_a)["noc"][:, 0])
        pairs = np.stack(counts, axis=1).astype(np.float64)
        rows.append(row(key, pairs))
        _, start, kind = key.rsplit("/", 2)  # dataset names may hold "/"
        pooled.setdefault(f"{start}/{kind}", []).append(pairs)
    for start_kind, parts in pooled.items():
        if len(parts) > 1:
            rows.append(row(f"all/{start_kind}", np.concatenate(parts)))
    return rows


def paired_table(
    results: Mapping[str, Mapping[str, Any]], base: str, threshold: int = 90, **kwargs: Any
) -> str:
    """A markdown table of `paired_nog` for every other predictor with NoG trajectories."""
    others = [p for p in results if p != base and _trajectories(results, p)]
    lines = []
    for other in others:
        for r in paired_nog(results, base, other, threshold, **kwargs):
            lines.append(
                f"| {r['key']} | {other} | {r['n']} | {r['base']:.2f} | {r['other']:.2f} | "
                f"{r['diff']:+.2f} | {r['low']:+.2f} to {r['high']:+.2f} |"
            )
    if not lines:
        return ""
    title = (f"**Paired NoG@{threshold} against {base}** (the same instances; 95 % bootstrap "
             "interval of the mean difference; negative: fewer gestures)")  # fmt: skip
    header = f"| dataset/start/kind | predictor | n | {base} | predictor's | difference | 95 % |"
    return "\n".join([title, "", header, "|---|---|---:|---:|---:|---:|---|", *lines])


def merge_results(payloads: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The `results` of several `metrics.json` payloads side by side. One predictor's runs of
    the same evaluator in several files (e.g. one dataset each) are merged metric by metric and
    trajectory by trajectory; where two files hold the same one, the later file wins."""
    merged: dict[str, dict[str, Any]] = {}
    for payload in payloads:
        for predictor, evals in payload["results"].items():
            into = merged.setdefault(predictor, {})
            for name, entry in evals.items():
                old = into.get(name)
                if old is None or old.get("type") != entry.get("type"):
                    into[name] = entry
                    continue
                into[name] = {**old, **entry, "metrics": {**old["metrics"], **entry["metrics"]}}
                if "trajectories" in old or "trajectories" in entry:
                    both = {**old.get("trajectories", {}), **entry.get("trajectories", {})}
                    into[name]["trajectories"] = both
    return merged


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m dig_jax.evaluation.tables A/metrics.json B/metrics.json [--out DIR]`: one set
    of tables for runs made separately (e.g. the classical peers once, each checkpoint later)."""
    import argparse
    import json
    from pathlib import Path

    from dig_jax.data.sources.record import read_json
    from dig_jax.outputs import check_out_dir, record_written, write_text_atomic

    parser = argparse.ArgumentParser(description=main.__doc__.split("\n")[0])
    parser.add_argument("metrics", nargs="+", help="metrics.json files of `dig_jax.evaluate`")
    parser.add_argument("--out", default="", help="write tables.md and metrics.json here")
    parser.add_argument(
        "--paired", default="", metavar="PREDICTOR",
        help="also compare every other predictor's NoG@90 with this one's, instance by instance",
    )  # fmt: skip
    args = parser.parse_args(argv)
    try:
        if args.out:
            check_out_dir(args.out, ["tables.md", "metrics.json"])
    except ValueError as error:
        parser.error(str(error))
    payloads = []
    for name in args.metrics:
        try:
            payloads.append(read_json(Path(name), "metrics"))
        except (OSError, ValueError) as error:  # missing, not UTF-8 JSON, nested too deep
            parser.error(f"cannot read {name}: {error}")
        if not isinstance(payloads[-1], dict) or "results" not in payloads[-1]:
            parser.error(f"{name} is not a metrics.json of dig_jax.evaluate (no 'results')")
    results = merge_results(payloads)
    text = all_tables(results)
    if args.paired:
        try:
            text = "\n\n".join(t for t in (text, paired_table(results, args.paired)) if t)
        except ValueError as error:  # an unknown predictor, results without trajectories
            parser.error(str(error))
    print(text)
    if args.out:
        out = Path(args.out)
        record_written(out, ["tables.md", "metrics.json"])
        write_text_atomic(out / "tables.md", text + "\n")
        merged = {"sources": list(args.metrics), "results": results}
        write_text_atomic(out / "metrics.json", json.dumps(merged, indent=1, default=str))
        print(f"wrote {out / 'tables.md'}\nwrote {out / 'metrics.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
