"""Realism checks: MALA samples from the box realism density, a multivariate two-sample test,
and correlations between box quality and segmentation quality.

Realism density over boxes, for valid boxes inside the image (0 elsewhere), unnormalised:
    π(b) ∝ Gamma(c; k, θ) / c³,   c = CIoU(b, tight)     (default, `volume=True`)
The 1/c³ factor undoes the 4-D volume of the CIoU level sets, so the CIoU of the samples follows
the fitted Gamma law of real user boxes (exactly in the small-offset limit); `volume=False`
samples the attack's prior term Gamma(c) itself as a density over coordinates, which favours
larger offsets. Compare samples with real boxes using `energy_test`. MALA runs in coordinates
normalised by the tight box (u = (b − centre) / √(w·h)).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats
from scipy.spatial.distance import cdist

from dig_jax.metrics import ciou_loss
from dig_jax.robustness.breps.attack import full_bounds
from dig_jax.robustness.breps.prior import BREPS_GAMMA, GammaParams, gamma_logpdf

TARGET_ACCEPT = 0.574  # optimal MALA acceptance rate (Roberts & Rosenthal, 1998)


class MalaResult(NamedTuple):
    """samples f32[chains, n, 4] (px boxes), accept_rate f32[chains], step f32[chains] (final
    step size in normalised units, after burn-in adaptation)."""

    samples: jax.Array
    accept_rate: jax.Array
    step: jax.Array


def box_log_density(
    box: jax.Array, tight: jax.Array, bounds: jax.Array, prior: GammaParams, volume: bool = True
) -> Any:
    """log π(box) (unnormalised); -inf for inverted boxes, boxes outside `bounds` ((W, H) or
    (x_lo, y_lo, x_hi, y_hi)) or the tight box itself. Finite gradient everywhere.

    volume=False: π(b) ∝ Gamma(c), c = CIoU(b, tight). volume=True: π(b) ∝ Gamma(c) / c³, the
    change of variables that makes c itself Gamma distributed while c is small (c is then
    ≈ positively homogeneous of degree 1 in the 4-D offset b − tight, so the boxes at level c
    fill a volume ∝ c³ dc).
    """
    b = full_bounds(bounds)
    valid = (box[0] < box[2]) & (box[1] < box[3]) & (box[0] >= b[0]) & (box[1] >= b[1])
    valid &= (box[2] <= b[2]) & (box[3] <= b[3])
    safe = jnp.where(valid, box, tight + jnp.array([-1.0, -1.0, 1.0, 1.0]))
    c = ciou_loss(safe, tight)
    positive = c > 0
    c_safe = jnp.where(positive, c, 1.0)
    logp = gamma_logpdf(c_safe, prior.shape, prior.scale)
    if volume:
        logp = logp - 3.0 * jnp.log(c_safe)
    return jnp.where(valid & positive, logp, -jnp.inf)


def _chain(key, tight, bounds, prior, n, burn_in, step, thin, volume, radius):
    centre = jnp.tile((tight[:2] + tight[2:]) / 2, 2)
    scale = jnp.sqrt(jnp.maximum((tight[2] - tight[0]) * (tight[3] - tight[1]), 1.0))
    u_tight = (tight - centre) / scale

    def log_pi(u):
        inside = jnp.all(jnp.abs(u - u_tight) <= radius)
        return jnp.where(
            inside, box_log_density(centre + scale * u, tight, bounds, prior, volume), -jnp.inf
        )

    value_grad = jax.value_and_grad(log_pi)

    def log_q(to, frm, grad_frm, eps):
        return -jnp.sum(jnp.square(to - frm - eps * grad_frm)) / (4 * eps)

    def one(carry, inputs):
        u, lp, g, log_eps = carry
        k, adapt = inputs
        k_prop, k_acc = jax.random.split(k)
        eps = jnp.exp(log_eps)
        prop = u + eps * g + jnp.sqrt(2 * eps) * jax.random.normal(k_prop, u.shape)
        lp_p, g_p = value_grad(prop)
        g_p = jnp.nan_to_num(g_p, nan=0.0, posinf=0.0, neginf=0.0)
        log_ratio = lp_p - lp + log_q(u, prop, g_p, eps) - log_q(prop, u, g, eps)
        log_ratio = jnp.where(jnp.isnan(log_ratio), -jnp.inf, log_ratio)
        accept = jnp.log(jax.random.uniform(k_acc)) < log_ratio
        prob = jnp.exp(jnp.minimum(log_ratio, 0.0))
        log_eps = log_eps + adapt * 0.05 * (prob - TARGET_ACCEPT)
        u, lp, g = (jnp.where(accept, a, b) for a, b in ((prop, u), (lp_p, lp), (g_p, g)))
        return (u, lp, g, log_eps), (u, accept)

    k_init, k_run = jax.random.split(key)
    u0 = (tight - centre) / scale + 0.05 * jax.random.normal(k_init, (4,))
    lp0, g0 = value_grad(u0)
    total = burn_in + n * thin
    adapt = (jnp.arange(total) < burn_in).astype(jnp.float32)
    carry = (u0, lp0, jnp.nan_to_num(g0), jnp.log(jnp.float32(step)))
    (_, _, _, log_eps), (us, accepts) = jax.lax.scan(
        one, carry, (jax.random.split(k_run, total), adapt)
    )
    kept = us[burn_in::thin]
    return centre + scale * kept, accepts[burn_in:].mean(), jnp.exp(log_eps)


_run_chains = jax.jit(
    jax.vmap(_chain, in_axes=(0, None, None, None, None, None, None, None, None, None)),
    static_argnums=(3, 4, 5, 7, 8),
)


def mala_boxes(
    key: jax.Array,
    tight: Any,
    bounds: Any,
    *,
    n: int = 1000,
    chains: int = 4,
    burn_in: int = 500,
    thin: int = 2,
    step: float = 5e-4,
    prior: GammaParams = BREPS_GAMMA,
    volume: bool = True,
    radius: float = 0.5,
) -> MalaResult:
    """Sample boxes around `tight` (f32[4], px) inside `bounds` (W, H) from π with MALA.

    `step` (normalised units²) is adapted during `burn_in` towards 57.4 % acceptance, then held
    fixed; every `thin`-th state is kept. `volume`: see `box_log_density` (True: the CIoU of
    the samples follows the prior's Gamma law for small offsets). Same key ⇒ same samples.
    """
    if min(n, chains, thin) < 1 or burn_in < 0 or step <= 0:
        raise ValueError("n, chains, thin must be >= 1, burn_in >= 0 and step > 0")
    tight = jnp.asarray(tight, jnp.float32)
    if tight.shape != (4,) or not bool(tight[2] > tight[0]) or not bool(tight[3] > tight[1]):
        raise ValueError(f"tight must be a box f32[4] with x1 < x2, y1 < y2, got {tight}")
    bounds = jnp.asarray(bounds, jnp.float32)
    samples, rate, eps = _run_chains(
        jax.random.split(key, chains),
        tight,
        bounds,
        GammaParams(*prior),
        n,
        burn_in,
        step,
        thin,
        bool(volume),
        jnp.float32(radius),
    )
    return MalaResult(samples, rate, eps)


def box_features(boxes: Any, tight: Any) -> np.ndarray:
    """Boxes [..., 4] as offsets from `tight` divided by √(w·h) of the tight box, so boxes
    around objects of different sizes are comparable in a two-sample test."""
    boxes, tight = np.asarray(boxes, np.float64), np.asarray(tight, np.float64)
    scale = np.sqrt(max((tight[2] - tight[0]) * (tight[3] - tight[1]), 1.0))
    return (boxes - tight) / scale


def energy_test(
    x: Any, y: Any, rng: np.random.Generator, permutations: int = 999
) -> tuple[float, float]:
    """Multivariate energy-distance two-sample test (Székely & Rizzo) with a permutation p-value.

    x [n, d], y [m, d]. Returns (energy distance 2E|X−Y| − E|X−X'| − E|Y−Y'|, p-value
    (1 + #{perm >= observed}) / (1 + permutations)).
    """
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1]:
        raise ValueError(f"x and y must be [n, d] with the same d, got {x.shape}, {y.shape}")
    if len(x) < 2 or len(y) < 2:
        raise ValueError("x and y need at least 2 samples each")
    d = cdist(np.concatenate([x, y]), np.concatenate([x, y]))
    n = len(x)

    def stat(idx: np.ndarray) -> float:
        a, b = idx[:n], idx[n:]
        return 2 * d[np.ix_(a, b)].mean() - d[np.ix_(a, a)].mean() - d[np.ix_(b, b)].mean()

    observed = stat(np.arange(len(d)))
    null = np.array([stat(rng.permutation(len(d))) for _ in range(permutations)])
    return float(observed), float((1 + np.sum(null >= observed)) / (1 + permutations))


def quality_correlations(box_quality: Any, seg_iou: Any) -> dict[str, float]:
    """Spearman and Pearson correlation (scipy) between box quality (e.g. box IoU or −CIoU to
    the tight box) and segmentation IoU, each [N]: dict(spearman, spearman_p, pearson,
    pearson_p, n). NaN correlations when an input is constant."""
    q, s = np.asarray(box_quality, np.float64).ravel(), np.asarray(seg_iou, np.float64).ravel()
    if q.shape != s.shape or q.size < 3:
        raise ValueError(
            f"box_quality and seg_iou need the same length >= 3, got {q.size}, {s.size}"
        )
    if not (np.isfinite(q).all() and np.isfinite(s).all()):
        raise ValueError("box_quality and seg_iou must be finite")
    if np.ptp(q) == 0 or np.ptp(s) == 0:
        nan = float("nan")
        return {"spearman": nan, "spearman_p": nan, "pearson": nan, "pearson_p": nan, "n": q.size}
    sp, pe = stats.spearmanr(q, s), stats.pearsonr(q, s)
    return {
        "spearman": float(sp.statistic),
        "spearman_p": float(sp.pvalue),
        "pearson": float(pe.statistic),
        "pearson_p": float(pe.pvalue),
        "n": int(q.size),
    }
