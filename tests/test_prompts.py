"""The zoom-in shared by training, predict, evaluation and the demo (`dig_jax.prompts`)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dig_jax import prompts
from dig_jax.data.regions import VOID
from dig_jax.gestures import Gesture, GestureKind, box_outline_points, rasterize
from dig_jax.metrics import iou
from dig_jax.prompts import zoom

SIZE = 64


def disc(shape, cx, cy, r) -> np.ndarray:
    yy, xx = np.mgrid[: shape[0], : shape[1]]
    return ((xx - cx) ** 2 + (yy - cy) ** 2 <= r**2).astype(np.uint8)


def outline(box, shape) -> np.ndarray:
    gesture = Gesture(GestureKind.RECTANGLE, box_outline_points(np.asarray(box, float)), True)
    return rasterize(gesture, shape)


def test_a_click_sees_the_whole_image_letterboxed():
    click = rasterize(Gesture(GestureKind.CLICK, [[30.0, 40.0]], False), (120, 200))
    box = prompts.zoom_box(click, None, SIZE)
    assert box == prompts.whole_image_box((120, 200)) == prompts.ZoomBox(0.0, -40.0, 200.0)
    assert prompts.zoom_box(np.zeros((120, 200)), None, SIZE) == box  # no gesture: the same


def test_closed_outlines_expand_1_4_and_open_strokes_2_5():
    shape = (400, 600)
    rect = outline([200, 100, 300, 180], shape)  # 100 x 80 box, outline 5 px wide
    box = prompts.zoom_box(rect, None, SIZE)
    cols = np.flatnonzero(rect.any(0))
    extent = cols[-1] + 1 - cols[0]  # the marked pixels' width (wider than tall)
    assert extent == 110  # the 5 px brush reaches past the box edges
    assert box.side == pytest.approx(prompts.EXPAND * extent)
    assert box.x0 + box.side / 2 == pytest.approx(250) and box.y0 + box.side / 2 == pytest.approx(
        140
    )
    stroke = rasterize(Gesture(GestureKind.SCRIBBLE, [[200.0, 150], [300, 150]], False), shape)
    open_box = prompts.zoom_box(stroke, None, SIZE)
    assert open_box.side == pytest.approx(prompts.EXPAND_OPEN * 111)
    assert prompts.encloses_area(rect) and not prompts.encloses_area(stroke)


def test_previous_mask_joins_the_box_and_limits_hold():
    shape = (300, 300)
    prev = np.zeros(shape, np.uint8)
    prev[100:140, 100:160] = 1
    click = rasterize(Gesture(GestureKind.CLICK, [[200.0, 120.0]], False), shape)
    box = prompts.zoom_box(click, prev, SIZE)
    assert box.side == pytest.approx(prompts.EXPAND * (206 - 100))
    assert box.x0 <= 100 and box.x0 + box.side >= 206
    tiny = np.zeros(shape, np.uint8)
    tiny[150:160, 150:152] = 1
    assert prompts.zoom_box(click, tiny, SIZE).side >= prompts.MIN_SIDE_FRACTION * SIZE
    huge = outline([-10, -10, 310, 310], shape)
    assert prompts.zoom_box(huge, None, SIZE) == prompts.ZoomBox(0.0, 0.0, 300.0)


@given(
    h=st.integers(20, 300),
    w=st.integers(20, 300),
    cx=st.floats(0, 1),
    cy=st.floats(0, 1),
    side=st.floats(1, 500),
)
def test_fit_box_stays_inside_where_it_fits(h, w, cx, cy, side):
    box = prompts.fit_box(cx * w, cy * h, side, (h, w), SIZE)
    assert min(prompts.MIN_SIDE_FRACTION * SIZE, max(h, w)) - 1e-9 <= box.side <= max(h, w)
    for start, extent in ((box.x0, w), (box.y0, h)):
        if box.side <= extent:
            assert -1e-9 <= start and start + box.side <= extent + 1e-9
        else:  # centred, padded on both sides
            assert start == pytest.approx((extent - box.side) / 2)


@pytest.mark.parametrize("shape", [(480, 640), (321, 481), (1500, 2000), (90, 40)])
def test_crop_and_paste_back_round_trip(shape):
    h, w = shape
    mask = disc(shape, w * 0.45, h * 0.4, min(h, w) * 0.25)
    rect = outline(
        [w * 0.45 - min(h, w) * 0.3, h * 0.4 - min(h, w) * 0.3,
         w * 0.45 + min(h, w) * 0.3, h * 0.4 + min(h, w) * 0.3], shape,
    )  # fmt: skip
    for box in (prompts.zoom_box(rect, None, SIZE), prompts.whole_image_box(shape)):
        crop = prompts.crop_mask(mask, box, SIZE)
        logits = np.where(crop > 0, 4.0, -4.0).astype(np.float32)
        back = prompts.paste_logits(logits, box, shape)
        assert back.shape == shape
        # one crop pixel covers side / SIZE image pixels: the round trip loses about that much
        assert iou((back > 0).astype(np.uint8), mask) > 1 - 4 * (box.side / SIZE) / (
            min(h, w) * 0.25
        )


def test_crop_prompt_pads_outside_the_image_and_measures_distance_in_the_crop():
    image = np.full((40, 100, 3), 200, np.uint8)
    click = rasterize(Gesture(GestureKind.CLICK, [[50.0, 20.0]], False), (40, 100))
    box = prompts.zoom_box(click, None, SIZE)  # whole image: 30 px of padding above and below
    crop = prompts.crop_prompt(image, click, None, box, SIZE)
    assert crop["image"].shape == (SIZE, SIZE, 3) and crop["image"].dtype == np.uint8
    np.testing.assert_array_equal(crop["image"][0, 0], prompts.PAD_RGB)
    np.testing.assert_array_equal(crop["image"][SIZE // 2, SIZE // 2], 200)
    assert crop["gesture"].sum() > 0 and crop["prev_mask"].sum() == 0
    assert crop["distance"][crop["gesture"] > 0].max() == 0
    far = np.unravel_index(np.argmax(crop["distance"]), crop["distance"].shape)
    radius = 5 * SIZE / 100  # the brush in crop pixels
    expected = np.hypot(*np.subtract(far, (32, 32))) - radius
    assert crop["distance"].max() == pytest.approx(expected, abs=1.5)


def test_crop_sample_voids_what_lies_outside_the_image():
    shape = (40, 100)
    region = disc(shape, 50, 20, 12)
    sample = {
        "image": np.zeros((*shape, 3), np.uint8),
        "gesture": rasterize(Gesture(GestureKind.CLICK, [[50.0, 20.0]], False), shape),
        "prev_mask": np.zeros(shape, np.uint8),
        "has_prev": np.bool_(False),
        "target": region.copy(),
        "region": region,
        "local": region,
        "void": np.zeros(shape, np.uint8),
        "gesture_kind": np.int32(0),
    }
    out = prompts.crop_sample(sample, prompts.whole_image_box(shape), SIZE)
    assert out["target"][0, 0] == VOID and out["void"][0, 0] == 1 and out["region"][0, 0] == 0
    assert out["target"][SIZE // 2, SIZE // 2] == 1 and out["void"][SIZE // 2, SIZE // 2] == 0
    np.testing.assert_allclose(out["zoom_box"], [0, -30, 100])
    assert out["gesture_kind"] == 0


def test_check_prompt_reads_users_conventions_and_refuses_the_ambiguous():
    image = np.zeros((10, 12, 3), np.uint8)
    g255 = np.zeros((10, 12), np.uint8)
    g255[3:5, 3:5] = 255
    _, gesture, prev = prompts.check_prompt(image, g255, g255 > 0)
    assert gesture.dtype == bool and gesture.sum() == 4 and prev.sum() == 4
    rgb, _, _ = prompts.check_prompt(np.zeros((10, 12), np.uint8), g255.tolist())
    assert rgb.shape == (10, 12, 3)
    rgba, _, _ = prompts.check_prompt(np.zeros((10, 12, 4), np.uint8), g255)
    assert rgba.shape == (10, 12, 3)
    with pytest.raises(ValueError, match="image must be uint8 RGB"):
        prompts.check_prompt(image.astype(np.uint16), g255)
    with pytest.raises(ValueError, match="gesture_map must have the image's shape"):
        prompts.check_prompt(image, g255[:-1])
    with pytest.raises(ValueError, match="prev_mask holds NaN"):
        prompts.check_prompt(image, g255, np.full((10, 12), np.nan))
    with pytest.raises(ValueError, match="image must be uint8\\[H, W, 3\\]"):
        prompts.check_prompt(np.zeros((10, 12, 2), np.uint8), g255)


def test_paste_mask_keeps_the_previous_mask_where_the_model_kept_it():
    shape = (300, 400)
    prev = disc(shape, 200, 150, 80)
    box = prompts.zoom_box(np.zeros(shape, np.uint8), prev, SIZE)
    prev_crop = prompts.crop_mask(prev, box, SIZE)
    same = np.where(prev_crop > 0, 3.0, -3.0).astype(np.float32)
    # the resampled logits alone would round the disc's pixels off; paste_mask keeps them all
    assert not np.array_equal(prompts.paste_mask(same, box, shape), prev)
    np.testing.assert_array_equal(prompts.paste_mask(same, box, shape, prev, prev_crop), prev)
    grown = same.copy()
    grown[:8, :8] = 3.0  # the model adds a corner of the crop
    out = prompts.paste_mask(grown, box, shape, prev, prev_crop)
    assert (out >= prev).all() and out.sum() > prev.sum()
    step = box.side / SIZE  # photo pixels per crop pixel
    y0, x0 = max(int(box.y0), 0), max(int(box.x0), 0)
    assert out[
        y0 + int(2 * step) : y0 + int(6 * step), x0 + int(2 * step) : x0 + int(6 * step)
    ].all()


@given(
    st.integers(0, 2**31 - 1),
    st.integers(1, 60),
    st.integers(1, 60),
    st.sampled_from([0.0, 0.002, 0.05, 0.5]),
    st.sampled_from(["bool", "u8", "255", "f32"]),
)
def test_bounds_are_the_nonzero_pixels_box_for_any_dtype(seed, h, w, density, dtype):
    """The zoom box's bounds (word scan) are the box of the nonzero pixels, None when empty."""
    marked = np.random.default_rng(seed).random((h, w)) < density
    arr = {"bool": marked, "u8": marked.astype(np.uint8), "255": marked.astype(np.uint8) * 255,
           "f32": marked.astype(np.float32)}[dtype]  # fmt: skip
    rows, cols = np.nonzero(marked)
    want = None if rows.size == 0 else (cols.min(), rows.min(), cols.max() + 1, rows.max() + 1)
    assert zoom._bounds(arr) == (None if want is None else tuple(float(v) for v in want))


