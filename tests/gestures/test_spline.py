"""The compiled curve sampler against scipy's splines (the curves `interpolate_curve` promises)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.interpolate import CubicSpline, make_interp_spline

from dig_jax.gestures.simulate import (
    SPACING,
    _clip_to_image,
    _collinear,
    _dedupe,
    interpolate_curve,
)
from dig_jax.gestures.spline import outline_samples, sample_curve


def scipy_curve(control: np.ndarray, closed: bool) -> tuple[np.ndarray, float]:
    """The sampling `interpolate_curve` documents, with scipy's spline objects, and the arc
    length (px) that set the number of samples."""
    nodes = np.concatenate([control, control[:1]]) if closed else control
    t = np.concatenate([[0.0], np.cumsum(np.sqrt(np.linalg.norm(np.diff(nodes, axis=0), axis=1)))])
    if closed:
        spline = CubicSpline(t, nodes, bc_type="periodic")
    else:
        spline = make_interp_spline(t, nodes, k=min(3, len(control) - 1))
    coarse = spline(np.linspace(0.0, t[-1], 8 * len(t)))
    arc = np.linalg.norm(np.diff(coarse, axis=0), axis=1).sum()
    params = np.union1d(np.linspace(0.0, t[-1], max(2, int(np.ceil(arc / SPACING)) + 1)), t)
    if closed:
        params = params[params < t[-1]]
    return spline(params), arc


# Quarter-pixel coordinates: simulated control points are pixels or jittered outline points;
# points 1e-27 px apart would make both solvers' answers rounding noise.
control_points = st.lists(
    st.tuples(st.integers(-200, 2400), st.integers(-200, 2400)), min_size=2, max_size=30
)


@settings(max_examples=150, deadline=None)
@given(control_points, st.booleans())
def test_sample_curve_is_scipys_spline(points, closed):
    control = _dedupe(np.array(points, np.float64) / 4, closed)
    if len(control) < (3 if closed else 2):
        return
    ours = sample_curve(control, closed, SPACING)
    ref, arc = scipy_curve(control, closed)
    if ours.shape != ref.shape:
        # One sample more or less only where the arc length is a multiple of SPACING to
        # rounding (a straight line of even integral length), which decides a ceiling.
        assert abs(arc / SPACING - round(arc / SPACING)) < 1e-9 and abs(len(ours) - len(ref)) == 1
        return
    # Rounding only: the slopes come from a different (equivalent) linear system.
    scale = max(1.0, np.abs(ref).max())
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-9 * scale)


@pytest.mark.parametrize("m", [2, 3, 4, 5, 6])
def test_open_curves_interpolate_and_have_the_right_degree(m):
    rng = np.random.default_rng(m)
    control = rng.uniform(0, 300, (m, 2))
    curve = sample_curve(control, False, SPACING)
    for p in control:  # the control points are among the samples
        assert np.min(np.linalg.norm(curve - p, axis=1)) < 1e-9
    if m <= 4:  # a single polynomial of degree m - 1 in the centripetal parameter
        nodes_t = np.concatenate(
            [[0.0], np.cumsum(np.sqrt(np.linalg.norm(np.diff(control, axis=0), axis=1)))]
        )
        poly = [np.polyfit(nodes_t, control[:, k], m - 1) for k in range(2)]
        far = rng.uniform(0, nodes_t[-1], 50)
        ref = make_interp_spline(nodes_t, control, k=m - 1)(far)
        np.testing.assert_allclose(np.stack([np.polyval(p, far) for p in poly], -1), ref, atol=1e-6)


def test_closed_curve_is_periodic_and_c2():
    theta = np.linspace(0, 2 * np.pi, 9)[:-1]
    control = np.stack([200 + 80 * np.cos(theta), 150 + 50 * np.sin(theta)], -1)
    curve = sample_curve(control, True, SPACING)
    assert not np.array_equal(curve[0], curve[-1])  # the repeated end is omitted
    steps = np.linalg.norm(np.diff(np.concatenate([curve, curve[:1]]), axis=0), axis=1)
    assert steps.max() < 2 * SPACING  # sampled about every SPACING px, the joint included
    radii = np.hypot((curve[:, 0] - 200) / 80, (curve[:, 1] - 150) / 50)
    assert np.abs(radii - 1).max() < 0.02  # a smooth closed curve through an ellipse's points


def test_interpolate_curve_keeps_its_special_cases():
    one = interpolate_curve(np.array([[3.0, 4.0], [3.0, 4.0]]), closed=False)
    np.testing.assert_array_equal(one, [[3.0, 4.0]])
    two = interpolate_curve(np.array([[0.0, 0.0], [10.0, 0.0]]), closed=True)
    np.testing.assert_array_equal(two, [[0.0, 0.0], [10.0, 0.0]])
    line = interpolate_curve(np.array([[0.0, 0.0], [10.0, 0.0]]), closed=False)
    np.testing.assert_allclose(line[:, 1], 0.0)
    assert np.all(np.diff(line[:, 0]) > 0) and line[-1, 0] == 10.0


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(-40, 140), st.integers(-40, 140)), min_size=1, max_size=12),
    st.booleans(),
    st.integers(0, 3),
)
def test_clipped_curve_is_interpolate_then_clip(points, closed, repeat):
    """The one-call curve of a gesture: duplicates (consecutive, and a closed curve's last
    point equal to its first) dropped, sampled, clipped to a 100 x 90 image, float32."""
    from dig_jax.gestures.spline import clipped_curve

    control = np.repeat(np.array(points, np.float64) / 2, 1 + repeat % 2, axis=0)
    if closed and repeat >= 2:
        control = np.concatenate([control, control[:1]])
    expected = _clip_to_image(interpolate_curve(control, closed), (90, 100))
    got = clipped_curve(control, closed, SPACING, 90, 100)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("n", [1, 2, 8, 9, 129, 130, 257, 2049])
def test_polyline_length_is_numpys_sum(n):
    """Pairwise summation as numpy does it, bit for bit (blocks of 128, halves above): a
    ceiling of this length sets a curve's number of samples."""
    from dig_jax.gestures.spline import polyline_length

    points = np.random.default_rng(n).random((n, 2)) * 10.0 ** np.random.default_rng(n).uniform(
        -2, 3, (n, 1)
    )
    assert polyline_length(points) == np.linalg.norm(np.diff(points, axis=0), axis=1).sum()


