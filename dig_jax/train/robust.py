"""Robust prompts in the training loop: realistic and adversarial gestures (issue 40).

After a batch is fetched (and after iterative sampling), some of its interactions are redrawn,
each share a field of `config.robust`:

- `box_prior_prob`: a creation rectangle is replaced by a box drawn from the BREPS realism prior
  (the Gamma law on the CIoU loss to the target's tight box that people's boxes follow): a loss
  L ~ Gamma(k, θ) is drawn, then a random direction of the four edges (scaled by the box's width
  and height), and the box along it whose CIoU loss is nearest L;
- `box_attack_prob`: in that share of batches, up to `ATTACK_ROWS` creation rectangles are
  replaced by the box a few BREPS steps find against the current parameters (Adam on the box
  from the tight box, loss = Dice − λ · log prior, worst step kept; `dig_jax.robustness.breps`);
- `click_group_prob`: a click (creation or correction) is redrawn by clicking group: a group
  G1..G10 of the `click_map` clickability map over the error it corrects is drawn uniformly, and
  the click ∝ the map inside it (RClicks; "dt" by default, or a clickability model file), so
  clicks near the boundary (G1) are as frequent as central ones (G10);
- `stroke_attack_prob`: in that share of batches, up to `ATTACK_ROWS` creation lassos and
  scribbles are redrawn on the target in the crop and jittered by the prompt attack (smooth
  control displacements under the soft rasteriser's gradient, Gaussian prior on them).

Every redrawn gesture is rasterised with the hard rasteriser, as predict draws it. The attacks
run on the process's rows with the current variables: one compile each (`ATTACK_ROWS` rows,
padded by repeating a row), outside the train step. Draws come from the `rng` the caller seeds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dig_jax.cpu import train_compiler_options
from dig_jax.gestures import distance_uint8, rasterize, simulate_creation
from dig_jax.gestures.encode import box_outline_points
from dig_jax.gestures.types import BRUSH_RADIUS, Gesture, GestureKind
from dig_jax.metrics import ciou_loss, tight_box
from dig_jax.metrics.rclicks import N_GROUPS
from dig_jax.prompts.soft import box_encoder, points_encoder
from dig_jax.robustness.breps.attack import (
    BREPS_LAM,
    BREPS_LR_MULT,
    _attack_result,
    _attack_setup,
    attack_lr,
)
from dig_jax.robustness.breps.prior import BREPS_GAMMA, GammaParams
from dig_jax.robustness.breps.prompt_attack import _prompt_result, _prompt_setup, control_weights
from dig_jax.robustness.breps.search import HostSearch
from dig_jax.robustness.rclicks.sampling import group_labels

ATTACK_ROWS = 2  # rows of a batch one attack call takes (padded by repeating a row)
STROKE_POINTS = 48  # points a redrawn stroke is resampled to at most (one compile; the soft
# rasteriser costs ∝ points × pixels: 384 points took 10 s a call, 48 points ~10 px apart on a
# 224 crop keep the stroke's shape)
STROKE_CONTROLS = 8
PRIOR_GRID = 96  # box scales searched for the drawn CIoU loss
MAX_PRIOR_LOSS = 1.0  # CIoU losses above this (beyond 99.9 % of BREPS's prior) are redrawn
STROKE_KINDS = (GestureKind.SCRIBBLE, GestureKind.LOOSE_LASSO, GestureKind.TIGHT_LASSO)


@dataclasses.dataclass(frozen=True)
class RobustConfig:
    """Shares and settings of the robust prompts (module doc); all shares 0 = off."""

    box_prior_prob: float = 0.0
    box_attack_prob: float = 0.0
    attack_steps: int = 3
    attack_lam: float = BREPS_LAM
    attack_lr_mult: float = BREPS_LR_MULT
    click_group_prob: float = 0.0
    click_map: str = "dt"
    stroke_attack_prob: float = 0.0
    stroke_sigma_frac: float = 0.1

    def __post_init__(self) -> None:
        for name in ("box_prior_prob", "box_attack_prob", "click_group_prob",
                     "stroke_attack_prob"):  # fmt: skip
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name}: must be in [0, 1], got {value}")
        if self.attack_steps < 1:
            raise ValueError(f"attack_steps: must be >= 1, got {self.attack_steps}")
        if not self.attack_lam >= 0:
            raise ValueError(f"attack_lam: must be >= 0, got {self.attack_lam}")
        if not self.attack_lr_mult > 0:
            raise ValueError(f"attack_lr_mult: must be > 0, got {self.attack_lr_mult}")
        if not self.stroke_sigma_frac > 0:
            raise ValueError(f"stroke_sigma_frac: must be > 0, got {self.stroke_sigma_frac}")

    @property
    def enabled(self) -> bool:
        return any(
            p > 0 for p in (self.box_prior_prob, self.box_attack_prob, self.click_group_prob,
                            self.stroke_attack_prob)
        )  # fmt: skip

    @classmethod
    def from_config(cls, config: Any) -> RobustConfig:
        """`config.robust` (absent: robust prompts off)."""
        entry = config.get("robust", None)
        return cls() if entry is None else cls(**dict(entry))


# ----------------------------------------------------------------------------- host draws


def _error(batch: dict[str, np.ndarray], i: int) -> np.ndarray:
    """bool[S, S]: the pixels row i's interaction corrects (target differs from the previous
    mask; void excluded). For a creation it is the target itself."""
    target = batch["target"][i]
    prev = batch["prev_mask"][i] > 0 if batch["has_prev"][i] else np.zeros(target.shape, bool)
    return (target != 255) & ((target == 1) != prev)


def _set_gesture(batch: dict[str, np.ndarray], i: int, gesture: Gesture) -> None:
    raster = np.asarray(rasterize(gesture, batch["gesture"].shape[1:3]), np.uint8)
    batch["gesture"][i] = raster
    batch["distance"][i] = distance_uint8(raster)


def prior_box(
    tight: np.ndarray, shape: tuple[int, int], rng: np.random.Generator,
    prior: GammaParams = BREPS_GAMMA,
) -> np.ndarray:  # fmt: skip
    """f32[4] (x1, y1, x2, y2) pixel edges inside `shape` (H, W): a box whose CIoU loss to
    `tight` is a draw of the realism prior (module doc)."""
    h, w = shape
    tight = np.asarray(tight, np.float64)
    size = np.array([tight[2] - tight[0], tight[3] - tight[1]] * 2)
    target = rng.gamma(prior.shape, prior.scale)
    while target > MAX_PRIOR_LOSS:
        target = rng.gamma(prior.shape, prior.scale)
    direction = rng.standard_normal(4) * size
    scales = np.linspace(0.0, 2.0, PRIOR_GRID)[:, None]
    boxes = tight + scales * direction
    boxes = np.clip(boxes, 0, [w, h, w, h])
    lo = np.minimum(boxes[:, :2], boxes[:, 2:] - 1)
    boxes = np.concatenate([lo, np.maximum(boxes[:, 2:], lo + 1)], axis=1)
    losses = np.asarray(ciou_loss(boxes.astype(np.float32), tight.astype(np.float32)))
    return boxes[int(np.argmin(np.abs(losses - target)))].astype(np.float32)


def _is_creation(batch: dict[str, np.ndarray], i: int, kinds: tuple[int, ...]) -> bool:
    return not batch["has_prev"][i] and int(batch["gesture_kind"][i]) in kinds


def redraw_prior_boxes(
    batch: dict[str, np.ndarray], rng: np.random.Generator, prob: float,
    skip: tuple[int, ...] = (),
) -> int:  # fmt: skip
    """Replace each creation rectangle (rows in `skip` excepted), with probability `prob`, by
    `prior_box` of its target's tight box (in place). Returns how many were replaced."""
    done = 0
    for i in range(len(batch["gesture"])):
        if not _is_creation(batch, i, (GestureKind.RECTANGLE,)) or rng.random() >= prob:
            continue
        if i in skip:
            continue
        target = batch["target"][i] == 1
        if not target.any():
            continue
        box = prior_box(tight_box(target.astype(np.uint8)), target.shape, rng)
        _set_gesture(batch, i, Gesture(GestureKind.RECTANGLE, box_outline_points(box), True))
        done += 1
    return done