def test_negative_marks_count_as_marked_and_context_must_be_0_or_1():
    """Cases P5, P6: a gesture or previous mask of -1 (int8, what 255 becomes) read as
    unmarked; the context baseline read context=7 as REMOVE."""
    from dig_jax.prompts.encode import apply_context_strategy, check_context
    from dig_jax.prompts.zoom import check_prompt

    image = np.zeros((12, 12, 3), np.uint8)
    mark = np.zeros((12, 12), np.int8)
    mark[3:6, 3:6] = -1
    _, gesture, prev = check_prompt(image, mark, mark)
    assert gesture.sum() == 9 and prev.sum() == 9
    np.testing.assert_array_equal(check_context([0, 1, True]), [0, 1, 1])
    for bad in ([7], [-1], [0.5], ["add"]):
        with pytest.raises(ValueError, match=r"context must be Context.ADD \(1\) or"):
            apply_context_strategy({"context": np.asarray(bad)}, "oracle", None)


def test_a_click_on_a_huge_photo_survives_the_zoom_out():
    """A radius-5 click on a 4800 x 3200 photo covers under a fifth of any crop pixel at 224:
    it stays marked, widened to the thinnest brush training shows; at training sizes the crop
    gesture is the plain coverage rule."""
    from dig_jax.gestures import stroke_map
    from dig_jax.prompts import zoom

    for shape, widened in (((3200, 4800), True), ((480, 640), False)):
        h, w = shape
        gesture = stroke_map([[w * 0.4, h * 0.6]], shape)
        box = zoom.ZoomBox(0.0, (h - w) / 2, float(w))  # the whole photo, as for a click
        crop = zoom.crop_gesture(gesture, box, 224)
        plain = zoom.warp(gesture.astype(np.float32), box, 224) >= zoom.GESTURE_COVERAGE
        assert crop.any()
        if widened:
            assert not plain.any() and 9 <= crop.sum() <= 25
        else:
            np.testing.assert_array_equal(crop, plain.astype(np.uint8))