def numpy_outline_samples(outline, arc, phase, n, offsets, height, width):
    """`_lasso_from`'s arithmetic as it was written in numpy (interp, jitter, clip, float32)."""
    where = (phase + np.arange(n)) / n * arc[-1]
    pts = np.stack([np.interp(where, arc, outline[:, 0]), np.interp(where, arc, outline[:, 1])], -1)
    if len(offsets):
        pts = pts + offsets
    return _clip_to_image(pts, (height, width)).astype(np.float64)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.floats(-50, 600), st.floats(-50, 600)), min_size=2, max_size=40),
    st.floats(0, 1, exclude_max=True), st.integers(3, 60), st.booleans(),
    st.integers(0, 2**16), st.sampled_from([0.0, 1e-6, 1e-4]),
)  # fmt: skip
def test_outline_samples_equal_numpy(vertices, phase, n, jitter, seed, squash):
    """Bit for bit the numpy arithmetic it replaces, on random (also nearly flat) outlines;
    'clearly spread' only where numpy's SVD finds the points not collinear."""
    outline = np.array(vertices + vertices[:1], np.float64)
    if squash:  # nearly collinear: y pressed towards a line through the first point
        outline[:, 1] = outline[0, 1] + squash * (outline[:, 1] - outline[0, 1])
    steps = np.linalg.norm(np.diff(outline, axis=0), axis=1)
    arc = np.concatenate([[0.0], np.cumsum(steps)])
    if arc[-1] <= 0 or np.any(steps == 0):
        return  # the outlines the tracer returns have distinct consecutive points
    rng = np.random.default_rng(seed)
    offsets = rng.uniform(-4, 4, size=(n, 2)) if jitter else np.zeros((0, 2))
    got, spread = outline_samples(outline, arc, phase, n, offsets, 512, 384)
    want = numpy_outline_samples(outline, arc, phase, n, offsets, 512, 384)
    np.testing.assert_array_equal(got, want)
    if spread:
        assert not _collinear(want)


def _arc(outline: np.ndarray) -> np.ndarray:
    return np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(outline, axis=0), axis=1))])


def test_outline_samples_known_answers():
    """A square of side 100 from (0, 0), 4 samples at phase 0: its corners, clearly spread;
    an outline along a line: collinear samples, left to the SVD."""
    square = np.array([[0, 0], [100, 0], [100, 100], [0, 100], [0, 0]], np.float64)
    points, spread = outline_samples(square, _arc(square), 0.0, 4, np.zeros((0, 2)), 512, 512)
    np.testing.assert_array_equal(points, square[:4])
    assert spread
    line = np.array([[0, 0], [100, 50], [0, 0]], np.float64)
    points, spread = outline_samples(line, _arc(line), 0.25, 8, np.zeros((0, 2)), 512, 512)
    assert not spread and points.shape == (8, 2) and _collinear(points)
    offsets = np.full((4, 2), -1000.0)  # jitter past the image: clipped to its extent
    points, _ = outline_samples(square, _arc(square), 0.0, 4, offsets, 512, 512)
    np.testing.assert_array_equal(points, np.full((4, 2), -0.5))
