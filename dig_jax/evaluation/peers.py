"""Classical peers a user could pick instead of a model, as predictors on the same samples.

- `filled`: the gesture itself, holes filled, as the mask (a lasso or rectangle gives its
  interior; clicks and scribbles give their stroke).
- `grabcut`: OpenCV's GrabCut (`cv2.grabCut`, 5 iterations) seeded by the gesture: an outline
  that encloses an area marks its inside (outline included) as probable foreground and the
  outside as background; an open stroke marks its pixels as foreground and the rest as probable
  background. Seeds GrabCut cannot start from (one class missing) fall back to `filled`.
  OpenCV's RNG is seeded before each call, so a mask does not depend on the calls before it.
Both are context-free in creation. In refinement they are given the sample's true add/remove
context (an oracle, as the context baselines' `oracle` strategy): the previous mask seeds the
rest (probable foreground inside, probable background outside), the gesture's area is added or
removed. In the iterative protocol (NoG) GrabCut also keeps the hard labels of every earlier
gesture, as a seeded-segmentation tool does (`accumulate_seeds`, sample key "seeds"): without
them each correction would re-fit the whole photo and could undo the clicks before it.
The oracles check the scorer, not a method: `oracle` returns each sample's local ground truth
(IoU_local = RICE_local = 1 on any sample), `oracle_region` the whole region, the global GT
(RICE_global = 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import cv2
import numpy as np

from dig_jax import prompts
from dig_jax.evaluation.predictors import Predictor
from dig_jax.gestures.contours import fill_holes
from dig_jax.gestures.types import Context

PEERS = ("grabcut", "filled", "oracle", "oracle_region")
GRABCUT_ITERATIONS = 5
SEED_ADD, SEED_REMOVE = 1, 2  # hard labels of earlier gestures (`accumulate_seeds`); 0 = none


def filled_gesture(gesture_map: np.ndarray) -> np.ndarray:
    """bool[H, W]: the marked pixels with every enclosed hole filled."""
    return fill_holes(np.asarray(gesture_map) > 0)


def filled_mask(
    gesture_map: np.ndarray, prev_mask: np.ndarray | None, context: int = Context.ADD
) -> np.ndarray:
    """uint8[H, W]: the filled gesture (creation), added to / removed from `prev_mask`."""
    area = filled_gesture(gesture_map)
    if prev_mask is None:
        return area.astype(np.uint8)
    prev = np.asarray(prev_mask) > 0
    out = (prev | area) if int(context) == Context.ADD else (prev & ~area)
    return out.astype(np.uint8)


def accumulate_seeds(
    seeds: np.ndarray | None,
    gesture_map: np.ndarray,
    prev_mask: np.ndarray | None,
    context: int = Context.ADD,
) -> np.ndarray:
    """uint8[H, W]: `seeds` (earlier hard labels, `SEED_ADD` / `SEED_REMOVE`, 0 = none; None =
    none yet) with this gesture's added, the latest gesture winning. An open stroke (a click, a
    scribble) marks its pixels with its context; a creation outline (a lasso, a rectangle, no
    `prev_mask`) marks its outside as background, as GrabCut's rectangle does; a refinement
    outline marks nothing (its area is a soft hint for its own step only)."""
    gesture = np.asarray(gesture_map) > 0
    out = np.zeros(gesture.shape, np.uint8) if seeds is None else np.array(seeds, np.uint8)
    if out.shape != gesture.shape:
        raise ValueError(f"seeds: size {out.shape} differs from the gesture's {gesture.shape}")
    if prompts.encloses_area(gesture):
        if prev_mask is None:
            out[~filled_gesture(gesture)] = SEED_REMOVE
        return out
    out[gesture] = SEED_ADD if int(context) == Context.ADD else SEED_REMOVE
    return out


def grabcut_seeds(
    gesture_map: np.ndarray,
    prev_mask: np.ndarray | None,
    context: int = Context.ADD,
    seeds: np.ndarray | None = None,
) -> np.ndarray:
    """uint8[H, W] GrabCut label map (cv2.GC_BGD / GC_FGD / GC_PR_BGD / GC_PR_FGD). `seeds`:
    earlier gestures' hard labels (`accumulate_seeds`), kept under this gesture's."""
    gesture = np.asarray(gesture_map) > 0
    closed = prompts.encloses_area(gesture)
    area = filled_gesture(gesture) if closed else gesture
    add = int(context) == Context.ADD
    if prev_mask is None:
        if closed:
            return np.where(area, cv2.GC_PR_FGD, cv2.GC_BGD).astype(np.uint8)
        return np.where(area, cv2.GC_FGD, cv2.GC_PR_BGD).astype(np.uint8)
    labels = np.where(np.asarray(prev_mask) > 0, cv2.GC_PR_FGD, cv2.GC_PR_BGD).astype(np.uint8)
    if seeds is not None:
        labels[np.asarray(seeds) == SEED_ADD] = cv2.GC_FGD
        labels[np.asarray(seeds) == SEED_REMOVE] = cv2.GC_BGD
    if closed:
        labels[area] = cv2.GC_PR_FGD if add else cv2.GC_PR_BGD
    else:
        labels[area] = cv2.GC_FGD if add else cv2.GC_BGD
    return labels


def grabcut_mask(
    image: np.ndarray,
    gesture_map: np.ndarray,
    prev_mask: np.ndarray | None = None,
    context: int = Context.ADD,
    iterations: int = GRABCUT_ITERATIONS,
    seeds: np.ndarray | None = None,
    rng_seed: int = 0,
) -> np.ndarray:
    """uint8[H, W]: OpenCV GrabCut seeded by the gesture and, with `seeds`, by the hard labels
    of the gestures before it (see the module docstring). `rng_seed` seeds OpenCV's RNG for the
    colour models' k-means, so the mask does not depend on the OpenCV calls made before it."""
    labels = grabcut_seeds(gesture_map, prev_mask, context, seeds)
    foreground = np.isin(labels, (cv2.GC_FGD, cv2.GC_PR_FGD))
    if foreground.all() or not foreground.any():
        return filled_mask(gesture_map, prev_mask, context)
    bgd, fgd = np.zeros((1, 65), np.float64), np.zeros((1, 65), np.float64)
    bgr = np.ascontiguousarray(np.asarray(image, np.uint8)[..., ::-1])
    cv2.setRNGSeed(rng_seed)  # cv2.grabCut draws its k-means centres from the global RNG
    try:
        cv2.grabCut(bgr, labels, None, bgd, fgd, iterations, cv2.GC_INIT_WITH_MASK)
    except cv2.error:  # e.g. too few pixels of one class to fit its colour model
        return filled_mask(gesture_map, prev_mask, context)
    return np.isin(labels, (cv2.GC_FGD, cv2.GC_PR_FGD)).astype(np.uint8)