def test_passes_run_only_creation_clicks_at_the_click_size():
    config = {"image_size": 64, "predict": {"focus_pass": True, "click_size": 96}}
    passes = prompts.Passes.from_config(config)
    assert passes == prompts.Passes(64, 96, True)
    shape = (60, 90)
    click = rasterize(Gesture(GestureKind.CLICK, [[45.0, 30.0]], False), shape)
    lasso = np.zeros(shape, np.uint8)
    lasso[10:50, 10:80] = 1
    assert prompts.creation_click(click, None) and not prompts.creation_click(lasso, None)
    assert passes.first_size(click, None) == 96
    assert passes.first_size(click, np.zeros(shape, bool)) == 64  # a refinement click
    assert passes.first_size(lasso, None) == 64  # a large outline, even on the whole photo
    assert passes.first_size(np.zeros(shape, bool), None) == 64  # nothing drawn
    assert prompts.Passes.from_config({"image_size": 64}) == prompts.Passes(64, 64, False)
    assert prompts.Passes.from_config(config, paper_mode=True) == prompts.Passes(64, 64, False)
    for bad in (100, -32, True, "320"):
        with pytest.raises(ValueError, match=r"predict\.click_size"):
            prompts.Passes.from_config({"image_size": 64, "predict": {"click_size": bad}})