def group_click(prob_map: np.ndarray, rng: np.random.Generator) -> tuple[float, float] | None:
    """(x, y) of a click drawn ∝ `prob_map` inside a clicking group drawn uniformly from
    G1..G10 (None when the map has no mass)."""
    if not prob_map.sum() > 0:
        return None
    labels = group_labels(prob_map.astype(np.float32))
    group = int(rng.integers(1, N_GROUPS + 1))
    weights = np.where(labels == group, prob_map, 0.0).ravel().astype(np.float64)
    if not weights.sum() > 0:  # a group can be empty on tiny errors
        weights = prob_map.ravel().astype(np.float64)
    idx = int(rng.choice(weights.size, p=weights / weights.sum()))
    row, col = divmod(idx, prob_map.shape[1])
    return float(col), float(row)


def redraw_group_clicks(
    batch: dict[str, np.ndarray], rng: np.random.Generator, prob: float,
    map_fn: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray],
) -> int:  # fmt: skip
    """Redraw each click, with probability `prob`, by clicking group of `map_fn(image, target,
    error)` over the error it corrects (in place). Returns how many were redrawn."""
    done = 0
    for i in range(len(batch["gesture"])):
        if int(batch["gesture_kind"][i]) != GestureKind.CLICK or rng.random() >= prob:
            continue
        error = _error(batch, i)
        if not error.any():
            continue
        prob_map = np.asarray(map_fn(batch["image"][i], batch["target"][i], error), np.float32)
        point = group_click(prob_map * error, rng)
        if point is None:
            continue
        _set_gesture(batch, i, Gesture(GestureKind.CLICK, np.array([point], np.float32), False))
        done += 1
    return done


