"""The embedded default data: procedural scenes of textured shapes on textured backgrounds.

Several objects (ellipses, star polygons, rotated rectangles, thin bars) are painted in turn,
so later ones occlude earlier ones and split some of them into parts. Scene `i` of `seed` is
a pure function of (seed, i, size): no files, same bytes every time. Geometry and texture use
separate random streams, so loading the masks does not render the textures.
"""

from __future__ import annotations

import dataclasses

import cv2
import numpy as np

from dig_jax.data.sources.record import Record

_SHIFT = 4  # fractional bits of the polygon vertices given to cv2.fillPoly
_SUBPIXEL = 1 << _SHIFT


def _shape_outline(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    """Outline (row, col) float[N, 2] of one random shape."""
    kind = rng.choice(["ellipse", "star", "rect", "bar"], p=[0.3, 0.3, 0.2, 0.2])
    cy, cx = rng.uniform(0.1, 0.9) * h, rng.uniform(0.1, 0.9) * w
    scale = min(h, w)
    angle = rng.uniform(0, np.pi)
    if kind == "ellipse":
        t = np.linspace(0, 2 * np.pi, 48, endpoint=False)
        a, b = rng.uniform(0.08, 0.28, size=2) * scale
        pts = np.stack([a * np.cos(t), b * np.sin(t)], 1)
    elif kind == "star":
        k = int(rng.integers(5, 12))
        t = np.sort(rng.uniform(0, 2 * np.pi, k))
        r = rng.uniform(0.06, 0.25) * scale * rng.uniform(0.6, 1.0, k)
        pts = np.stack([r * np.cos(t), r * np.sin(t)], 1)
    else:
        half_len = (
            rng.uniform(0.08, 0.25) * scale if kind == "rect" else rng.uniform(0.3, 0.6) * scale
        )
        half_wid = (
            rng.uniform(0.06, 0.2) * scale if kind == "rect" else rng.uniform(0.015, 0.04) * scale
        )
        pts = np.array(
            [
                [-half_len, -half_wid],
                [half_len, -half_wid],
                [half_len, half_wid],
                [-half_len, half_wid],
            ]
        )
    rot = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    pts = pts @ rot.T
    return np.stack([pts[:, 0] + cy, pts[:, 1] + cx], 1)


def scene_labels(seed: int, index: int, size: tuple[int, int], max_objects: int = 6) -> np.ndarray:
    """Paint-order label map int32[H, W]: 0 background, i = i-th painted object (visible part)."""
    h, w = size
    rng = np.random.default_rng([seed, index, 0])
    labels = np.zeros((h, w), np.int32)
    for i in range(1, int(rng.integers(3, max_objects + 1)) + 1):
        outline = _shape_outline(rng, h, w)  # (row, col)
        fixed = np.round(outline[:, ::-1] * _SUBPIXEL).astype(np.int32)  # (x, y), 1/16 px
        cv2.fillPoly(labels, [fixed], i, lineType=cv2.LINE_8, shift=_SHIFT)
    return labels


def _texture(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    """A smooth random texture float32[H, W, 3] in [0, 255]: gratings + blurred noise.

    Computed at half resolution and upsampled bilinearly (its finest period is 25 px)."""
    full = (h, w)
    h, w = max((h + 1) // 2, 1), max((w + 1) // 2, 1)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32) * 2.0
    base = rng.uniform(20, 235, 3).astype(np.float32)
    out = np.broadcast_to(base, (h, w, 3)).copy()
    for _ in range(int(rng.integers(1, 3))):
        freq = rng.uniform(0.02, 0.25)
        theta = rng.uniform(0, np.pi)
        wave = np.sin(freq * (np.cos(theta) * xx + np.sin(theta) * yy) + rng.uniform(0, 6.3))
        out += wave[..., None] * rng.uniform(-40, 40, 3).astype(np.float32)
    small = rng.normal(0, 1, (max(h // 8, 2), max(w // 8, 2), 3)).astype(np.float32)
    out += cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC) * rng.uniform(5, 25)
    return cv2.resize(out, (full[1], full[0]), interpolation=cv2.INTER_LINEAR)


def render_image(seed: int, index: int, size: tuple[int, int], max_objects: int = 6) -> np.ndarray:
    """RGB uint8[H, W, 3] of scene `index`."""
    h, w = size
    labels = scene_labels(seed, index, size, max_objects)
    rng = np.random.default_rng([seed, index, 1])
    image = _texture(rng, h, w)
    for i in range(1, int(labels.max()) + 1):
        rows, cols = np.nonzero(labels == i)
        if rows.size == 0:
            _texture(rng, 2, 2)  # keep the random stream aligned across objects
            continue
        r0, r1, c0, c1 = rows.min(), rows.max() + 1, cols.min(), cols.max() + 1
        tex = _texture(rng, r1 - r0, c1 - c0)
        inside = labels[r0:r1, c0:c1] == i
        image[r0:r1, c0:c1][inside] = tex[inside]
    image += rng.standard_normal(image.shape, dtype=np.float32) * 3.0
    return np.clip(image, 0, 255).astype(np.uint8)


@dataclasses.dataclass(frozen=True)
class _Scene:
    """Scene `index` of `seed` at `size` (a record's lazy image or masks)."""

    seed: int
    index: int
    size: tuple[int, int]
    max_objects: int


class ProceduralImage(_Scene):
    def __call__(self) -> np.ndarray:
        return render_image(self.seed, self.index, self.size, self.max_objects)


class ProceduralMasks(_Scene):
    def __call__(self) -> tuple[np.ndarray, np.ndarray]:
        labels = scene_labels(self.seed, self.index, self.size, self.max_objects)
        ids = [i for i in range(1, int(labels.max()) + 1) if (labels == i).any()]
        instances = np.stack([(labels == i).astype(np.uint8) for i in ids])
        return instances, np.zeros(self.size, np.uint8)


MAX_SIZE = 8192  # px per side of a rendered scene


def procedural(
    seed: int = 0, n: int = 1000, *, size: tuple[int, int] | int = 256, max_objects: int = 6
) -> list[Record]:
    """`n` procedural scene records (ids `"{seed}_{i}"`), 3..`max_objects` objects each.

    Fully occluded objects are left out, so instance ids are known after loading.
    """
    if n < 0:
        raise ValueError(f"n: must be >= 0, got {n}")
    if seed < 0:
        raise ValueError(f"seed: must be >= 0, got {seed}")
    if max_objects < 3:
        raise ValueError(f"max_objects: must be >= 3, got {max_objects}")
    size = (size, size) if isinstance(size, int) else tuple(int(s) for s in size)
    if len(size) != 2 or min(size) < 16 or max(size) > MAX_SIZE:
        raise ValueError(f"size: must be 16..{MAX_SIZE} px per side, got {size}")
    return [
        Record(
            source="procedural",
            image_id=f"{seed}_{i}",
            image=ProceduralImage(seed, i, size, max_objects),
            masks=ProceduralMasks(seed, i, size, max_objects),
            describe=f"procedural(seed={seed}) scene {i}",
        )
        for i in range(n)
    ]
