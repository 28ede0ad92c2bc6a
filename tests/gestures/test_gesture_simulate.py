"""Gesture simulators: statistics on real masks, determinism, bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from skimage import io, measure

from dig_jax.gestures import (
    Context,
    Gesture,
    GestureKind,
    rasterize,
    simulate_creation,
    simulate_refinement,
    to_box,
)
from dig_jax.gestures.simulate import (
    RECT_SPREAD,
    interpolate_curve,
    lasso_control_points,
    loose_dilation_radius,
    rectangle_box,
    region_outline,
    scribble_control_points,
)
from dig_jax.metrics import tight_box


@pytest.fixture(scope="module")
def grabcut_masks(shared_data: Path) -> list[np.ndarray]:
    """Object masks {0,1} of the GrabCut photos (128 = unsure counts as background)."""
    paths = sorted((shared_data / "grabcut" / "masks").glob("*.bmp"))
    if not paths:
        pytest.skip("no GrabCut masks in the shared data")
    masks = []
    for p in paths:
        m = io.imread(p)
        masks.append(((m[..., 0] if m.ndim == 3 else m) == 255).astype(np.uint8))
    return masks


def _inside_extent(points: np.ndarray, shape) -> bool:
    h, w = shape
    return bool(
        np.all(points[:, 0] >= -0.5)
        and np.all(points[:, 0] <= w - 0.5)
        and np.all(points[:, 1] >= -0.5)
        and np.all(points[:, 1] <= h - 0.5)
    )


def _fill(points: np.ndarray, shape) -> np.ndarray:
    """Pixels whose centre lies inside the closed polygon (even-odd rule, scanline crossings;
    much faster than skimage's polygon2mask for curves with hundreds of vertices)."""
    p = points.astype(np.float64)
    q = np.roll(p, -1, axis=0)
    ys = np.arange(shape[0], dtype=np.float64)[:, None]
    crosses = (p[:, 1] <= ys) != (q[:, 1] <= ys)  # [H, N], half-open rule
    dy = np.where(q[:, 1] == p[:, 1], 1.0, q[:, 1] - p[:, 1])
    xc = p[:, 0] + (ys - p[:, 1]) / dy * (q[:, 0] - p[:, 0])
    cols = np.arange(shape[1])
    out = np.zeros(shape, bool)
    for row in np.flatnonzero(crosses.any(axis=1)):
        xs = np.sort(xc[row][crosses[row]])
        out[row] = np.searchsorted(xs, cols, side="left") % 2 == 1
    return out


def _iou(a, b) -> float:
    a, b = a.astype(bool), b.astype(bool)
    return float((a & b).sum() / (a | b).sum())


def test_clicks_fall_inside_the_target(grabcut_masks):
    rng = np.random.default_rng(0)
    for mask in grabcut_masks:
        for _ in range(10):
            g = simulate_creation(GestureKind.CLICK, mask, rng)
            x, y = g.points[0]
            assert g.points.shape == (1, 2) and not g.closed
            assert x == int(x) and y == int(y) and mask[int(y), int(x)] == 1


def test_click_positions_are_uniform_over_the_target():
    mask = np.zeros((20, 20), np.uint8)
    mask[5:9, 5:10] = 1  # 20 pixels
    rng = np.random.default_rng(1)
    counts = np.zeros_like(mask, dtype=int)
    for _ in range(2000):
        x, y = simulate_creation(GestureKind.CLICK, mask, rng).points[0].astype(int)
        counts[y, x] += 1
    assert counts[mask == 0].sum() == 0
    assert counts[mask == 1].min() > 60 and counts[mask == 1].max() < 145  # mean 100


def test_scribbles_have_four_to_six_control_points_on_the_curve(grabcut_masks):
    rng = np.random.default_rng(2)
    sizes = set()
    for mask in grabcut_masks[:25]:
        control = scribble_control_points(mask.astype(bool), rng)
        sizes.add(len(control))
        assert 4 <= len(control) <= 6
        # Coordinates come from target pixels (sorting may re-pair them outside the target).
        assert np.all(mask[:, control[:, 0].astype(int)].any(axis=0))
        assert np.all(mask[control[:, 1].astype(int), :].any(axis=1))
        curve = interpolate_curve(control, closed=False)
        for p in control:  # the spline interpolates its control points
            assert np.min(np.linalg.norm(curve - p, axis=1)) < 1e-6
        g = simulate_creation(GestureKind.SCRIBBLE, mask, rng)
        assert not g.closed and len(g.points) >= 2 and _inside_extent(g.points, mask.shape)
        assert np.max(np.linalg.norm(np.diff(g.points, axis=0), axis=1)) < 10
    assert sizes == {4, 5, 6}


def test_scribble_sorting_probabilities():
    mask = np.ones((400, 400), np.uint8)
    rng = np.random.default_rng(12)
    draws = [scribble_control_points(mask.astype(bool), rng) for _ in range(800)]
    x_sorted = np.mean([np.all(np.diff(c[:, 0]) >= 0) for c in draws])
    y_sorted = np.mean([np.all(np.diff(c[:, 1]) >= 0) for c in draws])
    chance = np.mean([1 / 24, 1 / 120, 1 / 720])  # an unsorted draw happens to be sorted
    assert abs(x_sorted - (0.3 + 0.7 * chance)) < 0.06
    assert abs(y_sorted - (0.6 + 0.4 * chance)) < 0.06


def test_tight_lassos_trace_convex_targets(grabcut_masks):
    # N can be as low as 3 points (ceil(|L| / 512)), so single draws may cut corners: the
    # property is statistical. Mean IoU per target >= 0.9, and >= 90% of all draws >= 0.8.
    convex = [m for m in grabcut_masks if measure.regionprops(m)[0].solidity >= 0.9]
    assert len(convex) >= 5
    rng = np.random.default_rng(3)
    all_ious = []
    for mask in convex:
        ious = []
        for _ in range(6):
            g = simulate_creation(GestureKind.TIGHT_LASSO, mask, rng)
            assert g.closed and _inside_extent(g.points, mask.shape)
            ious.append(_iou(_fill(g.points, mask.shape), mask))
        assert np.mean(ious) >= 0.9
        all_ious += ious
    assert np.mean(np.array(all_ious) >= 0.8) >= 0.9


def test_loose_lassos_enclose_more_than_tight(grabcut_masks):
    rng = np.random.default_rng(4)
    loose_cover, tight_cover = [], []
    for mask in grabcut_masks[:20]:
        loose = _fill(simulate_creation(GestureKind.LOOSE_LASSO, mask, rng).points, mask.shape)
        tight = _fill(simulate_creation(GestureKind.TIGHT_LASSO, mask, rng).points, mask.shape)
        assert loose.sum() > tight.sum()
        loose_cover.append((loose & mask.astype(bool)).sum() / mask.sum())
        tight_cover.append((tight & mask.astype(bool)).sum() / mask.sum())
    assert np.mean(loose_cover) >= 0.95 and np.mean(loose_cover) > np.mean(tight_cover)


def test_lasso_point_count_range():
    mask = np.zeros((200, 200), np.uint8)
    mask[50:150, 50:150] = 1  # perimeter ~ 400 px: N in {3, ..., 50}
    rng = np.random.default_rng(5)
    from dig_jax.gestures.simulate import lasso_control_points

    counts = {len(lasso_control_points(mask.astype(bool), 0.0, rng)) for _ in range(200)}
    assert min(counts) == 3 and max(counts) <= 50 and max(counts) >= 40


def test_rectangle_offsets_have_the_stated_spread(grabcut_masks):
    mask = np.pad(grabcut_masks[0][::4, ::4], 150)  # room on every side: no clipping
    box = tight_box(mask)
    extent = np.array([box[2] - box[0], box[3] - box[1]] * 2)
    rng = np.random.default_rng(6)
    offsets = np.array([(rectangle_box(mask, rng) - box) / extent for _ in range(500)])
    v2 = (RECT_SPREAD[1] ** 3 - RECT_SPREAD[0] ** 3) / (3 * (RECT_SPREAD[1] - RECT_SPREAD[0]))
    assert abs(offsets.std() - np.sqrt(v2)) < 0.01  # v * g, v ~ U(.10, .15), g ~ N(0, 1)
    assert np.all(np.abs(offsets.mean(axis=0)) < 0.02)
    assert abs(np.corrcoef(offsets[:, 0], offsets[:, 2])[0, 1]) < 0.15  # sides move independently
    g = simulate_creation(GestureKind.RECTANGLE, mask, rng)
    assert g.closed and len(g.points) == 4
    x1, y1, x2, y2 = to_box(g)
    assert x2 - x1 >= 1 and y2 - y1 >= 1


def test_rectangle_is_clipped_and_non_degenerate():
    mask = np.ones((30, 40), np.uint8)  # the whole image
    rng = np.random.default_rng(7)
    for _ in range(50):
        g = simulate_creation(GestureKind.RECTANGLE, mask, rng)
        x1, y1, x2, y2 = to_box(g)
        assert 0 <= x1 < x2 <= 40 and 0 <= y1 < y2 <= 30 and x2 - x1 >= 1 and y2 - y1 >= 1


@pytest.mark.parametrize("kind", list(GestureKind))
def test_same_seed_same_bytes(kind):
    mask = np.zeros((64, 64), np.uint8)
    mask[10:40, 20:50] = 1
    mask[30:50, 5:25] = 1
    a = simulate_creation(kind, mask, np.random.default_rng(11))
    b = simulate_creation(kind, mask, np.random.default_rng(11))
    c = simulate_refinement(kind, mask, Context.ADD, np.random.default_rng(11))
    assert a.points.tobytes() == b.points.tobytes() == c.points.tobytes()
    assert rasterize(a, mask.shape).tobytes() == rasterize(b, mask.shape).tobytes()
    # Every kind is random (even tight lassos: point count and phase), so other seeds differ.
    for seed in (12, 13):
        other = simulate_creation(kind, mask, np.random.default_rng(seed))
        assert other.points.tobytes() != a.points.tobytes()


@pytest.mark.parametrize("kind", list(GestureKind))
def test_simulated_gestures_pass_the_record_checks(kind):
    """The simulators build their records without `Gesture`'s checks (`Gesture._trusted`):
    what they hand over is what the checked constructor would keep — float32[N, 2], finite,
    read-only, owned by the record, the kind and a bool `closed`."""
    mask = np.zeros((40, 50), np.uint8)
    mask[5:30, 10:45] = 1
    for seed in range(5):
        g = simulate_creation(kind, mask, np.random.default_rng(seed))
        assert g == Gesture(g.kind, g.points, g.closed)
        assert g.points.dtype == np.float32 and g.points.ndim == 2 and g.points.shape[1] == 2
        assert np.all(np.isfinite(g.points)) and not g.points.flags.writeable
        assert g.points.base is None or not np.shares_memory(g.points, mask)
        assert type(g.kind) is GestureKind and g.kind == kind and type(g.closed) is bool


@pytest.mark.parametrize("kind", list(GestureKind))
def test_one_pixel_and_border_targets_give_valid_gestures(kind):
    rng = np.random.default_rng(8)
    one = np.zeros((32, 32), np.uint8)
    one[16, 16] = 1
    corner = np.zeros((32, 32), np.uint8)
    corner[:6, :4] = 1  # touches two image borders
    for mask in (one, corner):
        g = simulate_creation(kind, mask, rng)
        assert np.all(np.isfinite(g.points)) and _inside_extent(g.points, mask.shape)
        marks = rasterize(g, mask.shape)
        assert marks.any()
        if kind != GestureKind.LOOSE_LASSO:
            assert (marks & mask).any() or kind == GestureKind.RECTANGLE


def test_refinement_aims_at_the_error_component():
    error = np.zeros((48, 48), np.uint8)
    error[30:40, 5:15] = 1
    rng = np.random.default_rng(9)
    for context in Context:
        g = simulate_refinement(GestureKind.CLICK, error, context, rng)
        x, y = g.points[0].astype(int)
        assert error[y, x] == 1


def test_bad_input_raises_clear_errors():
    rng = np.random.default_rng(10)
    empty = np.zeros((16, 16), np.uint8)
    with pytest.raises(ValueError, match="target is empty"):
        simulate_creation(GestureKind.CLICK, empty, rng)
    with pytest.raises(ValueError, match="error is empty"):
        simulate_refinement(GestureKind.SCRIBBLE, empty, Context.ADD, rng)
    ok = np.ones((16, 16), np.uint8)
    with pytest.raises(ValueError, match="target must hold only 0 and 1"):
        simulate_creation(GestureKind.CLICK, ok * 255, rng)
    with pytest.raises(ValueError, match="2-D"):
        simulate_creation(GestureKind.CLICK, ok[None], rng)
    for bad in (ok * 0.5, np.where(ok > 0, np.nan, 0.0), ok.astype(np.float32)):
        with pytest.raises(ValueError, match="target must be a bool or integer mask, got dtype"):
            simulate_creation(GestureKind.CLICK, bad, rng)
    with pytest.raises(ValueError, match="error must be a bool or integer mask"):
        simulate_refinement(GestureKind.CLICK, ok * 1.0, Context.ADD, rng)
    assert simulate_creation(GestureKind.CLICK, ok.astype(np.int64), rng).points.shape == (1, 2)
    with pytest.raises(ValueError, match="kind"):
        simulate_creation(7, ok, rng)
    with pytest.raises(ValueError, match="context"):
        simulate_refinement(GestureKind.CLICK, ok, 3, rng)


def test_loose_dilation_radius_documented_range():
    assert loose_dilation_radius(1) == 6 and loose_dilation_radius(10_000) == 10
    assert loose_dilation_radius(10**7) == 30


def test_outline_of_an_empty_region_is_a_named_error():
    with pytest.raises(ValueError, match="region is empty"):
        region_outline(np.zeros((6, 7), bool))
    with pytest.raises(ValueError, match="region is empty"):
        lasso_control_points(np.zeros((6, 7), np.uint8), 4.0, np.random.default_rng(0))


def test_lasso_encloses_both_squares_touching_at_a_corner():
    # One 8-connected region (a single part): two 12 x 12 squares meeting at one corner.
    mask = np.zeros((64, 64), np.uint8)
    mask[10:22, 10:22] = 1
    mask[22:34, 22:34] = 1
    outline = region_outline(mask.astype(bool))  # known answer: its inside is the mask
    np.testing.assert_array_equal(_fill(outline, mask.shape), mask.astype(bool))
    rng = np.random.default_rng(3)
    for _ in range(5):
        inside = _fill(simulate_creation(GestureKind.LOOSE_LASSO, mask, rng).points, mask.shape)
        assert inside[10:22, 10:22].mean() >= 0.95 and inside[22:34, 22:34].mean() >= 0.95


@given(st.integers(0, 2**31 - 1), st.integers(1, 200), st.integers(1, 200), st.floats(0.0, 1.0))
def test_nth_marked_matches_nonzero(seed, h, w, density):
    """The word scan finds the k-th marked pixel exactly as `np.nonzero` lists it (masks up to
    200x200, widths on and off word boundaries, empty ones included at low density), for
    queries in any order and repeated."""
    from dig_jax.gestures.scan import count_marked, nth_marked

    rng = np.random.default_rng(seed)
    mask = rng.random((h, w)) < density
    rows, cols = np.nonzero(mask)
    assert count_marked(mask) == len(rows)
    if len(rows):
        got_rows, got_cols = nth_marked(mask, np.arange(len(rows)))
        np.testing.assert_array_equal(got_rows, rows)
        np.testing.assert_array_equal(got_cols, cols)
        queries = rng.integers(0, len(rows), 7)  # unsorted, maybe repeated
        got_rows, got_cols = nth_marked(mask, queries)
        np.testing.assert_array_equal(got_rows, rows[queries])
        np.testing.assert_array_equal(got_cols, cols[queries])


@given(st.integers(0, 2**31 - 1), st.integers(1, 60), st.integers(1, 60), st.integers(6, 30))
def test_loose_dilation_matches_scipy_edt(seed, h, w, radius):
    """The loose lasso's dilated region (`edt.within`, which `contours.crop_outline` runs with
    `edt.disc_widths`): scipy's exact decision."""
    from scipy import ndimage

    from dig_jax.gestures.edt import within as _within

    mask = np.random.default_rng(seed).random((h, w)) < 0.02
    mask[h // 2, w // 2] = True
    expected = ndimage.distance_transform_edt(~mask) <= radius
    np.testing.assert_array_equal(_within(mask, radius), expected)


@given(st.integers(0, 2**31 - 1), st.integers(1, 60), st.integers(1, 60), st.floats(0.0, 1.0))
def test_fill_holes_matches_scipy(seed, h, w, density):
    """The lasso outline's hole filling (OpenCV labelling) equals scipy's binary_fill_holes."""
    from scipy import ndimage

    from dig_jax.gestures.contours import fill_holes

    mask = np.random.default_rng(seed).random((h, w)) < density
    np.testing.assert_array_equal(fill_holes(mask), ndimage.binary_fill_holes(mask))


def test_fill_holes_known_answer():
    from dig_jax.gestures.contours import fill_holes

    ring = np.zeros((7, 7), bool)
    ring[1:6, 1:6] = True
    ring[2:5, 2:5] = False  # a 3x3 hole: filled
    filled = fill_holes(ring)
    assert filled[1:6, 1:6].all() and filled.sum() == 25
    opened = ring.copy()
    opened[3, 1] = False  # the wall opens to the outside: the hole is not a hole any more
    np.testing.assert_array_equal(fill_holes(opened), opened)


@given(st.integers(0, 2**31 - 1), st.integers(1, 40), st.integers(1, 40))
def test_fast_tight_box_is_metrics_tight_box(seed, h, w):
    from dig_jax.gestures.scan import tight_box as fast_tight_box
    from dig_jax.metrics import tight_box

    rng = np.random.default_rng(seed)
    wide = rng.random((h, w + 1)) < rng.uniform(0.001, 0.3)
    wide[rng.integers(h), rng.integers(1, w + 1)] = True
    # the region as a strided view (a crop), on and off word boundaries, and as a copy
    for region in (wide[:, 1:], np.ascontiguousarray(wide[:, 1:])):
        np.testing.assert_array_equal(fast_tight_box(region), tight_box(region.astype(np.uint8)))


def test_scans_fall_back_to_numpy_off_little_endian(monkeypatch):
    """The word scans read bytes in little-endian order; elsewhere numpy answers the same."""
    from dig_jax.gestures import scan
    from dig_jax.metrics import tight_box

    rng = np.random.default_rng(5)
    mask = rng.random((37, 48)) < 0.2  # a width on word boundaries: the word path otherwise
    rows, cols = np.nonzero(mask)
    queries = rng.integers(0, len(rows), 6)
    monkeypatch.setattr(scan, "_BIG_ENDIAN", True)
    got_rows, got_cols = scan.nth_marked(mask, queries)
    np.testing.assert_array_equal(got_rows, rows[queries])
    np.testing.assert_array_equal(got_cols, cols[queries])
    np.testing.assert_array_equal(scan.tight_box(mask), tight_box(mask.astype(np.uint8)))
