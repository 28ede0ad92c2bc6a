"""Realism prior of BREPS: a Gamma law on the CIoU loss between a user box and the tight box.

BREPS fitted a Gamma(shape k, scale θ, location 0) to the CIoU losses of 25,000 boxes drawn by
people around objects; `realism_logpdf` evaluates it (jnp, differentiable), `fit_gamma` refits
it by maximum likelihood on your own boxes.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln
from scipy import optimize, special

from dig_jax.metrics import ciou_loss

GAMMA_SHAPE = 1.7891955953866256  # k, fitted by BREPS on 25,000 real user boxes
GAMMA_SCALE = 0.12104836378138935  # θ
CIOU_EPS = 1e-7  # CIoU losses at or below this count as "equal to the tight box"


class GammaParams(NamedTuple):
    """Gamma law with location 0: density x^(k-1) e^(-x/θ) / (Γ(k) θ^k) on x > 0."""

    shape: float
    scale: float


BREPS_GAMMA = GammaParams(GAMMA_SHAPE, GAMMA_SCALE)


def gamma_logpdf(x: Any, shape: float = GAMMA_SHAPE, scale: float = GAMMA_SCALE) -> Any:
    """Log-density of Gamma(shape, scale, loc 0) at `x` (jnp, broadcasting); -inf for x <= 0.

    Gradients are finite everywhere (the x <= 0 branch is computed on a safe argument).
    """
    x = jnp.asarray(x, jnp.float32)
    positive = x > 0
    safe = jnp.where(positive, x, 1.0)
    value = (shape - 1) * jnp.log(safe) - safe / scale - gammaln(shape) - shape * jnp.log(scale)
    return jnp.where(positive, value, -jnp.inf)


def realism_logpdf(
    box: Any, tight: Any, params: GammaParams = BREPS_GAMMA, *, skip_exact: bool = False
) -> Any:
    """log p(CIoU(box, tight)) under the Gamma realism prior; boxes `[..., 4]` (pixel edges).

    With `skip_exact=True` the value is 0 (instead of -inf, as k > 1) where the CIoU loss is
    <= CIOU_EPS, i.e. for the tight box itself: the attack's convention "prior term skipped".
    """
    c = ciou_loss(jnp.asarray(box, jnp.float32), jnp.asarray(tight, jnp.float32))
    logp = gamma_logpdf(c, params.shape, params.scale)
    if skip_exact:
        logp = jnp.where(c > CIOU_EPS, logp, 0.0)
    return logp


def fit_gamma(ciou_losses: Any) -> GammaParams:
    """Maximum-likelihood Gamma(shape, scale, loc 0) fit to positive CIoU losses `[N]`.

    Solves the profile-likelihood equation log k − ψ(k) = log(mean x) − mean(log x) with
    Brent's method, then θ = mean x / k (the same optimum as `scipy.stats.gamma.fit(x, floc=0)`).
    """
    x = np.asarray(ciou_losses, dtype=np.float64).ravel()
    if x.size < 2:
        raise ValueError(f"ciou_losses needs at least 2 values, got {x.size}")
    if not np.isfinite(x).all() or (x <= 0).any():
        raise ValueError("ciou_losses must be finite and > 0 (drop exact tight boxes first)")
    s = np.log(x.mean()) - np.log(x).mean()
    if s <= 0:
        raise ValueError("ciou_losses are all equal: the Gamma shape is unbounded")
    f = lambda k: np.log(k) - special.digamma(k) - s
    lo, hi = 1e-8, 1.0
    while f(hi) > 0:  # f decreases from +inf to 0 as k grows
        hi *= 2.0
    shape = optimize.brentq(f, lo, hi, xtol=1e-14, rtol=1e-12, maxiter=500)
    return GammaParams(float(shape), float(x.mean() / shape))
