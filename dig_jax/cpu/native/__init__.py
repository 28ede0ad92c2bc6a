"""CPU kernels XLA lacks, as XLA FFI custom calls built from C++ on first use.

Used only with `DIG_JAX_CPU=native` (`dig_jax.cpu.switch`). `depthwise.cc` holds the depthwise
convolution (forward, input and kernel gradients) that `dig_jax.cpu.depthwise` calls;
`conv.cc` the dense 3x3 convolution's forward pass and kernel gradient that
`dig_jax.cpu.convs` calls (the forward pass also serves the stride-1 input gradient).
The sources are compiled into one library once per machine with the
system C++ compiler (`$CXX`, else `c++`) against the FFI headers jaxlib ships, into
`$DIG_JAX_NATIVE_CACHE` (default `~/.cache/dig_jax/native`), keyed by a hash of the source,
flags, compiler, jaxlib version and CPU; later processes load the library in a few ms.

Where no compiler is found or the build fails, `load_kernels()` returns False after one
warning that says why (once per process), and callers use the pure-XLA path.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

import jax

logger = logging.getLogger(__name__)

SOURCES = (Path(__file__).with_name("depthwise.cc"), Path(__file__).with_name("conv.cc"))
HEADERS = (Path(__file__).with_name("common.h"),)  # included by the sources: in the cache key
CACHE_ENV = "DIG_JAX_NATIVE_CACHE"
FLAGS = ("-O3", "-march=native", "-std=c++17", "-shared", "-fPIC")
TARGETS = {  # FFI target name -> exported symbol
    "dig_jax_depthwise_forward": "DigJaxDepthwiseForward",
    "dig_jax_depthwise_input_grad": "DigJaxDepthwiseInputGrad",
    "dig_jax_depthwise_kernel_grad": "DigJaxDepthwiseKernelGrad",
    "dig_jax_conv_forward": "DigJaxConvForward",
    "dig_jax_conv_kernel_grad": "DigJaxConvKernelGrad",
}


class NativeBuildError(RuntimeError):
    """The C++ kernels could not be compiled or loaded (the message says why)."""


def cache_dir() -> Path:
    """Folder of the compiled libraries (`$DIG_JAX_NATIVE_CACHE` or ~/.cache/dig_jax/native)."""
    default = Path("~/.cache/dig_jax/native").expanduser()
    return Path(os.environ.get(CACHE_ENV, default)).expanduser()


def _compiler() -> str:
    compiler = os.environ.get("CXX", "c++")
    path = shutil.which(compiler)
    if path is None:
        raise NativeBuildError(f"no C++ compiler ({compiler!r} not on PATH; set $CXX)")
    return path


def _cpu_signature() -> str:
    """What -march=native depends on: the CPU's feature flags where Linux lists them."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return line
    except OSError:
        pass
    return platform.processor() or platform.machine()


def library_path(compiler: str) -> Path:
    """Where the library built from the current source with `compiler` lives."""
    version = subprocess.run(
        [compiler, "--version"], capture_output=True, text=True, check=False
    ).stdout
    key = hashlib.sha256()
    sources = [source.read_bytes() for source in (*SOURCES, *HEADERS)]
    for part in (*sources, " ".join(FLAGS).encode(), version.encode(),
                 jax.ffi.include_dir().encode(), jax.__version__.encode(),
                 _cpu_signature().encode()):  # fmt: skip
        key.update(part)
        key.update(b"\0")
    return cache_dir() / f"kernels-{key.hexdigest()[:16]}.so"


def build(compiler: str, target: Path) -> Path:
    """Compile the sources into `target` (atomically: concurrent builds cannot clash)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, scratch = tempfile.mkstemp(suffix=".so", dir=target.parent)
    os.close(fd)
    command = [compiler, *FLAGS, f"-I{jax.ffi.include_dir()}", *map(str, SOURCES), "-o", scratch]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        os.unlink(scratch)
        lines = (result.stderr or result.stdout).strip().splitlines()
        errors = [line for line in lines if "error" in line.lower()]  # not the headers' warnings
        shown = errors[:3] or lines[-3:]
        raise NativeBuildError(f"{Path(compiler).name} failed: {' | '.join(shown)}")
    os.replace(scratch, target)
    return target


@functools.cache
def load_kernels() -> bool:
    """True once the FFI targets (the depthwise kernels and the dense convolution) are
    registered for the CPU (building them if needed); False, after one warning, where they
    cannot be."""
    try:
        compiler = _compiler()
        path = library_path(compiler)
        if not path.is_file():
            logger.info("building the native kernels (once per machine) into %s", path)
            build(compiler, path)
        library = ctypes.cdll.LoadLibrary(str(path))
        for name, symbol in TARGETS.items():
            capsule = jax.ffi.pycapsule(getattr(library, symbol))
            jax.ffi.register_ffi_target(name, capsule, platform="cpu")
    except (NativeBuildError, OSError, AttributeError) as error:
        logger.warning("native kernels (depthwise, 3x3) unavailable, using XLA's: %s", error)
        return False
    return True
