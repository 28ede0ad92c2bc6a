"""Interpolating cubic curves through control points, sampled about every `spacing` px (numba).

`sample_curve` is the whole of `simulate.interpolate_curve` after its clean-up, in one compiled
call: scipy builds a spline object per curve (`make_interp_spline`, `CubicSpline`), and its
argument handling was most of a scribble's or a lasso's simulation time (0.2-0.7 ms of
0.5-2 ms, `benchmarks/gestures.py`); the arithmetic here takes microseconds.

The curves are scipy's, to rounding (tests compare against scipy on random control points):
- open, M >= 4 points: the not-a-knot cubic spline (`make_interp_spline(t, y, k=3)`; its
  B-spline with knots t[2:-2] is the cubic spline whose third derivative is continuous at
  t[1] and t[-2]); M = 3: the parabola through them (k = 2, no interior knot); M = 2: the line;
- closed: the periodic cubic spline (`CubicSpline(t, y, bc_type="periodic")`).
Slopes come from the usual tridiagonal system (cyclic for periodic: Sherman-Morrison), the
pieces from them as `CubicHermiteSpline` makes them, and each piece is evaluated as scipy's
`PPoly` sums its powers, so only the slopes' rounding differs from scipy (~1e-13 px).
"""

from __future__ import annotations

import math

import numpy as np

from dig_jax import _numba


@_numba.njit(cache=True, nogil=True)
def _thomas(sub, diag, sup, rhs):
    """Solution f64[n, 2] of the tridiagonal system (sub[i] s[i-1] + diag[i] s[i] +
    sup[i] s[i+1] = rhs[i]; sub[0], sup[n-1] unused), no pivoting (the systems here do not
    need it: their eliminated diagonals stay positive)."""
    n = diag.shape[0]
    d = diag.copy()
    r = rhs.copy()
    for i in range(1, n):
        w = sub[i] / d[i - 1]
        d[i] -= w * sup[i - 1]
        r[i, 0] -= w * r[i - 1, 0]
        r[i, 1] -= w * r[i - 1, 1]
    out = np.empty_like(r)
    out[n - 1, 0] = r[n - 1, 0] / d[n - 1]
    out[n - 1, 1] = r[n - 1, 1] / d[n - 1]
    for i in range(n - 2, -1, -1):
        out[i, 0] = (r[i, 0] - sup[i] * out[i + 1, 0]) / d[i]
        out[i, 1] = (r[i, 1] - sup[i] * out[i + 1, 1]) / d[i]
    return out


@_numba.njit(cache=True, nogil=True)
def _chords(t, y):
    """(dx f64[n], slope f64[n, 2]) of the n = len(t) - 1 pieces."""
    n = t.shape[0] - 1
    dx = np.empty(n)
    slope = np.empty((n, 2))
    for i in range(n):
        dx[i] = t[i + 1] - t[i]
        slope[i, 0] = (y[i + 1, 0] - y[i, 0]) / dx[i]
        slope[i, 1] = (y[i + 1, 1] - y[i, 1]) / dx[i]
    return dx, slope


@_numba.njit(cache=True, nogil=True)
def _slopes_open(t, y):
    """Slopes f64[M, 2] at the M >= 2 nodes of the open interpolant (see module doc)."""
    m = t.shape[0]
    dx, slope = _chords(t, y)
    s = np.empty((m, 2))
    if m == 2:  # the line
        s[0], s[1] = slope[0], slope[0]
        return s
    if m == 3:  # the parabola: p'(t) = slope0 + c (2 t - t0 - t1), c its second divided difference
        for k in range(2):
            c = (slope[1, k] - slope[0, k]) / (t[2] - t[0])
            s[0, k] = slope[0, k] - c * dx[0]
            s[1, k] = slope[0, k] + c * dx[0]
            s[2, k] = slope[0, k] + c * (dx[0] + 2.0 * dx[1])
        return s
    sub, diag, sup = np.zeros(m), np.empty(m), np.zeros(m)
    rhs = np.empty((m, 2))
    for i in range(1, m - 1):  # C2 at the interior nodes
        sub[i], diag[i], sup[i] = dx[i], 2.0 * (dx[i - 1] + dx[i]), dx[i - 1]
        for k in range(2):
            rhs[i, k] = 3.0 * (dx[i] * slope[i - 1, k] + dx[i - 1] * slope[i, k])
    d = t[2] - t[0]  # not-a-knot at t[1]
    diag[0], sup[0] = dx[1], d
    for k in range(2):
        rhs[0, k] = ((dx[0] + 2.0 * d) * dx[1] * slope[0, k] + dx[0] * dx[0] * slope[1, k]) / d
    d = t[m - 1] - t[m - 3]  # not-a-knot at t[-2]
    sub[m - 1], diag[m - 1] = d, dx[m - 3]
    for k in range(2):
        rhs[m - 1, k] = (
            dx[m - 2] * dx[m - 2] * slope[m - 3, k]
            + (2.0 * d + dx[m - 2]) * dx[m - 3] * slope[m - 2, k]
        ) / d
    return _thomas(sub, diag, sup, rhs)