def test_rescue_box_reruns_only_an_ignored_refinement_click():
    shape = (120, 180)
    prev = np.zeros(shape, np.uint8)
    prev[20:100, 30:150] = 1
    click = rasterize(Gesture(GestureKind.CLICK, [[90.0, 60.0]], False), shape)  # on prev
    row, col = prompts.refinement_click(click, prev)
    assert (row, col) == (60, 90)
    box = prompts.zoom_box(click, prev, 64)
    ignored = prev.copy()  # the clicked pixel kept its label: the network ignored the click
    rescue = prompts.rescue_box(click, prev, box, ignored, 2.5, 64)
    assert rescue is not None and rescue.side == pytest.approx(box.side / 2.5)
    assert rescue.x0 <= col < rescue.x0 + rescue.side and rescue.y0 <= row < rescue.y0 + rescue.side
    obeyed = prev.copy()
    obeyed[55:66, 85:96] = 0
    assert prompts.rescue_box(click, prev, box, obeyed, 2.5, 64) is None
    assert prompts.rescue_box(click, prev, box, ignored, 0.0, 64) is None  # off
    assert prompts.rescue_box(click, None, box, ignored, 2.5, 64) is None  # a creation
    assert prompts.refinement_click(click, None) is None
    lasso = np.zeros(shape, np.uint8)
    lasso[40:80, 60:120] = 1
    assert prompts.refinement_click(lasso, prev) is None  # not a dot
    assert prompts.rescue_box(lasso, prev, box, ignored, 2.5, 64) is None
    # never smaller than the working size's floor (fit_box), never a rerun on the same view
    assert prompts.rescue_box(click, prev, box, ignored, 1.05, 64) is None


