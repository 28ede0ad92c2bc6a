"""How well a clickability map predicts recorded clicks (RClicks `evaluate_click_models.py`).

For one map float[H, W] and the n recorded clicks (xs, ys) of one (image, object, error):
- NSS ↑: mean over the clicks of the map standardised to zero mean and unit std;
- PDE ↑: mean probability (map / its sum) at the clicks;
- PL1 ↓: mean L1 distance between every recorded click and every click sampled from the map,
  x divided by the width and y by the height of `scale`;
- KS ↑: share of bootstrap draws (n clicks sampled from the map) that a two-sample 2-D
  Kolmogorov–Smirnov test (Fasano–Franceschini statistic, Press et al. 2007 §14.8 p-value,
  as `ndtest.ks2d2s`) does not tell from the recorded clicks at p > 0.05;
- WD ↓: mean Wasserstein distance between recorded and sampled clicks divided by the diagonal
  of `scale`.
The reference samples `n_boot` = 100 sets of n clicks and takes `scale` = (width, height) of
the object's bounding box. Sampling uses the numpy Generator `rng`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats

from dig_jax.robustness.rclicks.maps import check_map

N_BOOT = 100


def _clicks(prob_map: np.ndarray, xs: Any, ys: Any) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = np.asarray(xs, np.float64), np.asarray(ys, np.float64)
    if xs.ndim != 1 or xs.shape != ys.shape or xs.size == 0:
        raise ValueError(
            f"xs and ys must be non-empty 1-D of one length, got {xs.shape}, {ys.shape}"
        )
    if not (np.isfinite(xs).all() and np.isfinite(ys).all()):
        raise ValueError("xs, ys contain NaN or inf")
    h, w = prob_map.shape
    cols = np.clip(np.rint(xs), 0, w - 1).astype(int)
    rows = np.clip(np.rint(ys), 0, h - 1).astype(int)
    return cols, rows


def _prob(prob_map: Any) -> np.ndarray:
    p = check_map(prob_map)
    total = p.sum()
    if not total > 0:
        raise ValueError("prob_map has no mass")
    return p / total


def _scale(scale: Any) -> tuple[float, float]:
    w, h = (float(v) for v in scale)
    if not (w > 0 and h > 0):
        raise ValueError(f"scale must be a positive (width, height), got {scale}")
    return w, h


def sample_map(prob_map: Any, n: int, rng: np.random.Generator) -> np.ndarray:
    """n clicks float64[n, 2] as (x, y) drawn ∝ `prob_map` with `rng`."""
    p = _prob(prob_map)
    idx = rng.choice(p.size, size=int(n), p=p.ravel())
    rows, cols = np.unravel_index(idx, p.shape)
    return np.stack([cols, rows], axis=-1).astype(np.float64)


def nss(prob_map: Any, xs: Any, ys: Any) -> float:
    """Normalised scanpath saliency of the clicks (0 for a constant map)."""
    p = check_map(prob_map)
    cols, rows = _clicks(p, xs, ys)
    std = p.std()
    return float(((p[rows, cols] - p.mean()) / std).mean()) if std > 0 else 0.0


def pde(prob_map: Any, xs: Any, ys: Any) -> float:
    """Mean probability density (map / its sum) at the clicks."""
    p = _prob(prob_map)
    cols, rows = _clicks(p, xs, ys)
    return float(p[rows, cols].mean())


def pl1(prob_map: Any, xs: Any, ys: Any, scale: Any, rng: np.random.Generator,
        n_boot: int = N_BOOT) -> float:  # fmt: skip
    """Mean normalised L1 distance between recorded and sampled clicks (see module doc)."""
    w, h = _scale(scale)
    cols, rows = _clicks(check_map(prob_map), xs, ys)
    gt = np.stack([cols / w, rows / h], axis=-1)
    sim = sample_map(prob_map, n_boot * len(gt), rng) / np.array([w, h])
    return float(np.abs(gt[:, None, :] - sim[None, :, :]).sum(-1).mean())


def _quadrants(origin: np.ndarray, pts: np.ndarray) -> np.ndarray:
    """Fractions of `pts` in the four quadrants around each origin, [n_origins, 4]."""
    left = pts[None, :, 0] <= origin[:, None, 0]
    low = pts[None, :, 1] <= origin[:, None, 1]
    a = (left & low).mean(1)
    b = (left & ~low).mean(1)
    c = (~left & low).mean(1)
    return np.stack([a, b, c, 1 - a - b - c], axis=-1)


def _max_dist(p1: np.ndarray, p2: np.ndarray) -> float:
    d = _quadrants(p1, p1) - _quadrants(p1, p2)
    d[:, 0] -= 1 / len(p1)  # the origin counts in its own sample (ndtest's correction)
    return max(-d.min(), d.max() + 1 / len(p1))


def _pearson(p: np.ndarray) -> float:
    if len(p) < 2 or p[:, 0].std() == 0 or p[:, 1].std() == 0:
        return 0.0
    return float(np.corrcoef(p[:, 0], p[:, 1])[0, 1])


def ks2d_pvalue(p1: Any, p2: Any) -> float:
    """Two-sample 2-D KS p-value of point sets [n1, 2] and [n2, 2] (approximate; see doc)."""
    p1, p2 = np.asarray(p1, np.float64), np.asarray(p2, np.float64)
    n1, n2 = len(p1), len(p2)
    d = (_max_dist(p1, p2) + _max_dist(p2, p1)) / 2
    sqen = np.sqrt(n1 * n2 / (n1 + n2))
    r = np.sqrt(1 - 0.5 * (_pearson(p1) ** 2 + _pearson(p2) ** 2))
    return float(stats.kstwobign.sf(d * sqen / (1 + r * (0.25 - 0.75 / sqen))))


def ks(prob_map: Any, xs: Any, ys: Any, rng: np.random.Generator, n_boot: int = N_BOOT) -> float:
    """Share of bootstrap draws not distinguished from the clicks at p > 0.05 (see doc)."""
    cols, rows = _clicks(check_map(prob_map), xs, ys)
    gt = np.stack([cols, rows], axis=-1).astype(np.float64)
    sims = sample_map(prob_map, n_boot * len(gt), rng).reshape(n_boot, len(gt), 2)
    return float(np.mean([ks2d_pvalue(gt, sim) > 0.05 for sim in sims]))


def wasserstein(prob_map: Any, xs: Any, ys: Any, scale: Any, rng: np.random.Generator,
                n_boot: int = N_BOOT) -> float:  # fmt: skip
    """Mean Wasserstein distance between recorded and sampled clicks / diagonal of `scale`."""
    w, h = _scale(scale)
    cols, rows = _clicks(check_map(prob_map), xs, ys)
    gt = np.stack([rows, cols], axis=-1).astype(np.float64)
    sims = sample_map(prob_map, n_boot * len(gt), rng).reshape(n_boot, len(gt), 2)[..., ::-1]
    dists = [stats.wasserstein_distance_nd(sim, gt) for sim in sims]
    return float(np.mean(dists) / np.hypot(w, h))


def map_scores(prob_map: Any, xs: Any, ys: Any, scale: Any, rng: np.random.Generator,
               n_boot: int = N_BOOT) -> dict[str, float]:  # fmt: skip
    """All five scores of one map: nss, pde, pl1, ks, wd."""
    return {
        "nss": nss(prob_map, xs, ys),
        "pde": pde(prob_map, xs, ys),
        "pl1": pl1(prob_map, xs, ys, scale, rng, n_boot),
        "ks": ks(prob_map, xs, ys, rng, n_boot),
        "wd": wasserstein(prob_map, xs, ys, scale, rng, n_boot),
    }
