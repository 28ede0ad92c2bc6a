"""DigTables draws its samples as it scores them, a batch at a time."""

from __future__ import annotations

import dig_jax.evaluation.evaluators as evaluators
from dig_jax.evaluation import evaluation_samples
from dig_jax.evaluation.dig_tables import score_samples
from dig_jax.evaluation.evaluators import DigTables
from dig_jax.evaluation.peers import peer_predictor
from dig_jax.evaluation.protocol import load_dataset

SPEC = "procedural:3:5"


def test_dig_tables_stream_their_samples_and_score_as_the_whole_list(monkeypatch):
    drawn: list[int] = [0]
    drawn_at_calls: list[int] = []

    def counted(*args, **kwargs):
        for sample in evaluation_samples(*args, **kwargs):
            drawn[0] += 1
            yield sample

    filled = peer_predictor("filled")

    def predict(chunk):
        drawn_at_calls.append(drawn[0])
        return filled(chunk)

    monkeypatch.setattr(evaluators, "evaluation_samples", counted)
    kinds, modes = ("click", "rectangle"), ("creation", "refinement")
    run = DigTables(predict, [SPEC], kinds=kinds, modes=modes, batch_size=2, progress=False)
    states = run.run()
    assert drawn[0] > 4 and drawn_at_calls[0] <= 2  # not listed before the first prediction
    whole = list(evaluation_samples(load_dataset(SPEC), kinds=(0, 4), modes=modes))
    assert len(whole) == drawn[0]
    expected = score_samples(filled, whole, batch_size=2, progress=False).compute()
    means = {k: v for k, v in DigTables.compute(states).items() if "/n/" not in k}
    assert means == {f"{SPEC}/{k}": v for k, v in expected.items()}
