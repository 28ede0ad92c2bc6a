"""Merged accumulator states give the same answer as one pass over all the data."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dig_jax.metrics import Averages, Mean, NoCTally, noc


@given(st.lists(st.floats(-1, 1), min_size=1, max_size=60), st.integers(1, 5))
def test_mean_merge_equals_one_pass(values, n_chunks):
    values = np.asarray(values)
    chunks = np.array_split(values, n_chunks)
    merged = Mean.empty()
    for chunk in chunks:
        merged = merged.merge(Mean.from_values(chunk))
    assert merged.compute() == pytest.approx(values.mean(), abs=1e-12)
    assert int(merged.count) == len(values)


def test_mean_mask_and_empty():
    state = Mean.from_values([1.0, 5.0, 3.0], mask=[True, False, True])
    assert state.compute() == 2.0
    assert np.isnan(Mean.empty().compute())
    with pytest.raises(ValueError, match="values contains NaN"):
        Mean.from_values([np.nan])


def test_averages_merge_by_key():
    a = Averages().add("rice/click", [0.5, 0.7]).add("rice/box", [0.1])
    b = Averages().add("rice/click", [0.9])
    merged = a.merge(b)
    one_pass = Averages().add("rice/click", [0.5, 0.7, 0.9]).add("rice/box", [0.1])
    assert merged.compute() == pytest.approx(one_pass.compute())
    assert merged.counts() == {"rice/box": 1, "rice/click": 3}


def test_noc_tally_merge_equals_one_pass():
    rng = np.random.default_rng(3)
    ious = np.sort(rng.uniform(0.5, 1.0, (11, 20)), axis=-1)
    whole = NoCTally.from_result(noc(ious)).compute()
    parts = [NoCTally.from_result(noc(chunk)) for chunk in np.array_split(ious, 3)]
    merged = parts[0].merge(parts[1]).merge(parts[2]).compute()
    assert merged == pytest.approx(whole)
    with pytest.raises(ValueError, match="thresholds differ"):
        parts[0].merge(NoCTally.from_result(noc(ious, thresholds=(0.5,)), thresholds=(0.5,)))
