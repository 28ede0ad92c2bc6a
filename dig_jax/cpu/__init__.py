"""Everything that exists only for speed on the CPU backend, behind one switch (`DIG_JAX_CPU`,
`dig_jax.cpu.switch`). The models, the training loop and `export` use only the names below; with
the switch off, or on any other backend, they are plain Flax / lax / XLA defaults.

- `Conv`, `BatchNorm`, `relu`, `depthwise_conv`, `materialize`: layers with CPU lowerings
  (a 1x1 convolution as a matrix product, cheaper 3x3 weight and input gradients, a lean
  BatchNorm backward pass, depthwise convolutions as fused shifted sums, fusion breaks) and,
  with `DIG_JAX_CPU=native`, C++ kernels for 3x3 and depthwise convolutions (`native/`).
- `train_compiler_options`, `predict_compiler_options`, `init_compiler_options`: XLA flags.
- `release_freed_memory`, `freed_pages_returned`, `prepare_entry_point`: host memory.
docs/speed.md has the measurements behind each piece and the commands that make them.
"""

from dig_jax.cpu.batchnorm import BatchNorm, relu
from dig_jax.cpu.convs import Conv
from dig_jax.cpu.depthwise import depthwise_conv
from dig_jax.cpu.materialize import materialize
from dig_jax.cpu.memory import freed_pages_returned, prepare_entry_point, release_freed_memory
from dig_jax.cpu.switch import SWITCH_ENV, active, reverse_mode_only, setting
from dig_jax.cpu.xla_options import (
    init_compiler_options,
    predict_compiler_options,
    train_compiler_options,
)

__all__ = [
    "SWITCH_ENV",
    "BatchNorm",
    "Conv",
    "active",
    "depthwise_conv",
    "freed_pages_returned",
    "init_compiler_options",
    "materialize",
    "predict_compiler_options",
    "prepare_entry_point",
    "release_freed_memory",
    "relu",
    "reverse_mode_only",
    "setting",
    "train_compiler_options",
]
