"""XLA compiler options for the segmenters' compiled steps (per compilation, not global).

On CPU, XLA hands convolutions, dots and reductions to the YNNPACK library by default. For a
train step its convolutions are the slow part: YNNPACK runs each weight gradient as a
convolution over transposed copies of both operands; with YNNPACK kept for dots and reductions
only, the HRNet-18s train step ran 1.3-1.4x faster on the 2-core CPU (`benchmarks/vs_torch.py
--plain`; the Lite model's comparisons were noisier, mostly faster). Inference keeps the default:
YNNPACK's forward convolutions are the faster ones. The training loop passes the dict as
`jax.jit(..., compiler_options=train_compiler_options())` (`config.train_xla_options`); other
backends get {} (no change).
"""

from __future__ import annotations

import jax

# YNNPACK fusions for dots and reductions, not for individual convolutions (XLA's default list
# also holds LIBRARY_FUSION_TYPE_INDIVIDUAL_CONVOLUTION).
CPU_TRAIN_OPTIONS = {
    "xla_cpu_experimental_ynn_fusion_type": (
        "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT,LIBRARY_FUSION_TYPE_REDUCE"
    )
}


def train_compiler_options(backend: str | None = None) -> dict[str, str]:
    """Compiler options for a train step on `backend` (default: JAX's default backend)."""
    return dict(CPU_TRAIN_OPTIONS) if (backend or jax.default_backend()) == "cpu" else {}