def test_passes_read_the_rescue_zoom():
    config = {"image_size": 64, "predict": {"focus_pass": True, "rescue_zoom": 2.5}}
    assert prompts.Passes.from_config(config) == prompts.Passes(64, 64, True, 2.5)
    assert prompts.Passes.from_config(config, paper_mode=True).rescue_zoom == 0.0
    for bad in (1, 0.5, -2, True, "2.5", float("nan"), float("inf")):
        with pytest.raises(ValueError, match=r"predict\.rescue_zoom"):
            prompts.Passes.from_config({"image_size": 64, "predict": {"rescue_zoom": bad}})


def test_stroke_rescue_box_reruns_an_ignored_refinement_stroke_on_its_own_box():
    shape = (120, 180)
    prev = np.zeros(shape, np.uint8)
    prev[10:110, 20:160] = 1  # a large mask; the lasso marks a sliver at its lower edge
    lasso = np.zeros(shape, np.uint8)
    lasso[100:116, 60:100] = 1
    lasso[104:112, 64:96] = 0  # an outline: its footprint is the filled 16x40 box
    box = prompts.zoom_box(lasso, prev, 64)
    rescue = prompts.stroke_rescue_box(lasso, prev, box, prev.copy(), 64)
    # the gesture's own box (40 px wide) x EXPAND, centred on it
    assert rescue is not None and rescue.side == pytest.approx(40 * prompts.EXPAND)
    assert rescue.x0 + rescue.side / 2 == pytest.approx(80) and rescue.side < box.side
    changed = prev.copy()
    changed[100:110, 60:100] = 0  # 400 of 640 footprint pixels changed: not ignored
    assert prompts.stroke_rescue_box(lasso, prev, box, changed, 64) is None
    barely = prev.copy()
    barely[100, 60:70] = 0  # 10 of 640 (1.6 % <= IGNORED_FRACTION): still ignored
    assert prompts.stroke_rescue_box(lasso, prev, box, barely, 64) is not None
    assert prompts.stroke_rescue_box(lasso, None, box, prev, 64) is None  # a creation
    click = rasterize(Gesture(GestureKind.CLICK, [[90.0, 60.0]], False), shape)
    assert prompts.stroke_rescue_box(click, prev, box, prev, 64) is None  # clicks: rescue_box
    assert prompts.stroke_rescue_box(np.zeros(shape, np.uint8), prev, box, prev, 64) is None
    # a gesture whose own box is the first view already: no rerun on the same view
    wide = np.zeros(shape, np.uint8)
    wide[5:115, 10:170] = 1
    assert prompts.stroke_rescue_box(wide, prev, prompts.zoom_box(wide, prev, 64), prev, 64) is None


def test_passes_route_each_rescue_to_its_own_switch():
    shape = (120, 180)
    prev = np.zeros(shape, np.uint8)
    prev[10:110, 20:160] = 1
    lasso = np.zeros(shape, np.uint8)
    lasso[100:116, 60:100] = 1
    click = rasterize(Gesture(GestureKind.CLICK, [[90.0, 60.0]], False), shape)
    both = prompts.Passes.from_config(
        {"image_size": 64, "predict": {"rescue_zoom": 2.5, "rescue_strokes": True}}
    )
    clicks_only = prompts.Passes(64, 64, rescue_zoom=2.5)
    strokes_only = prompts.Passes(64, 64, rescue_strokes=True)
    assert both.rescues and clicks_only.rescues and strokes_only.rescues
    assert not prompts.Passes(64, 64).rescues
    for gesture, rescued_by in ((click, (both, clicks_only)), (lasso, (both, strokes_only))):
        box = prompts.zoom_box(gesture, prev, 64)
        for passes in (both, clicks_only, strokes_only):
            got = passes.rescue(gesture, prev, box, prev.copy())
            assert (got is not None) == (passes in rescued_by)
            assert passes.rescue_due(gesture, prev) == (passes in rescued_by)
        assert not both.rescue_due(gesture, None)  # creations are never rescued
    assert not prompts.Passes.from_config(
        {"image_size": 64, "predict": {"rescue_strokes": True}}, paper_mode=True
    ).rescue_strokes
    for bad in (1, "true", None):
        with pytest.raises(ValueError, match=r"predict\.rescue_strokes"):
            prompts.Passes.from_config({"image_size": 64, "predict": {"rescue_strokes": bad}})


