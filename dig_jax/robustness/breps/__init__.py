"""BREPS: human-plausible adversarial box prompts found by jax.grad, and their metrics."""

from dig_jax.prompts.soft import (
    box_encoder,
    encode_box_context,
    encode_box_context_add,
    encode_box_gesture,
    soft_box_fill,
)
from dig_jax.robustness.breps.attack import (
    AttackResult,
    attack_lr,
    breps_attack,
    breps_attack_batch,
    project_box,
    soft_dice,
)
from dig_jax.robustness.breps.prior import (
    BREPS_GAMMA,
    GAMMA_SCALE,
    GAMMA_SHAPE,
    GammaParams,
    fit_gamma,
    gamma_logpdf,
    realism_logpdf,
)

__all__ = [
    "BREPS_GAMMA",
    "GAMMA_SCALE",
    "GAMMA_SHAPE",
    "AttackResult",
    "GammaParams",
    "attack_lr",
    "box_encoder",
    "breps_attack",
    "breps_attack_batch",
    "encode_box_context",
    "encode_box_context_add",
    "encode_box_gesture",
    "fit_gamma",
    "gamma_logpdf",
    "project_box",
    "realism_logpdf",
    "soft_box_fill",
    "soft_dice",
]
