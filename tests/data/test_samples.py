"""Sample dicts follow the contract; local/global GT relations; determinism; dataAug."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage

from dig_jax.data.priors import COARSE_OVER, find_corrections, synthesize_prior
from dig_jax.data.regions import VOID, extract_regions
from dig_jax.data.samples import (
    SAMPLE_KEYS,
    creation_sample,
    join_region,
    leak_prior,
    random_sample,
    refinement_sample,
)
from dig_jax.data.sources.procedural import procedural
from dig_jax.gestures.types import Context

DTYPES = {
    "image": np.uint8, "gesture": np.uint8, "distance": np.uint8, "prev_mask": np.uint8,
    "target": np.uint8, "region": np.uint8, "gesture_kind": np.int32, "context": np.int32,
    "has_prev": np.bool_, "instance_id": np.int32,
}  # fmt: skip


@pytest.fixture(scope="module")
def scenes():
    return [r.load() for r in procedural(11, 8, size=96)]


def check_contract(s, shape=(96, 96)):
    assert tuple(s) == SAMPLE_KEYS
    for key, dtype in DTYPES.items():
        assert np.asarray(s[key]).dtype == dtype, key
    assert s["image"].shape == (*shape, 3)
    for key in ("gesture", "distance", "prev_mask", "target", "region"):
        assert s[key].shape == shape, key
    assert isinstance(s["image_id"], str)
    assert set(np.unique(s["gesture"])) == {0, 1}
    assert set(np.unique(s["target"])) <= {0, 1, VOID}
    assert set(np.unique(s["region"])) <= {0, 1} and set(np.unique(s["prev_mask"])) <= {0, 1}
    edt = np.minimum(ndimage.distance_transform_edt(s["gesture"] == 0), 255)
    assert np.max(np.abs(s["distance"].astype(float) - edt)) <= 0.5 + 1e-6
    known = s["target"] != VOID  # local GT agrees with the global GT wherever it is not void
    assert np.array_equal(s["target"][known], s["region"][known])


def test_creation_samples_for_every_kind(scenes):
    loaded = scenes[0]
    region = extract_regions(loaded.instances)[0]
    for kind in range(5):
        s = creation_sample(loaded.image, region, 0, kind, np.random.default_rng(kind))
        check_contract(s)
        assert int(s["gesture_kind"]) == kind and int(s["context"]) == Context.ADD
        assert not s["has_prev"] and s["prev_mask"].sum() == 0
        assert np.array_equal(s["target"] == 1, region.parts[0] > 0)


def test_refinement_samples(scenes):
    done = 0
    for k, loaded in enumerate(scenes):
        for region in extract_regions(loaded.instances):
            prior = synthesize_prior(loaded.image, region.mask, np.random.default_rng(k))
            for corr in find_corrections(prior, region.mask)[:2]:
                s = refinement_sample(loaded.image, region, prior, corr, 2,
                                      np.random.default_rng(0))  # fmt: skip
                check_contract(s)
                assert s["has_prev"] and np.array_equal(s["prev_mask"], prior)
                assert int(s["context"]) == corr.context
                comp = corr.mask > 0
                assert np.all(s["target"][comp] == (corr.context == Context.ADD))
                done += 1
    assert done >= 3


def test_join_region_and_overlap_error(scenes):
    loaded = scenes[1]
    regions = extract_regions(loaded.instances)
    a = regions[0]
    s = creation_sample(loaded.image, a, 0, 0, np.random.default_rng(0))
    other = np.zeros((96, 96), np.uint8)
    other[:5, :5] = 1
    other &= 1 - a.mask
    joined = join_region(s, other)
    check_contract(joined)
    assert joined["has_prev"] and np.array_equal(joined["prev_mask"], other)
    assert np.all(joined["target"][other > 0] == 1)
    with pytest.raises(ValueError, match="overlaps"):
        join_region(s, a.mask)


def test_random_sample_is_deterministic_and_mixes_modes(scenes):
    prev = 0
    for k, loaded in enumerate(scenes):
        a = random_sample(loaded, np.random.default_rng(k), prior_prob=0.7, multi_region_prob=0.5)
        b = random_sample(loaded, np.random.default_rng(k), prior_prob=0.7, multi_region_prob=0.5)
        if a is None:
            continue
        check_contract(a)
        assert all(np.array_equal(a[key], b[key]) for key in SAMPLE_KEYS)
        prev += bool(a["has_prev"])
    assert prev >= 2


def test_multi_region_augmentation(scenes):
    joined = 0
    for k, loaded in enumerate(scenes):
        s = random_sample(loaded, np.random.default_rng(k), prior_prob=0.0, multi_region_prob=1.0)
        if s is None or not s["has_prev"]:
            continue  # no second disjoint region in this scene
        check_contract(s)
        prev = s["prev_mask"] > 0
        assert prev.any() and np.all(s["region"][prev] == 1)
        assert np.all(s["target"][prev] != 0)
        assert int(s["context"]) == Context.ADD
        joined += 1
    assert joined >= 2


def test_random_sample_without_regions_is_none(scenes):
    loaded = scenes[0]
    tiny = loaded.instances[:, :10, :10]
    from dataclasses import replace

    small = replace(
        loaded, image=loaded.image[:10, :10], instances=tiny, void=loaded.void[:10, :10]
    )
    assert random_sample(small, np.random.default_rng(0)) is None


def test_random_sample_skips_regions_that_are_mostly_void():
    from dig_jax.data.sources.record import LoadedRecord

    image = np.random.default_rng(0).integers(0, 256, (64, 64, 3)).astype(np.uint8)
    instances = np.zeros((1, 64, 64), np.uint8)
    instances[0, 10:30, 10:30] = 1  # 400 px ...
    void = np.zeros((64, 64), np.uint8)
    void[10:30, 10:20] = 1  # ... of which 200 px void: under the 300 px minimum
    loaded = LoadedRecord("toy", "half_void", image, instances, void, (1,))
    for seed in range(4):
        assert random_sample(loaded, np.random.default_rng(seed), prior_prob=1.0) is None
    void[:] = 0
    void[10:30, 10:12] = 1  # 360 non-void px: usable, every pixel of the void stays void
    s = random_sample(loaded, np.random.default_rng(0), prior_prob=1.0)
    check_contract(s, (64, 64))
    assert np.all(s["target"][void > 0] == VOID)
    assert regions_of(instances, void) == [1] and regions_of(instances, None) == [1]


def regions_of(instances, void):
    return [r.instance_id for r in extract_regions(instances, (1,), void=void)]


def test_leaky_priors_select_another_region_and_remove_it(scenes):
    leaky = 0
    for k, loaded in enumerate(scenes):
        s = random_sample(loaded, np.random.default_rng(k), prior_prob=1.0, leak_prob=1.0)
        if s is None or not s["has_prev"]:
            continue  # no prior or no second disjoint region in this scene
        check_contract(s)
        leak = (s["prev_mask"] > 0) & (s["region"] == 0)
        if int(s["context"]) == Context.REMOVE and leak.sum() > 0.3 * (s["region"] > 0).sum():
            if int(s["gesture_kind"]) == 0:  # a click lies on the leak, never on the object
                assert np.all(s["target"][s["gesture"] > 0] != 1)
            leaky += 1
    assert leaky >= 2
    same = [random_sample(scenes[0], np.random.default_rng(3), prior_prob=1.0) for _ in range(2)]
    assert all(np.array_equal(same[0][key], same[1][key]) for key in ("prev_mask", "target"))


def test_coarse_priors_correct_their_largest_error(scenes):
    coarse = 0
    for k, loaded in enumerate(scenes):
        s = random_sample(loaded, np.random.default_rng(k), prior_prob=1.0, coarse_prob=1.0)
        if s is None or not s["has_prev"]:
            continue
        check_contract(s)
        corrections = find_corrections(s["prev_mask"], s["region"])
        largest = max(corrections, key=lambda c: c.area)
        assert int(s["context"]) == largest.context
        if int(s["gesture_kind"]) == 0:  # the click lies on the largest error
            assert np.any((s["gesture"] > 0) & (largest.mask > 0))
        coarse += 1
    assert coarse >= 5
    # coarse_prob 0 draws nothing more from the generator: the same samples as before
    plain = random_sample(scenes[0], np.random.default_rng(3), prior_prob=1.0)
    again = random_sample(scenes[0], np.random.default_rng(3), prior_prob=1.0, coarse_prob=0.0)
    assert all(np.array_equal(plain[key], again[key]) for key in ("prev_mask", "target"))


def test_leak_kinds_limit_leaky_priors_to_those_gestures(scenes):
    leaked = others = 0
    for k, loaded in enumerate(scenes * 3):
        rng_seed = 200 + k
        s = random_sample(
            loaded, np.random.default_rng(rng_seed), prior_prob=1.0, leak_prob=1.0, leak_kinds=(0,)
        )
        if s is None or not s["has_prev"]:
            continue
        plain = random_sample(loaded, np.random.default_rng(rng_seed), prior_prob=1.0)
        same = all(np.array_equal(s[key], plain[key]) for key in ("prev_mask", "target"))
        if int(s["gesture_kind"]) != 0:  # no leak draw: the sample leak_prob 0 gives
            assert same
            others += 1
        elif not same:  # a click on a leaky prior: it removes
            assert int(s["context"]) == 0
            leaked += 1
    assert leaked >= 1 and others >= 3


def test_coarse_kinds_limit_coarse_priors_to_those_gestures(scenes):
    clicks = others = 0
    for k, loaded in enumerate(scenes * 3):
        rng_seed = 100 + k
        s = random_sample(
            loaded, np.random.default_rng(rng_seed), prior_prob=1.0, coarse_prob=1.0,
            coarse_kinds=(0,),
        )  # fmt: skip
        if s is None:
            continue
        if int(s["gesture_kind"]) != 0:  # no coarse draw: the sample coarse_prob 0 gives
            plain = random_sample(loaded, np.random.default_rng(rng_seed), prior_prob=1.0)
            assert all(np.array_equal(s[key], plain[key]) for key in ("prev_mask", "target"))
            others += 1
        elif s["has_prev"]:  # a click: a coarse prior, the click on its largest error
            largest = max(find_corrections(s["prev_mask"], s["region"]), key=lambda c: c.area)
            assert int(s["context"]) == largest.context
            assert np.any((s["gesture"] > 0) & (largest.mask > 0))
            clicks += 1
    assert clicks >= 1 and others >= 3


def test_leak_prior_is_the_union_and_checks_shapes():
    prev = np.array([[1, 0, 0]], np.uint8)
    np.testing.assert_array_equal(leak_prior(prev, np.array([[0, 0, 1]], bool)), [[1, 0, 1]])
    with pytest.raises(ValueError, match="other: shape"):
        leak_prior(prev, np.zeros((2, 3), bool))


def test_coarse_over_reaches_the_priors_of_samples(scenes):
    """`coarse_over` is passed to `coarse_prior`: the default range gives the bytes of a call
    without it, a wider one larger previous masks where the prior over-segments."""
    grown = 0
    for k, loaded in enumerate(scenes):
        kwargs = dict(prior_prob=1.0, coarse_prob=1.0)
        plain = random_sample(loaded, np.random.default_rng(k), **kwargs)
        same = random_sample(loaded, np.random.default_rng(k), **kwargs, coarse_over=COARSE_OVER)
        wide = random_sample(loaded, np.random.default_rng(k), **kwargs, coarse_over=(3.0, 4.0))
        if plain is None or not plain["has_prev"]:
            continue
        assert all(np.array_equal(plain[key], same[key]) for key in ("prev_mask", "target"))
        if wide is not None and wide["has_prev"] and int(wide["context"]) == Context.REMOVE:
            assert wide["prev_mask"].sum() > 1.5 * (wide["region"] > 0).sum()  # 3-4x asked
            grown += 1
    assert grown >= 1
