"""Regions, parts and creation targets (DESIGN.md: parts, void for other components, 300 px)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dig_jax.data.regions import (
    MIN_AREA,
    VOID,
    components,
    creation_target,
    disjoint_regions,
    extract_regions,
    record_regions,
)


def _two_part_instance() -> np.ndarray:
    """An object split by an occluder into a 20x20 (400 px) and a 20x16 (320 px) component,
    plus a 10x10 (100 px) fragment."""
    m = np.zeros((64, 64), np.uint8)
    m[2:22, 2:22] = 1
    m[30:50, 40:56] = 1
    m[54:64, 0:10] = 1
    return m


def test_parts_are_components_of_at_least_300px():
    (region,) = extract_regions(_two_part_instance()[None])
    assert region.area == 400 + 320 + 100
    assert region.num_parts == 2
    assert [int(p.sum()) for p in region.parts] == [400, 320]
    assert np.all(region.parts.sum(0) <= region.mask)


def test_small_regions_and_regions_without_big_part_are_dropped():
    small = np.zeros((64, 64), np.uint8)
    small[:10, :29] = 1  # 290 px
    fragmented = np.zeros((64, 64), np.uint8)
    fragmented[0:15, 30:45] = 1  # 225 px
    fragmented[40:55, 30:45] = 1  # 225 px: 450 px in all, no part >= 300
    big = np.zeros((64, 64), np.uint8)
    big[20:40, 0:20] = 1
    regions = extract_regions(np.stack([small, fragmented, big]), (7, 8, 9))
    assert [r.instance_id for r in regions] == [9]


def test_components_use_8_connectivity():
    m = np.zeros((8, 8), np.uint8)
    m[0, 0] = m[1, 1] = m[5, 5] = 1
    assert len(components(m)) == 2
    assert len(components(m, min_area=2)) == 1


def test_creation_target_voids_other_components_and_dataset_void():
    (region,) = extract_regions(_two_part_instance()[None])
    void = np.zeros((64, 64), np.uint8)
    void[60:64, 60:64] = 1
    target = creation_target(region, 1, void)
    assert np.array_equal(target == 1, region.parts[1] > 0)
    other = (region.mask > 0) & (region.parts[1] == 0)
    assert np.all(target[other] == VOID)
    assert np.all(target[void > 0] == VOID)
    assert set(np.unique(target)) <= {0, 1, VOID}
    with pytest.raises(ValueError, match="part"):
        creation_target(region, 2)


def _three_boxes() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """a overlaps b, b overlaps c, a and c are disjoint (32x32 masks)."""
    a = np.zeros((32, 32), np.uint8)
    a[:20, :20] = 1
    b = np.zeros((32, 32), np.uint8)
    b[10:30, 10:30] = 1
    c = np.zeros((32, 32), np.uint8)
    c[22:, :20] = 1
    return a, b, c


def test_disjoint_regions():
    a, b, c = _three_boxes()
    regions = extract_regions(np.stack([a, b, c]), min_area=100)
    assert [r.instance_id for r in disjoint_regions(regions, a)] == [3]


def test_bad_input():
    with pytest.raises(ValueError, match="instances"):
        extract_regions(np.zeros((4, 4), np.uint8))
    with pytest.raises(ValueError, match="instance_ids"):
        extract_regions(np.zeros((2, 4, 4), np.uint8), (1,))


@given(
    boxes=st.lists(
        st.tuples(*[st.integers(0, 47)] * 2, *[st.integers(8, 40)] * 2), min_size=1, max_size=4
    ),
    occluder=st.integers(0, 47),
)
def test_targets_agree_with_the_region_wherever_not_void(boxes, occluder):
    inst = np.zeros((len(boxes), 48, 48), np.uint8)
    for k, (r, c, h, w) in enumerate(boxes):
        inst[k, r : r + h, c : c + w] = 1
    inst[:, :, occluder : occluder + 3] = 0  # a vertical bar occludes everything
    for region in extract_regions(inst):
        assert region.area >= MIN_AREA
        for p in range(region.num_parts):
            target = creation_target(region, p)
            known = target != VOID
            assert np.array_equal(target[known], region.mask[known])
            assert np.array_equal(target == 1, region.parts[p] > 0)


def test_void_pixels_do_not_count_towards_the_minimum_area():
    instances = np.zeros((2, 40, 40), np.uint8)
    instances[0, 0:20, 0:20] = 1  # 400 px, 150 of them void below
    instances[1, 20:40, 20:40] = 1  # 400 px, none void
    void = np.zeros((40, 40), np.uint8)
    void[0:10, 0:15] = 1
    assert [r.instance_id for r in extract_regions(instances)] == [1, 2]
    assert [r.instance_id for r in extract_regions(instances, void=void)] == [2]
    with pytest.raises(ValueError, match="void: shape"):
        extract_regions(instances, void=void[:5])


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**31 - 1),
    st.integers(1, 40),
    st.integers(1, 40),
    st.floats(0.05, 0.7),
    st.integers(0, 12),
)
def test_components_match_scikit_image_labels_in_order(seed, h, w, density, min_area):
    """Row runs joined by union-find label the components (speed); the parts and their order
    are scikit-image's."""
    from skimage.measure import label

    mask = np.random.default_rng(seed).random((h, w)) < density
    labels, n = label(mask, connectivity=2, return_num=True)
    areas = np.bincount(labels.ravel(), minlength=n + 1)
    expected = [labels == i for i in range(1, n + 1) if areas[i] >= min_area]
    got = components(mask, min_area)
    assert got.dtype == np.uint8 and len(got) == len(expected)
    for part, want in zip(got, expected, strict=True):
        np.testing.assert_array_equal(part, want)


def test_record_regions_give_each_region_its_others_and_disjoint_ones_in_order():
    a, b, c = _three_boxes()
    tiny = np.zeros((32, 32), np.uint8)
    tiny[0, 31] = 1  # under min_area: dropped, neither a region nor an other
    entries = record_regions(np.stack([a, tiny, b, c]), (5, 6, 7, 8), min_area=100)
    assert [(e.index, e.region.instance_id) for e in entries] == [(0, 5), (1, 7), (2, 8)]
    assert [[o.instance_id for o in e.others] for e in entries] == [[7, 8], [5, 8], [5, 7]]
    assert [[o.instance_id for o in e.disjoint] for e in entries] == [[8], [], [5]]
    void = np.zeros((32, 32), np.uint8)
    void[:, :20] = 1  # a and c are all void: only non-void pixels count when void is given
    assert [e.region.instance_id for e in record_regions(np.stack([a, b, c]), void=void,
                                                        min_area=100)] == [2]  # fmt: skip