@_numba.njit(cache=True, nogil=True)
def _slopes_periodic(t, y):
    """Slopes f64[N + 1, 2] at the N + 1 nodes (y[N] == y[0], N >= 3) of the periodic cubic
    spline: the cyclic tridiagonal system of C2 at every node, by Sherman-Morrison."""
    n = t.shape[0] - 1
    dx, slope = _chords(t, y)
    sub, diag, sup = np.empty(n), np.empty(n), np.empty(n)
    rhs = np.empty((n, 2))
    for i in range(n):
        before = (i - 1) % n
        sub[i], diag[i], sup[i] = dx[i], 2.0 * (dx[before] + dx[i]), dx[before]
        for k in range(2):
            rhs[i, k] = 3.0 * (dx[i] * slope[before, k] + dx[before] * slope[i, k])
    corner_top, corner_bottom = sub[0], sup[n - 1]  # rows 0 and n-1 wrap around
    gamma = -diag[0]
    diag_mod = diag.copy()
    diag_mod[0] -= gamma
    diag_mod[n - 1] -= corner_bottom * corner_top / gamma
    x = _thomas(sub, diag_mod, sup, rhs)
    u = np.zeros((n, 2))
    u[0, 0], u[n - 1, 0] = gamma, corner_bottom
    u[0, 1], u[n - 1, 1] = gamma, corner_bottom
    z = _thomas(sub, diag_mod, sup, u)
    s = np.empty((n + 1, 2))
    for k in range(2):
        fact = (x[0, k] + corner_top * x[n - 1, k] / gamma) / (
            1.0 + z[0, k] + corner_top * z[n - 1, k] / gamma
        )
        for i in range(n):
            s[i, k] = x[i, k] - fact * z[i, k]
        s[n, k] = s[0, k]
    return s


@_numba.njit(cache=True, nogil=True)
def _pieces(t, y, s):
    """Power-form coefficients f64[4, n, 2] of the cubic pieces (`CubicHermiteSpline`'s)."""
    n = t.shape[0] - 1
    dx, slope = _chords(t, y)
    c = np.empty((4, n, 2))
    for i in range(n):
        for k in range(2):
            tt = (s[i, k] + s[i + 1, k] - 2.0 * slope[i, k]) / dx[i]
            c[0, i, k] = tt / dx[i]
            c[1, i, k] = (slope[i, k] - s[i, k]) / dx[i] - tt
            c[2, i, k] = s[i, k]
            c[3, i, k] = y[i, k]
    return c


@_numba.njit(cache=True, nogil=True)
def _evaluate(t, c, params):
    """The curve f64[P, 2] at ascending `params` within [t[0], t[-1]] (as `PPoly` sums)."""
    n = t.shape[0] - 1
    out = np.empty((params.shape[0], 2))
    i = 0
    for p in range(params.shape[0]):
        x = params[p]
        while i < n - 1 and x >= t[i + 1]:
            i += 1
        z = x - t[i]
        for k in range(2):
            res = c[3, i, k]
            zz = z
            res = res + c[2, i, k] * zz
            zz = zz * z
            res = res + c[1, i, k] * zz
            zz = zz * z
            res = res + c[0, i, k] * zz
            out[p, k] = res
    return out


@_numba.njit(cache=True, nogil=True)
def _linspace(stop, num):
    """`np.linspace(0.0, stop, num)`, its bytes (num >= 2)."""
    out = np.empty(num)
    step = stop / (num - 1)
    for i in range(num):
        out[i] = i * step
    out[num - 1] = stop
    return out


