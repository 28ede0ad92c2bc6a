"""XLA compiler options for the segmenters' compiled steps (per compilation, not global).

On CPU, XLA hands convolutions, dots and reductions to the YNNPACK library by default. For a
train step its convolutions are the slow part: YNNPACK runs each weight gradient as a
convolution over transposed copies of both operands; with YNNPACK kept for dots and reductions
only, the HRNet-18s train step ran 1.3-1.4x faster on the 2-core CPU (`benchmarks/vs_torch.py
--plain`; the Lite model's comparisons were noisier, mostly faster). Once the 1x1 convolutions
became matrix products (`dig_jax.cpu.convs`), keeping YNNPACK for reductions only was faster
again: train steps (batch 8 at 256², one process, 5 interleaved calls) HRNet-18s 871 -> 820 ms,
the Lite segmenter 601 -> 575 and 621 -> 581 ms; forward passes equal or faster in all five
cases measured (Lite at 224² 9.5 -> 8.5 ms). The training loop passes the
dict as `jax.jit(..., compiler_options=train_compiler_options())`.

Inference uses the same options (`predict_compiler_options`): with the 1x1 convolutions as
matrix products (`dig_jax.cpu.convs`), XLA's own convolutions beat YNNPACK's in the forward
pass too — the shipped Lite checkpoint at its 224² working size 10.5 -> 8.4 ms per prediction,
the HRNet one at 160² 12.0 -> 10.5 ms, the Lite0 segmenter at batch 8 x 256² 1.27x; HRNet-18s
at batch 1 x 512² was the one case on par (149 vs 155 ms). Other backends get {} (no change).

Train steps also use XLA's concurrency-optimized scheduler. Alternating A/B in one process
(8 calls each, 2026-12-01): HRNet-18s batch 8 x 256² 1729 -> 1703 ms, batch 2 x 512² 2177 ->
2078 ms, the Lite segmenter batch 8 x 256² 1353 -> 1268 ms; the same XLA temporaries and
steady RSS. Forward passes moved within ±3 % either way (four cases), so inference keeps the
plain options.

Initialisation (`init_compiler_options`) compiles with LLVM at -O1: the program is a few
hundred unrolled threefry draws whose machine-code optimisation is most of its compile time,
and it runs once. The tiny HRNet's init compiled in 12.5 s instead of 33.1 s, the demo Lite
segmenter's in 18.7 s instead of 23.0 s (2026-12-03, one cold process each). The values are the
default compile's to a few ulp (the random bits are exact; the normal draws' inverse error function
may round differently; the two models above had the same bits in every leaf, a small test model
15 of 432 kernel values up to 3 ulp apart, 2e-7 relative; tests/models/test_xla_options.py).
"""

from __future__ import annotations

from dig_jax.cpu import switch

# YNNPACK fusions for reductions only (XLA's default list also holds
# LIBRARY_FUSION_TYPE_INDIVIDUAL_CONVOLUTION and LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT).
CPU_PREDICT_OPTIONS = {"xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_REDUCE"}
# Train steps also schedule for concurrency: independent thunks (HRNet's parallel branches, the
# weight and input gradients of one layer) run side by side on the two cores.
CPU_TRAIN_OPTIONS = {**CPU_PREDICT_OPTIONS, "xla_cpu_enable_concurrency_optimized_scheduler": True}


# LLVM -O1 for the one-off init program (values to a few ulp, tested; -O0 is not safe: it turned a
# finite soft-rasteriser gradient into NaN in a test).
CPU_INIT_OPTIONS = {"xla_backend_optimization_level": 1}


def init_compiler_options(backend: str | None = None) -> dict[str, int]:
    """Compiler options for a model's (and optimizer's) initialisation on `backend`."""
    return dict(CPU_INIT_OPTIONS) if switch.active(backend) else {}


def train_compiler_options(backend: str | None = None) -> dict[str, str | bool]:
    """Compiler options for a train step on `backend` (default: JAX's default backend)."""
    return dict(CPU_TRAIN_OPTIONS) if switch.active(backend) else {}


def predict_compiler_options(backend: str | None = None) -> dict[str, str | bool]:
    """Compiler options for inference (forward passes) on `backend`."""
    return dict(CPU_PREDICT_OPTIONS) if switch.active(backend) else {}
