"""SLIC superpixels: scikit-image's labels, bit for bit, computed faster.

`slic(image, n_segments)` returns what `skimage.segmentation.slic(image, n_segments=...,
compactness=..., start_label=0, channel_axis=-1)` returns for a 2-D uint8 RGB image without
mask or smoothing. scikit-image's steps are kept; three are computed faster with the same
operations: the per-value part of the colour conversion (rescale and sRGB gamma) once per uint8
level instead of per pixel; the k-means iterations (70-90 % of scikit-image's time on the
prior's crops) as a numba kernel doing the same float64 operations in the same order,
vectorised over each window row (AVX2 here); and the connectivity pass as a numba port of the
same breadth-first search. The 3x3 colour product and `xyz2lab` are scikit-image's own.
2.6-3.7x less CPU per call on a 160x107 crop with 8-1000 segments. Equality with scikit-image
is tested on random and real images (`tests/data/test_superpixels.py`); the colour lookup
rests on numpy evaluating `np.power` per element the same way on 256 levels as on a whole
image, which those tests check on the machine they run on.

Why the loop can be reordered without changing a label: scikit-image assigns a pixel to segment
k only when k's distance is strictly below the best so far, visiting segments in index order,
so a pixel ends with the lowest index among its nearest segments; the kernel keeps that order.
"""

from __future__ import annotations

import math

import numpy as np
from skimage.color import xyz2lab
from skimage.color.colorconv import xyz_from_rgb
from skimage.util import img_as_float64, regular_grid

from dig_jax import _numba

_FLOAT_MAX = float(np.finfo(np.float64).max)  # scikit-image's DBL_MAX start distance


@_numba.njit(cache=True, nogil=True, error_model="numpy")
def _kmeans(
    lab: np.ndarray,
    segments: np.ndarray,
    step_y: int,
    step_x: int,
    spatial_weight: float,
    max_num_iter: int,
) -> np.ndarray:
    """Labels intp[H, W] (-1: no segment) of SLIC's k-means on `lab` float64[3, H, W].

    `segments` float64[K, 6] (z, y, x, L, a, b; z = 0) is updated in place, as in
    scikit-image's `_slic_cython`. Unsigned flat indices let LLVM vectorise the window rows
    (signed indices carry numba's negative-index wraparound branch).
    """
    height, width = lab.shape[1], lab.shape[2]
    plane0, plane1, plane2 = lab[0].ravel(), lab[1].ravel(), lab[2].ravel()
    n_segments = segments.shape[0]
    labels = np.full(height * width, -1, np.intp)
    distance = np.empty(height * width, np.float64)
    counts = np.zeros(n_segments, np.intp)
    columns = np.arange(width).astype(np.float64)  # loaded, not converted, in the row loop
    for _ in range(max_num_iter):
        change = False
        distance[:] = _FLOAT_MAX
        for k in range(n_segments):
            cz, cy, cx = segments[k, 0], segments[k, 1], segments[k, 2]
            if cy != cy or cx != cx:  # emptied segment (0/0): never nearer than anything
                continue
            y_min = int(max(cy - 2 * step_y, 0.0))
            y_max = int(min(cy + 2 * step_y + 1, float(height)))
            x_min = np.uint64(int(max(cx - 2 * step_x, 0.0)))
            x_max = np.uint64(int(min(cx + 2 * step_x + 1, float(width))))
            if y_max > y_min and x_max > x_min:
                change = True
            dz = 1.0 * (cz - 0)
            dz *= dz
            s0, s1, s2 = segments[k, 3], segments[k, 4], segments[k, 5]
            for y in range(y_min, y_max):
                dy = 1.0 * (cy - y)
                dy *= dy
                dzy = dz + dy
                row = np.uint64(y * width)
                for x in range(x_min, x_max):
                    dx = 1.0 * (cx - columns[x])
                    dx *= dx
                    dist = (dzy + dx) * spatial_weight
                    i = row + x
                    t0 = plane0[i] - s0
                    t1 = plane1[i] - s1
                    t2 = plane2[i] - s2
                    dist += t0 * t0 + t1 * t1 + t2 * t2  # = ((0 + t0²) + t1²) + t2²
                    old = distance[i]
                    nearer = old > dist
                    distance[i] = dist if nearer else old
                    labels[i] = k if nearer else labels[i]
        if not change:
            break
        # New centres: sums in raster order (scikit-image's order), then means.
        counts[:] = 0
        segments[:, :] = 0.0
        for y in range(height):
            for x in range(width):
                i = y * width + x
                k = labels[i]
                if k < 0:
                    continue
                counts[k] += 1
                segments[k, 1] += y
                segments[k, 2] += x
                segments[k, 3] += plane0[i]
                segments[k, 4] += plane1[i]
                segments[k, 5] += plane2[i]
        for k in range(n_segments):
            for c in range(6):
                segments[k, c] /= counts[k]
    return labels.reshape(height, width)