@_numba.njit(cache=True, nogil=True)
def _union(a, b):
    """`np.union1d` of two ascending arrays (b strictly ascending)."""
    out = np.empty(a.shape[0] + b.shape[0])
    i, j, n = 0, 0, 0
    while i < a.shape[0] or j < b.shape[0]:
        if j == b.shape[0] or (i < a.shape[0] and a[i] < b[j]):
            v = a[i]
            i += 1
        elif i == a.shape[0] or b[j] < a[i]:
            v = b[j]
            j += 1
        else:
            v = a[i]
            i += 1
            j += 1
        if n == 0 or out[n - 1] != v:
            out[n] = v
            n += 1
    return out[:n]


@_numba.njit(cache=True, nogil=True)
def _block_sum(a, lo, n):
    """numpy's sum of a block of n <= 128 floats: eight lanes, then the remainder in order."""
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    r = a[lo : lo + 8].copy()
    i = 8
    while i < n - n % 8:
        for j in range(8):
            r[j] += a[lo + i + j]
        i += 8
    res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


@_numba.njit(cache=True, nogil=True)
def _pairwise_sum(a):
    """`a.sum()` with numpy's bytes: its pairwise summation (blocks of up to 128 as
    `_block_sum`; longer runs split in halves at a multiple of 8, summed left + right),
    evaluated with an explicit stack. A curve's arc length sets its number of samples through
    a ceiling, so a straight line of integral length needs the very sum numpy computes."""
    todo_lo, todo_n, todo_join = (
        np.empty(128, np.int64),
        np.empty(128, np.int64),
        np.empty(128, np.bool_),
    )
    values = np.empty(128)
    top, held = 0, 0
    todo_lo[0], todo_n[0], todo_join[0] = 0, a.shape[0], False
    top = 1
    while top:
        top -= 1
        lo, n, join = todo_lo[top], todo_n[top], todo_join[top]
        if join:  # both halves are summed: left below right on the value stack
            held -= 1
            values[held - 1] = values[held - 1] + values[held]
        elif n <= 128:
            values[held] = _block_sum(a, lo, n)
            held += 1
        else:
            half = n // 2
            half -= half % 8
            todo_lo[top], todo_n[top], todo_join[top] = lo, n, True
            todo_lo[top + 1], todo_n[top + 1], todo_join[top + 1] = lo + half, n - half, False
            todo_lo[top + 2], todo_n[top + 2], todo_join[top + 2] = lo, half, False
            top += 3
    return values[0]


@_numba.njit(cache=True, nogil=True)
def polyline_length(points):
    """Length (px) of the polyline through `points` f64[P, 2], P >= 1, with numpy's bytes for
    `np.linalg.norm(np.diff(points, axis=0), axis=1).sum()`."""
    chords = np.empty(points.shape[0] - 1)
    for i in range(chords.shape[0]):
        d0 = points[i + 1, 0] - points[i, 0]
        d1 = points[i + 1, 1] - points[i, 1]
        chords[i] = math.sqrt(d0 * d0 + d1 * d1)
    return _pairwise_sum(chords)


@_numba.njit(cache=True, nogil=True)
def sample_curve(control, closed, spacing):
    """The interpolating curve through `control` f64[M, 2] (distinct consecutive points; M >= 2
    open, >= 3 closed), centripetal parameter, sampled at about every `spacing` px of arc
    length plus at the control points; closed curves omit the repeated end. f64[P, 2]."""
    m = control.shape[0]
    nodes = np.empty((m + 1 if closed else m, 2))
    nodes[:m] = control
    if closed:
        nodes[m] = control[0]
    t = np.zeros(nodes.shape[0])
    for i in range(1, nodes.shape[0]):
        dx = nodes[i, 0] - nodes[i - 1, 0]
        dy = nodes[i, 1] - nodes[i - 1, 1]
        t[i] = t[i - 1] + math.sqrt(math.sqrt(dx * dx + dy * dy))  # centripetal
    slopes = _slopes_periodic(t, nodes) if closed else _slopes_open(t, nodes)
    c = _pieces(t, nodes, slopes)
    coarse = _evaluate(t, c, _linspace(t[-1], 8 * t.shape[0]))
    arc = polyline_length(coarse)
    samples = _linspace(t[-1], max(2, math.ceil(arc / spacing) + 1))
    params = _union(samples, t)
    if closed:
        keep = 0
        while keep < params.shape[0] and params[keep] < t[-1]:
            keep += 1
        params = params[:keep]
    return _evaluate(t, c, params)


