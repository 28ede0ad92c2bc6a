"""Instances/s of the DIG evaluators at 512², batched vs one instance at a time, in one run.

    .venv/bin/python benchmarks/evaluators.py [--quick] [--photos 4]

Creation: the DIG-tables evaluator (all five gesture kinds per instance, scored at the photo's
size) with the predictor given `batch` samples per call vs one. Iterative: 20 click gestures
per instance, every unfinished instance in one predictor call per round (batched) vs each
instance's trajectory on its own. Model: the shipped gesture-agnostic checkpoint (a tiny random
one without it); photos: procedural 512² scenes. Compile time is excluded (a warm-up call
per shape first); the ratio is batched / one-at-a-time measured in the same run.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from dig_jax.evaluation import SkipLog, evaluation_samples, iterative_ious, segmenter_predictor
from dig_jax.evaluation.dig_tables import score_samples
from dig_jax.evaluation.predictors import ModelView
from dig_jax.evaluation.protocol import load_dataset, nog_items
from dig_jax.gestures.types import GestureKind
from dig_jax.paths import shipped_checkpoint


def segmenter():
    """(name, object for `segmenter_predictor`): the shipped checkpoint or a tiny random model."""
    path = shipped_checkpoint("gesture")
    if path is not None:
        from dig_jax import load_segmenter

        return path.stem, load_segmenter(path)
    from dig_jax.models.interactive import build_segmenter
    from dig_jax.train.config import base_config

    config = ml_collections.ConfigDict(base_config("tiny").to_dict())
    config.image_size = 64
    model = build_segmenter(config.model)
    variables = model.init(jax.random.key(0), jnp.zeros((1, 64, 64, 6)))
    apply = jax.jit(lambda x: model.apply(variables, x)["mask"])
    return "tiny random model", ModelView(config, apply)


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 photos, 3 gestures")
    parser.add_argument("--photos", type=int, default=4)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    n = 2 if args.quick else args.photos
    steps = 3 if args.quick else 20
    name, seg = segmenter()
    records = load_dataset(f"procedural:{n}:11", size=512)
    samples = list(evaluation_samples(records, modes=("creation",), seed=0))
    items = nog_items(records, None, SkipLog())  # every region of the n photos
    batched = segmenter_predictor(seg, batch_size=args.batch)
    single = segmenter_predictor(seg, batch_size=1)
    print(f"model: {name}; {len(items)} instances in {n} procedural scenes of 512²")
    # warm-up: compile every shape used below
    batched(samples[:1])
    single(samples[:1])

    rows = []
    t_batched = timed(lambda: score_samples(batched, samples, batch_size=args.batch,
                                            progress=False))  # fmt: skip
    t_single = timed(lambda: score_samples(single, samples, batch_size=1, progress=False))
    rows.append(("creation (5 kinds)", t_single, t_batched))
    click = int(GestureKind.CLICK)
    t_batched = timed(lambda: iterative_ious(batched, items, click, max_interactions=steps))
    t_single = timed(
        lambda: [iterative_ious(single, [item], click, max_interactions=steps) for item in items]
    )
    rows.append((f"iterative ({steps} clicks)", t_single, t_batched))
    print(f"{'evaluator':>22} {'one at a time':>15} {'batched':>10} {'ratio':>7}")
    for label, t1, tb in rows:
        r1, rb = len(items) / t1, len(items) / tb
        print(f"{label:>22} {r1:11.3f} i/s {rb:6.3f} i/s {rb / r1:6.2f}x")
    np.testing.assert_equal(len(samples), 5 * len(items))


if __name__ == "__main__":
    main()