def click_map_function(spec: str) -> Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    """fn(image, target, error) -> map for `RobustConfig.click_map` ("ud", "dt", "sm" or a
    clickability model file)."""
    from dig_jax.robustness.rclicks.maps import map_function

    return map_function(spec)[1]


# ----------------------------------------------------------------------------- attacks


def _mask_logits(model: Any, variables: Any) -> Callable[[jax.Array], jax.Array]:
    return lambda x: model.apply(variables, x, train=False)["mask"]


def _pick_rows(batch: dict[str, np.ndarray], kinds: tuple[int, ...]) -> np.ndarray:
    rows = [i for i in range(len(batch["gesture"])) if _is_creation(batch, i, kinds)
            and (batch["target"][i] == 1).any()]  # fmt: skip
    return np.array(rows[:ATTACK_ROWS], np.int64)


def _padded(rows: np.ndarray) -> np.ndarray:
    return np.resize(rows, ATTACK_ROWS)  # repeats rows up to ATTACK_ROWS


class Attacker:
    """The in-loop attacks for one model: `boxes` and `strokes` edit a batch in place with the
    given variables. Each compiles once (ATTACK_ROWS rows at the batch's crop size)."""

    def __init__(self, model: Any, config: RobustConfig, input_kind: str = "gesture",
                 context_encoding: str = "clicks"):  # fmt: skip
        self.config = config
        self.input_kind = input_kind
        encode_box = box_encoder(input_kind, context_encoding)
        encode_points = points_encoder(input_kind, context_encoding)

        def box_setup(variables, *args):  # args: image, gt, bounds, lr_px, radius, lam, sign
            logits = _mask_logits(model, variables)
            return _attack_setup(
                *args, predict_logits=logits, encode_box=encode_box, min_size=1.0,
                prior=BREPS_GAMMA,
            )  # fmt: skip

        def stroke_setup(variables, *args):  # args: as `_prompt_setup` takes them
            return _prompt_setup(*args, predict_logits=_mask_logits(model, variables),
                                 encode_points=encode_points)  # fmt: skip

        options = train_compiler_options()
        steps = config.attack_steps
        self._boxes = HostSearch(
            box_setup, steps, batched=True, in_axes=(None, 0, 0, 0, 0, 0, None, None),
            step_options=options, result=_attack_result,
        )  # fmt: skip
        self._strokes = HostSearch(
            stroke_setup, steps, batched=True,
            in_axes=(None, 0, 0, 0, 0, 0, 0, 0, None, None, None),
            step_options=options, result=_prompt_result,
        )  # fmt: skip

    def boxes(self, variables: Any, batch: dict[str, np.ndarray]) -> tuple[int, ...]:
        """Replace up to ATTACK_ROWS creation rectangles by their BREPS-attacked box; returns
        the rows replaced."""
        rows = _pick_rows(batch, (GestureKind.RECTANGLE,))
        if not len(rows):
            return ()
        take = _padded(rows)
        size = batch["target"].shape[1:3]
        lr = float(attack_lr(size[0], size[1], self.config.attack_lr_mult))
        result = self._boxes(
            variables,
            jnp.asarray(batch["image"][take]),
            jnp.asarray(batch["target"][take]),
            jnp.tile(jnp.array([0.0, 0.0, size[1], size[0]], jnp.float32), (len(take), 1)),
            jnp.full(len(take), lr, jnp.float32),
            jnp.full(len(take), BRUSH_RADIUS, jnp.float32),
            jnp.float32(self.config.attack_lam),
            jnp.float32(1.0),
        )
        found = np.asarray(result.box)
        for j, i in enumerate(rows):
            corners = box_outline_points(found[j])
            _set_gesture(batch, int(i), Gesture(GestureKind.RECTANGLE, corners, True))
        return tuple(int(i) for i in rows)

    def strokes(self, variables: Any, batch: dict[str, np.ndarray],
                rng: np.random.Generator) -> int:  # fmt: skip
        """Redraw up to ATTACK_ROWS creation lassos/scribbles on their target in the crop and
        jitter them by the prompt attack."""
        rows = _pick_rows(batch, tuple(int(k) for k in STROKE_KINDS))
        if not len(rows):
            return 0
        gestures = []
        for i in rows:
            kind = GestureKind(int(batch["gesture_kind"][i]))
            gesture = simulate_creation(kind, batch["target"][i] == 1, rng)
            points = np.asarray(gesture.points, np.float32)
            if len(points) > STROKE_POINTS:  # keep the stroke's shape, fewer samples
                points = points[np.linspace(0, len(points) - 1, STROKE_POINTS).astype(int)]
            gestures.append(Gesture(kind, points, gesture.closed))
        take = _padded(np.arange(len(rows)))
        points = np.zeros((ATTACK_ROWS, STROKE_POINTS, 2), np.float32)
        weights = np.zeros((ATTACK_ROWS, STROKE_POINTS, STROKE_CONTROLS), np.float32)
        lengths = np.zeros(ATTACK_ROWS, np.int32)
        closed = np.zeros(ATTACK_ROWS, bool)
        sigma = np.zeros(ATTACK_ROWS, np.float32)
        for j, g in enumerate(gestures[k] for k in take):
            n = len(g.points)
            points[j, :n], points[j, n:] = g.points, g.points[-1]
            controls = min(STROKE_CONTROLS, n)
            weights[j, :, :controls] = control_weights(n, STROKE_POINTS, controls, g.closed)
            lengths[j], closed[j] = n, g.closed
            target = batch["target"][rows[take[j]]] == 1
            box = tight_box(target.astype(np.uint8))
            area = max(float((box[2] - box[0]) * (box[3] - box[1])), 1.0)
            sigma[j] = self.config.stroke_sigma_frac * np.sqrt(area)
        result = self._strokes(
            variables,
            jnp.asarray(batch["image"][rows[take]]),
            jnp.asarray(batch["target"][rows[take]]),
            points, lengths, closed, weights, sigma,
            jnp.float32(self.config.attack_lr_mult), jnp.float32(self.config.attack_lam),
            jnp.float32(1.0),
        )  # fmt: skip
        moved = np.asarray(result.points)
        for j, (i, g) in enumerate(zip(rows, gestures, strict=True)):
            _set_gesture(batch, int(i), Gesture(g.kind, moved[j, : len(g.points)], g.closed))
        return len(rows)