@_numba.njit(cache=True, nogil=True)
def _enforce_connectivity(labels: np.ndarray, min_size: int, max_size: int) -> np.ndarray:
    """scikit-image's `_enforce_label_connectivity_cython` for a 2-D label map from 0: each
    4-connected piece (breadth-first, neighbours x+1, x-1, y+1, y-1) gets a new label in raster
    order; a piece under `min_size` px takes the label of the last other piece seen beside it.
    Same traversal, same result, int only."""
    height, width = labels.shape
    out = np.full((height, width), -1, np.intp)
    queue = np.empty((max(max_size, 1), 2), np.intp)
    dys, dxs = (0, 0, 1, -1), (1, -1, 0, 0)
    new_label = 0
    for y in range(height):
        for x in range(width):
            if labels[y, x] == -1 or out[y, x] > -1:
                continue
            adjacent = new_label
            label = labels[y, x]
            out[y, x] = new_label
            size, visited = 1, 0
            queue[0, 0], queue[0, 1] = y, x
            while visited < size < max_size:
                for i in range(4):
                    yy, xx = queue[visited, 0] + dys[i], queue[visited, 1] + dxs[i]
                    if 0 <= xx < width and 0 <= yy < height:
                        if labels[yy, xx] == label and out[yy, xx] == -1:
                            out[yy, xx] = new_label
                            queue[size, 0], queue[size, 1] = yy, xx
                            size += 1
                            if size >= max_size:
                                break
                        elif out[yy, xx] > -1 and out[yy, xx] != new_label:
                            adjacent = out[yy, xx]
                visited += 1
            if size < min_size:
                for i in range(size):
                    out[queue[i, 0], queue[i, 1]] = adjacent
            else:
                new_label += 1
    return out


def _rgb2lab_uint8(image: np.ndarray) -> np.ndarray:
    """float64[H, W, 3]: `rgb2lab` of the uint8 image as scikit-image's `slic` prepares it
    (float, rescaled to [0, 1] by its min and max). The rescale and sRGB's gamma act on each
    value alone, so they are computed once per uint8 level and looked up (same numpy
    operations, on 256 values instead of every pixel); the 3x3 product and `xyz2lab` are
    scikit-image's own."""
    levels = img_as_float64(np.arange(256, dtype=np.uint8))
    low, high = levels[image.min()], levels[image.max()]
    levels -= low
    if high != low:
        levels /= high - low
    curved = levels > 0.04045  # rgb2xyz's gamma, as scikit-image writes it
    levels[curved] = np.power((levels[curved] + 0.055) / 1.055, 2.4)
    levels[~curved] /= 12.92
    return xyz2lab(levels[image] @ xyz_from_rgb.T.astype(np.float64))


def slic(
    image: np.ndarray, n_segments: int, compactness: float = 10.0, max_num_iter: int = 10
) -> np.ndarray:
    """SLIC labels intp[H, W] from 0 of an RGB image uint8[H, W, 3].

    Equal to `skimage.segmentation.slic(image, n_segments=n_segments, compactness=compactness,
    max_num_iter=max_num_iter, start_label=0, channel_axis=-1)`.
    """
    image = np.asarray(image)
    if image.ndim != 3 or image.shape[-1] != 3:
        raise ValueError(f"image: expected RGB [H, W, 3], got shape {image.shape}")
    if image.dtype != np.uint8:
        raise ValueError(f"image: expected uint8, got {image.dtype}")
    if n_segments < 1:
        raise ValueError(f"n_segments: expected >= 1, got {n_segments}")
    lab = _rgb2lab_uint8(image)[np.newaxis]  # [1, H, W, 3]: scikit-image works on (z, y, x)
    shape = lab.shape[:3]
    grid = regular_grid(shape, n_segments)
    zyx = np.mgrid[: shape[0], : shape[1], : shape[2]]
    centroids = np.stack([axis[grid].ravel() for axis in zyx], axis=-1)
    step = np.float32(max(float(s.step) if s.step is not None else 1.0 for s in grid))
    n_centroids = len(centroids)
    segments = np.concatenate([centroids, np.zeros((n_centroids, 3))], axis=-1)
    segments = np.ascontiguousarray(segments, dtype=np.float64)
    scaled = np.ascontiguousarray(lab * (1.0 / compactness))
    # `_slic_cython` takes its window half-sizes from a grid of as many centroids as it got.
    window = regular_grid(shape, n_centroids)
    step_y, step_x = (int(s.step if s.step is not None else 1) for s in window[1:])
    spatial_weight = 1.0 / float(step * step)  # float32 product, as in the Cython
    labels = _kmeans(
        np.ascontiguousarray(scaled[0].transpose(2, 0, 1)),
        segments, step_y, step_x, spatial_weight, int(max_num_iter),
    )  # fmt: skip
    segment_size = math.prod(shape) / n_centroids
    return _enforce_connectivity(labels, int(0.5 * segment_size), int(3 * segment_size))