def oracle_mask(sample: dict[str, Any], truth: str = "local") -> np.ndarray:
    """uint8[H, W] {0,1}: the sample's local GT (`truth="local"`; older samples without one:
    the target's 1 pixels) or its whole region (`truth="region"`)."""
    if truth == "region":
        return (np.asarray(sample["region"]) == 1).astype(np.uint8)
    if "local" in sample:
        return (np.asarray(sample["local"]) > 0).astype(np.uint8)
    return (np.asarray(sample["target"]) == 1).astype(np.uint8)


def peer_predictor(name: str) -> Predictor:
    """Predictor of a peer: "grabcut", "filled", "oracle" or "oracle_region" (see the module
    docstring)."""
    if name not in PEERS:
        raise ValueError(f"peer must be one of {PEERS}, got {name!r}")

    def predict(samples: Sequence[dict[str, Any]]) -> list[np.ndarray]:
        out = []
        for s in samples:
            prev = s["prev_mask"] if bool(s["has_prev"]) else None
            if name.startswith("oracle"):
                out.append(oracle_mask(s, "region" if name == "oracle_region" else "local"))
            elif name == "filled":
                out.append(filled_mask(s["gesture"], prev, int(s["context"])))
            else:
                out.append(grabcut_mask(
                    s["image"], s["gesture"], prev, int(s["context"]), seeds=s.get("seeds")
                ))  # fmt: skip
        return out

    return predict