def test_merge_local_keeps_only_the_changes_the_gesture_touches():
    prev = np.zeros((40, 60), np.uint8)
    prev[5:20, 5:25] = 1
    mask = prev.copy()
    mask[5:20, 25:32] = 1  # added beside the mask, where the click is
    mask[30:36, 45:55] = 1  # added far away: no gesture there
    mask[5:8, 5:18] = 0  # removed along the top edge, not connected to the click's change
    click = rasterize(Gesture(GestureKind.CLICK, [[28.0, 12.0]], False), prev.shape)
    want = prev.copy()
    want[5:20, 25:32] = 1
    np.testing.assert_array_equal(prompts.merge_local(mask, prev, click), want)
    # a lasso's footprint is the area it encloses: a change inside it counts
    lasso = np.zeros_like(prev)
    lasso[28:38, 43:57] = 1
    lasso[30:36, 45:55] = 0
    want = prev.copy()
    want[30:36, 45:55] = 1
    np.testing.assert_array_equal(prompts.merge_local(mask, prev, lasso), want)
    # a gesture the network ignored (no change touches it): its mask as it is
    far = rasterize(Gesture(GestureKind.CLICK, [[2.0, 37.0]], False), prev.shape)
    np.testing.assert_array_equal(prompts.merge_local(mask, prev, far), mask)
    np.testing.assert_array_equal(prompts.merge_local(prev, prev, click), prev)
    with pytest.raises(ValueError, match="prev_mask shape"):
        prompts.merge_local(mask, prev[:-1], click)


@given(st.integers(0, 2**32 - 1))
def test_merge_local_only_takes_changes_the_network_made(seed):
    rng = np.random.default_rng(seed)
    prev = (rng.random((24, 24)) < 0.4).astype(np.uint8)
    mask = (rng.random((24, 24)) < 0.4).astype(np.uint8)
    gesture = np.zeros_like(prev)
    gesture[tuple(rng.integers(0, 24, 2))] = 1
    merged = prompts.merge_local(mask, prev, gesture)
    assert set(np.unique(merged)) <= {0, 1}
    changed = merged != prev
    assert np.all(merged[changed] == mask[changed])  # every change is one the network made
    np.testing.assert_array_equal(prompts.merge_local(merged, prev, gesture), merged)
    np.testing.assert_array_equal(prompts.merge_local(mask, prev, np.ones_like(prev)), mask)


def test_passes_merge_the_prompts_they_name():
    shape = (40, 60)
    prev = np.zeros(shape, np.uint8)
    prev[5:20, 5:25] = 1
    mask = prev.copy()
    mask[5:20, 25:32] = 1
    mask[30:36, 45:55] = 1
    click = rasterize(Gesture(GestureKind.CLICK, [[28.0, 12.0]], False), shape)
    scribble = rasterize(Gesture(GestureKind.SCRIBBLE, [[27.0, 8.0], [29.0, 18.0]], False), shape)
    for merge, merges_scribble in (("clicks", False), ("all", True)):
        passes = prompts.Passes.from_config({"image_size": 64, "predict": {"merge": merge}})
        assert passes.merge == merge
        assert passes.merged(click, prev, mask).sum() < mask.sum()
        assert (passes.merged(scribble, prev, mask).sum() < mask.sum()) == merges_scribble
        assert passes.merged(click, None, mask) is mask  # creations are never merged
    assert prompts.Passes(64, 64).merged(click, prev, mask) is mask
    assert (
        prompts.Passes.from_config(
            {"image_size": 64, "predict": {"merge": "all"}}, paper_mode=True
        ).merge
        == "none"
    )
    for bad in ("yes", True, None, "Clicks"):
        with pytest.raises(ValueError, match=r"predict\.merge"):
            prompts.Passes.from_config({"image_size": 64, "predict": {"merge": bad}})


