"""RClicks multi-round protocol: up to 20 clicks per instance, one trajectory per clicking
group G1..G10 plus the baseline clicker, batched over instances and trajectories.

Each round, for every trajectory still running (RClicks `evaluate_sample` + `Clicker`):
1. the error to fix is chosen as the baseline does (`choose_error`: larger padded distance
   transform of FN vs FP, clicked pixels excluded) — this also sets the click's sign;
2. the baseline trajectory clicks the distance-transform maximum; the trajectory of group g
   computes the clickability map of the whole chosen error (`map_fn(image, gt, error)`),
   zeroes the pixels already clicked and draws one click ∝ the map within Gg. When that leaves
   no mass it falls back to the baseline click, as the reference does;
3. every click becomes a DIG sample — a CLICK gesture (5 px disc) on the photo with the current
   mask as the previous mask (none in round 1) and context ADD/REMOVE from the click's sign.
   Gesture-agnostic models ignore the context; click models with context read it (use the
   "oracle" context strategy so the predictor passes it on). All samples of a round go to one
   predictor call;
4. the IoU against the GT (void ignored) is recorded. A trajectory whose mask has no error left
   stops and keeps its IoU (as `dig_jax.evaluation.iterative` does); the reference keeps
   clicking at pixel (0, 0) then.
Note: the project's models see one gesture plus the previous mask per round, not the list of
all clicks as RITM-style click models do. Randomness: the click of (instance `start + i`,
trajectory t, round r) uses `fold_in(fold_in(fold_in(key(seed), start + i), t), r)`, so the
same seed gives the same clicks whether instances run together or one at a time.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dig_jax.evaluation.predictors import Predictor
from dig_jax.gestures import GestureKind, rasterize
from dig_jax.metrics import MAX_INTERACTIONS, iou
from dig_jax.metrics.rclicks import N_GROUPS, RCLICKS_THRESHOLDS, RClicksTally
from dig_jax.robustness.rclicks.clicker import Click, ErrorChoice, argmax_click, choose_error
from dig_jax.robustness.rclicks.maps import MapFn, check_image
from dig_jax.robustness.rclicks.sampling import draw_batch, group_labels

TRAJECTORIES = N_GROUPS + 1  # G1..G10, then the baseline
BASELINE = N_GROUPS  # trajectory index of the baseline clicker


@dataclasses.dataclass(frozen=True)
class RClicksRun:
    """Trajectories of N instances: `ious` float64[N, 11, T] (axis 1: G1..G10, baseline),
    `clicks` float32[N, 11, T, 2] as (x, y), (-1, -1) where the trajectory had stopped,
    `positive` bool[N, 11, T] (ADD clicks), `sampled` bool[N, 11, T] (drawn from the group map;
    False for baseline clicks, fallbacks and stopped rounds)."""

    ious: np.ndarray
    clicks: np.ndarray
    positive: np.ndarray
    sampled: np.ndarray

    def tally(self, thresholds: Sequence[float] = RCLICKS_THRESHOLDS) -> RClicksTally:
        """The mergeable RClicks metric state of these instances (NoC capped at T clicks)."""
        return RClicksTally.from_ious(
            self.ious[:, :N_GROUPS], self.ious[:, BASELINE], thresholds=thresholds,
            max_clicks=self.ious.shape[-1],
        )  # fmt: skip


@jax.jit
def _row_keys(base: jax.Array, ids: jax.Array) -> jax.Array:
    """Keys for rows (instance, trajectory, round) int32[B, 3] derived from `base`."""

    def one(row):
        return jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(base, row[0]), row[1]),
                                  row[2])  # fmt: skip

    return jax.vmap(one)(ids)


def _bucket(n: int, minimum: int) -> int:
    """Next power of two >= max(n, minimum): few distinct shapes, few compiles."""
    return 1 << max(int(n) - 1, minimum - 1, 0).bit_length()


def _digest(mask: np.ndarray) -> bytes:
    return hashlib.blake2b(np.packbits(mask).tobytes(), digest_size=16).digest()


def _check_items(items: Sequence[Sequence[Any]]) -> list[tuple[np.ndarray, np.ndarray]]:
    out = []
    for k, item in enumerate(items):
        image = check_image(item[0], f"items[{k}] image")
        gt = np.asarray(item[1])
        if gt.shape != image.shape[:2]:
            raise ValueError(f"items[{k}] gt must have shape {image.shape[:2]}, got {gt.shape}")
        if not np.isin(gt, (0, 1, 255)).all():
            raise ValueError(f"items[{k}] gt must hold only 0, 1 and 255 (void)")
        out.append((image, gt.astype(np.uint8)))
    return out


@dataclasses.dataclass
class _Row:
    """A group trajectory's draw this round: the pixels (flat indices) of its group and their
    weights, and the error choice (for the click's sign and the fallback)."""

    instance: int
    trajectory: int
    choice: ErrorChoice
    pixels: np.ndarray
    weights: np.ndarray


def _plan_instance(
    i: int, image: np.ndarray, gt: np.ndarray, preds: list, clicked: list, done: np.ndarray,
    map_fn: MapFn,
) -> tuple[dict[tuple[int, int], Click], list[_Row]]:  # fmt: skip
    """Steps 1-2 of the module docstring for instance i: the clicks decided without drawing
    (baseline, fallbacks) and the group draws to make. Marks finished trajectories in `done`."""
    target = (gt == 1).astype(np.uint8)
    chosen, rows = {}, []
    maps: dict[bytes, np.ndarray] = {}
    labels: dict[bytes, np.ndarray] = {}
    for t in range(TRAJECTORIES):
        if done[i, t]:
            continue
        choice = choose_error(preds[t], gt, clicked[t])
        if choice is None:
            done[i, t] = True
            continue
        if t == BASELINE:
            chosen[i, t] = argmax_click(choice)
            continue
        digest = _digest(choice.error)
        if digest not in maps:
            maps[digest] = np.asarray(map_fn(image, target, choice.error), np.float32)
        weights = maps[digest].ravel() * choice.free.ravel()
        support = np.flatnonzero(weights > 0)
        if support.size == 0:
            chosen[i, t] = argmax_click(choice)
            continue
        key = digest + _digest(choice.free)
        if key not in labels:  # round 1: one sort serves all ten groups
            labels[key] = group_labels(weights[support])
        inside = labels[key] == t + 1
        rows.append(_Row(i, t, choice, support[inside], weights[support][inside]))
    return chosen, rows


def _draw(rows: list[_Row], base_key: jax.Array, start: int, step: int) -> list[Click | None]:
    """One click per row, drawn ∝ its weights in one batched call (shapes padded to few
    sizes); None where a row has no mass."""
    b, length = -(-len(rows) // 8) * 8, _bucket(max(len(r.pixels) for r in rows), 64)
    weights = np.zeros((b, length), np.float32)
    ids = np.zeros((b, 3), np.int32)
    for k, r in enumerate(rows):
        weights[k, : len(r.weights)] = r.weights
        ids[k] = (start + r.instance, r.trajectory, step)
    keys = _row_keys(base_key, jnp.asarray(ids))
    idx, valid = (np.asarray(a) for a in draw_batch(keys, jnp.asarray(weights)))
    out: list[Click | None] = []
    for k, r in enumerate(rows):
        if not valid[k]:
            out.append(None)
            continue
        row, col = np.unravel_index(int(r.pixels[idx[k]]), r.choice.error.shape)
        out.append(Click(float(col), float(row), r.choice.positive))
    return out


def click_sample(image: np.ndarray, click: Click, prev: np.ndarray, has_prev: bool) -> dict:
    """The predictor sample of one click: a CLICK gesture map, the previous mask, the context."""
    return {
        "image": image,
        "gesture": np.asarray(rasterize(click.gesture(), prev.shape), np.uint8),
        "prev_mask": prev, "has_prev": np.bool_(has_prev), "context": np.int32(click.context),
        "gesture_kind": np.int32(GestureKind.CLICK),
    }  # fmt: skip


def rclicks_ious(
    predict: Predictor,
    items: Sequence[Sequence[Any]],
    map_fn: MapFn,
    *,
    seed: int = 0,
    start: int = 0,
    max_clicks: int = MAX_INTERACTIONS,
) -> RClicksRun:
    """Run the protocol (module docstring) on `items`: (image uint8[H,W,3], gt uint8[H,W]
    {0,1,255}, ...) at each photo's own size, e.g. `dig_jax.evaluation.protocol.nog_items(...)`.

    `map_fn(image, gt {0,1}, error bool) -> float[H, W]` is a clickability map (`map_function`);
    `start` is the dataset index of `items[0]` (it only feeds the random keys).
    """
    if max_clicks < 1:
        raise ValueError(f"max_clicks must be >= 1, got {max_clicks}")
    data = _check_items(items)
    n, t_all = len(data), TRAJECTORIES
    ious = np.zeros((n, t_all, max_clicks))
    clicks = np.full((n, t_all, max_clicks, 2), -1.0, np.float32)
    positive = np.zeros((n, t_all, max_clicks), bool)
    sampled = np.zeros((n, t_all, max_clicks), bool)
    preds = [[np.zeros(gt.shape, np.uint8) for _ in range(t_all)] for _, gt in data]
    clicked = [[np.zeros(gt.shape, bool) for _ in range(t_all)] for _, gt in data]
    done = np.zeros((n, t_all), bool)
    base_key = jax.random.key(seed)
    for step in range(max_clicks):
        chosen: dict[tuple[int, int], Click] = {}
        rows: list[_Row] = []
        for i, (image, gt) in enumerate(data):
            more, more_rows = _plan_instance(i, image, gt, preds[i], clicked[i], done, map_fn)
            chosen.update(more)
            rows += more_rows
        for r, click in zip(rows, _draw(rows, base_key, start, step) if rows else [], strict=True):
            sampled[r.instance, r.trajectory, step] = click is not None
            chosen[r.instance, r.trajectory] = click or argmax_click(r.choice)
        order = sorted(chosen)
        samples = []
        for i, t in order:
            click = chosen[i, t]
            samples.append(click_sample(data[i][0], click, preds[i][t], step > 0))
            clicks[i, t, step] = (click.x, click.y)
            positive[i, t, step] = click.positive
            clicked[i][t][int(click.y), int(click.x)] = True
        masks = predict(samples) if samples else []
        for (i, t), mask in zip(order, masks, strict=True):
            preds[i][t] = (np.asarray(mask) > 0).astype(np.uint8)
        for i, (_, gt) in enumerate(data):
            for t in range(t_all):
                if (i, t) in chosen or step == 0:
                    ious[i, t, step] = iou(preds[i][t], gt)
                else:
                    ious[i, t, step] = ious[i, t, step - 1]
    return RClicksRun(ious, clicks, positive, sampled)