@_numba.njit(cache=True, nogil=True)
def clipped_curve(control, closed, spacing, height, width):
    """f32[P, 2]: a gesture's curve through `control` f64[M, 2] in one call: points equal to
    their predecessor dropped (closed: a last point equal to the first too), then
    `sample_curve` (one point, or two closed, kept as they are), then each coordinate clipped
    to the image's extent [-0.5, W - 0.5] x [-0.5, H - 0.5] and rounded to float32
    (`simulate.interpolate_curve` and `simulate._clip_to_image`, their bytes)."""
    m = control.shape[0]
    keep = np.empty(m, np.int64)
    n = 0
    for i in range(m):
        if i == 0 or control[i, 0] != control[i - 1, 0] or control[i, 1] != control[i - 1, 1]:
            keep[n] = i
            n += 1
    if closed and n > 1:
        a, b = keep[0], keep[n - 1]
        if control[a, 0] == control[b, 0] and control[a, 1] == control[b, 1]:
            n -= 1
    distinct = np.empty((n, 2))
    for i in range(n):
        distinct[i] = control[keep[i]]
    points = distinct if n == 1 or (closed and n < 3) else sample_curve(distinct, closed, spacing)
    out = np.empty((points.shape[0], 2), np.float32)
    for i in range(points.shape[0]):
        out[i, 0] = np.float32(min(max(points[i, 0], -0.5), width - 0.5))
        out[i, 1] = np.float32(min(max(points[i, 1], -0.5), height - 0.5))
    return out


# A lasso's control points are redrawn when they are collinear (smallest singular value of
# the centred points <= 1e-3, numpy's SVD); `outline_samples` settles the clear cases itself:
# its eigenvalue estimate is within ~1e-15 · trace of the exact one, far inside these margins.
_SPREAD_FLOOR, _SPREAD_MARGIN = 2e-6, 1e-8


@_numba.njit(cache=True, nogil=True)
def outline_samples(outline, arc, phase, n, offsets, height, width):
    """(points f64[n, 2], clearly_spread): n points evenly spaced along a closed outline
    f64[P, 2] with arc length f64[P] (px from its first point) starting at `phase` (in [0, 1)
    of a step), plus `offsets` f64[n, 2] (or f64[0, 2]: none), clipped to the image's extent
    and rounded to float32 — `simulate._lasso_from`'s arithmetic, bit for bit (np.interp).
    clearly_spread: the centred points' smallest squared singular value is surely above
    1e-6 (False: let numpy's SVD decide)."""
    perimeter = arc[-1]
    where = np.empty(n)
    for k in range(n):
        where[k] = (phase + k) / n * perimeter
    xs = np.interp(where, arc, outline[:, 0])
    ys = np.interp(where, arc, outline[:, 1])
    points = np.empty((n, 2))
    for k in range(n):
        x, y = xs[k], ys[k]
        if offsets.shape[0]:
            x += offsets[k, 0]
            y += offsets[k, 1]
        points[k, 0] = np.float64(np.float32(min(max(x, -0.5), width - 0.5)))
        points[k, 1] = np.float64(np.float32(min(max(y, -0.5), height - 0.5)))
    mean_x, mean_y = points[:, 0].mean(), points[:, 1].mean()
    cxx = cyy = cxy = 0.0
    for k in range(n):
        dx, dy = points[k, 0] - mean_x, points[k, 1] - mean_y
        cxx += dx * dx
        cyy += dy * dy
        cxy += dx * dy
    trace = cxx + cyy
    largest = 0.5 * (trace + math.sqrt(max(trace * trace - 4.0 * (cxx * cyy - cxy * cxy), 0.0)))
    smallest = (cxx * cyy - cxy * cxy) / largest if largest > 0.0 else 0.0
    return points, smallest > _SPREAD_FLOOR + _SPREAD_MARGIN * trace
