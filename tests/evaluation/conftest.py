"""Fixtures of the evaluation tests: a small benchmark-style folder made here."""

from __future__ import annotations

import cv2
import numpy as np
import pytest


def _photo(rng: np.random.Generator, h: int = 120, w: int = 160) -> np.ndarray:
    """Textured background with two flat-coloured objects (superpixels follow them)."""
    image = rng.integers(0, 60, (h, w, 3)).astype(np.uint8)
    cv2.rectangle(image, (10, 15), (70, 100), (220, 40, 40), -1)
    cv2.circle(image, (120, 60), 28, (40, 200, 60), -1)
    return image


def _masks(h: int = 120, w: int = 160) -> tuple[np.ndarray, np.ndarray]:
    """Instance masks (0 / 255, 128 = void) of the two objects; the first is split in two
    parts by an occluding bar, the second has a void band on its boundary."""
    first = np.zeros((h, w), np.uint8)
    cv2.rectangle(first, (10, 15), (70, 100), 255, -1)
    first[50:58] = 0  # occluder: two parts of the one region
    second = np.zeros((h, w), np.uint8)
    cv2.circle(second, (120, 60), 28, 255, -1)
    band = cv2.circle(np.zeros((h, w), np.uint8), (120, 60), 28, 1, 2) > 0
    second[band] = 128
    return first, second


@pytest.fixture(scope="session")
def bench_folder(tmp_path_factory):
    """A benchmark-style folder of 2 photos, each with a region of two parts (an occluder
    splits it) and a region with a void band."""
    root = tmp_path_factory.mktemp("bench")
    (root / "images").mkdir()
    (root / "masks").mkdir()
    for n in range(2):
        rng = np.random.default_rng(n)
        cv2.imwrite(str(root / "images" / f"p{n}.png"), _photo(rng)[..., ::-1])
        first, second = _masks()
        cv2.imwrite(str(root / "masks" / f"p{n}.png"), first)
        cv2.imwrite(str(root / "masks" / f"p{n}b.png"), second)
    return root