def test_obey_click_flips_the_piece_the_network_ranks_past_an_ignored_click():
    """On a box that maps the photo 1:1 onto the crop, an ignored ADD click flips the connected
    pixels ranked at least as foreground-like as the clicked one, and nothing else."""
    size = 40
    box = prompts.ZoomBox(0.0, 0.0, float(size))
    prev = np.zeros((size, size), np.uint8)
    prev[5:20, 5:20] = 1
    logits = np.full((size, size), -10.0, np.float32)
    logits[prev > 0] = 5.0
    logits[22:30, 22:34] = -2.0  # the missed part: below the threshold, above the rest
    logits[25, 25] = -3.0  # the clicked pixel, ranked a little lower than its surroundings
    logits[33:37, 30:38] = -1.0  # ranked higher but not connected to the click
    click = rasterize(Gesture(GestureKind.CLICK, [[25.0, 25.0]], False), (size, size))
    mask = prompts.paste_mask(logits, box, prev.shape, prev, prev)
    np.testing.assert_array_equal(mask, prev)  # the network ignored the click
    obeyed = prompts.obey_click(mask, logits, box, click, prev, 0.5)
    expected = prev.copy()
    expected[22:30, 22:34] = 1
    np.testing.assert_array_equal(obeyed, expected)
    # REMOVE: a click on the previous mask flips the piece ranked at most as high as it
    logits2 = logits.copy()
    logits2[5:12, 5:20] = 0.5
    remove = rasterize(Gesture(GestureKind.CLICK, [[10.0, 8.0]], False), (size, size))
    obeyed = prompts.obey_click(prev, logits2, box, remove, prev, 0.5)
    expected = prev.copy()
    expected[5:12, 5:20] = 0
    np.testing.assert_array_equal(obeyed, expected)
    # untouched: an obeyed click, a piece over the limit, off, a creation, another gesture
    assert prompts.obey_click(expected, logits2, box, remove, prev, 0.5) is not expected
    np.testing.assert_array_equal(prompts.obey_click(expected, logits2, box, remove, prev, 0.5),
                                  expected)  # fmt: skip
    np.testing.assert_array_equal(prompts.obey_click(mask, logits, box, click, prev, 0.05), mask)
    np.testing.assert_array_equal(prompts.obey_click(mask, logits, box, click, prev, 0.0), mask)
    np.testing.assert_array_equal(prompts.obey_click(mask, logits, box, click, None, 0.5), mask)
    stroke = np.zeros((size, size), np.uint8)
    stroke[24:27, 2:38] = 1  # wider than a dot
    np.testing.assert_array_equal(prompts.obey_click(mask, logits, box, stroke, prev, 0.5), mask)


def test_obey_click_stays_inside_the_box():
    """A REMOVE click never takes the previous mask's pixels outside the last run's box (the
    pasted logits there are the background constant, which ranks below any click)."""
    shape = (60, 60)
    prev = np.zeros(shape, np.uint8)
    prev[10:50, 10:50] = 1
    box = prompts.ZoomBox(20.0, 20.0, 20.0)
    logits = np.full((20, 20), 0.5, np.float32)
    click = rasterize(Gesture(GestureKind.CLICK, [[30.0, 30.0]], False), shape)
    obeyed = prompts.obey_click(prev, logits, box, click, prev, 1.0)
    assert obeyed[30, 30] == 0 and obeyed[15, 15] == 1 and obeyed[45, 45] == 1
    assert obeyed[:20].sum() == prev[:20].sum() and obeyed[40:].sum() == prev[40:].sum()