def robust_batch(
    batch: dict[str, np.ndarray],
    rng: np.random.Generator,
    config: RobustConfig,
    attacker: Attacker | None = None,
    variables: Any = None,
    map_fn: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """(a copy of `batch` with its robust prompts, counts per kind of redraw). Draws from
    `rng` in a fixed order: same rng state, same variables, same batch."""
    out = {k: np.array(v) for k, v in batch.items()}
    counts = {"box_prior": 0, "box_attack": 0, "click_group": 0, "stroke_attack": 0}
    attack_boxes = rng.random() < config.box_attack_prob
    attack_strokes = rng.random() < config.stroke_attack_prob
    if attack_boxes or attack_strokes:
        if attacker is None or variables is None:
            raise ValueError("robust_batch: the attacks need an attacker and the variables")
    attacked: tuple[int, ...] = ()
    if attack_boxes:
        attacked = attacker.boxes(variables, out)
        counts["box_attack"] = len(attacked)
    if config.box_prior_prob > 0:
        counts["box_prior"] = redraw_prior_boxes(out, rng, config.box_prior_prob, attacked)
    if attack_strokes:
        counts["stroke_attack"] = attacker.strokes(variables, out, rng)
    if config.click_group_prob > 0:
        fn = map_fn or click_map_function(config.click_map)
        counts["click_group"] = redraw_group_clicks(out, rng, config.click_group_prob, fn)
    return out, counts