def test_passes_read_obey_clicks():
    passes = prompts.Passes.from_config({"image_size": 64, "predict": {"obey_clicks": 0.3}})
    assert passes.obey == 0.3
    assert prompts.Passes.from_config({"image_size": 64}).obey == 0.0
    config = {"image_size": 64, "predict": {"obey_clicks": 0.3}}
    assert prompts.Passes.from_config(config, paper_mode=True).obey == 0.0
    mask = np.zeros((8, 8), np.uint8)
    assert prompts.Passes(64, 64).obeyed(mask, mask, mask, mask, None) is mask  # off
    for bad in (1.5, -0.1, True, "0.3", float("nan")):
        with pytest.raises(ValueError, match=r"predict\.obey_clicks"):
            prompts.Passes.from_config({"image_size": 64, "predict": {"obey_clicks": bad}})


def test_passes_read_the_flip():
    config = {"image_size": 64, "predict": {"flip": True}}
    assert prompts.Passes.from_config(config).flip
    assert not prompts.Passes.from_config({"image_size": 64}).flip
    assert not prompts.Passes.from_config(config, paper_mode=True).flip  # the paper's one pass
    for bad in (1, "true", None):
        with pytest.raises(ValueError, match=r"predict\.flip"):
            prompts.Passes.from_config({"image_size": 64, "predict": {"flip": bad}})


def test_open_creation_prompts_are_dots_and_strokes_that_enclose_nothing():
    shape = (120, 180)
    click = rasterize(Gesture(GestureKind.CLICK, [[90.0, 60.0]], False), shape)
    scribble = rasterize(Gesture(GestureKind.SCRIBBLE, [[40.0, 60.0], [140.0, 70.0]], False), shape)
    rect = outline([40, 30, 140, 90], shape)
    assert prompts.open_creation(click, None) and prompts.open_creation(scribble, None)
    assert not prompts.open_creation(rect, None)  # it encloses an area
    assert not prompts.open_creation(click, np.zeros(shape, np.uint8))  # a refinement
    assert not prompts.open_creation(np.zeros(shape, np.uint8), None)  # nothing drawn
    passes = prompts.Passes(64, 64, open_threshold=-0.5)
    assert passes.cut(click, None) == passes.cut(scribble.tolist(), None) == -0.5
    assert passes.cut(rect, None) == passes.cut(click, rect) == 0.0
    assert prompts.Passes(64, 64).cut(click, None) == 0.0  # off


def test_paste_mask_cuts_at_the_threshold_and_keeps_the_previous_mask_elsewhere():
    box, shape = prompts.ZoomBox(0.0, 0.0, 8.0), (8, 8)
    logits = np.full((8, 8), -0.3, np.float32)
    logits[:4] = 1.0
    assert prompts.paste_mask(logits, box, shape).sum() == 32
    assert prompts.paste_mask(logits, box, shape, threshold=-0.5).sum() == 64
    assert prompts.paste_mask(logits, box, shape, threshold=2.0).sum() == 0
    prev = np.zeros(shape, np.uint8)
    prev[:4] = 1
    # at 0 the model kept the previous mask; cut at -0.5 it adds the lower half
    kept = prompts.paste_mask(logits, box, shape, prev, prev)
    np.testing.assert_array_equal(kept, prev)
    assert prompts.paste_mask(logits, box, shape, prev, prev, -0.5).sum() == 64


def test_passes_read_the_open_threshold():
    config = {"image_size": 64, "predict": {"open_threshold": -0.5}}
    assert prompts.Passes.from_config(config).open_threshold == -0.5
    assert prompts.Passes.from_config({"image_size": 64}).open_threshold == 0.0
    assert prompts.Passes.from_config(config, paper_mode=True).open_threshold == 0.0
    for bad in (-11, 10.5, True, "-0.5", float("nan"), float("inf")):
        with pytest.raises(ValueError, match=r"predict\.open_threshold"):
            prompts.Passes.from_config({"image_size": 64, "predict": {"open_threshold": bad}})
