"""`dig_jax._numba.njit`: kernels compile on first call; loading a segmenter imports no numba."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
from scipy import ndimage

from dig_jax import _numba


def test_predict_modules_import_no_numba():
    code = (
        "import sys, dig_jax.export, dig_jax.prompts, dig_jax.gestures, dig_jax.data.pipeline\n"
        "print('numba' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr


def test_kernel_and_its_callees_compile_on_first_call():
    namespace: dict = {"_numba": _numba, "np": np}
    exec(  # a module of two kernels, one calling the other
        "@_numba.njit(cache=False)\n"
        "def inner(x):\n    return x * 2\n"
        "@_numba.njit(cache=False)\n"
        "def outer(x):\n    return inner(x) + 1\n",
        namespace,
    )
    assert isinstance(namespace["outer"], _numba._Lazy)
    assert namespace["outer"](np.arange(3)).tolist() == [1, 3, 5]
    assert not isinstance(namespace["inner"], _numba._Lazy)  # compiled as outer's callee
    assert not isinstance(namespace["outer"], _numba._Lazy)


def test_edt_kernel_after_lazy_compile_equals_scipy():
    from dig_jax.gestures.edt import squared_edt

    marked = np.zeros((7, 9), bool)
    marked[3, 4] = marked[0, 8] = True
    want = np.round(ndimage.distance_transform_edt(~marked) ** 2).astype(np.int32)
    np.testing.assert_array_equal(squared_edt(marked, 20), want)


def test_cached_kernels_key_holds_the_package_sources_stamp(tmp_path, monkeypatch):
    """A cached kernel loads from disk while the package's numba sources are unchanged and
    recompiles when they change (a callee edited in another module: numba's own key, the
    kernel's bytecode and file stamp, would load the caller's stale machine code)."""
    import importlib

    (tmp_path / "stamped_kernels.py").write_text(
        "from dig_jax import _numba\n\n\n"
        "@_numba.njit(cache=True)\ndef twice(x):\n    return 2 * x\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))

    def fresh_call() -> tuple[int, int]:
        sys.modules.pop("stamped_kernels", None)
        module = importlib.import_module("stamped_kernels")
        assert module.twice(21) == 42
        stats = module.twice.stats  # the module's name is numba's dispatcher after the call
        return sum(stats.cache_hits.values()), sum(stats.cache_misses.values())

    assert len(_numba.sources_stamp()) == 16
    assert fresh_call() == (0, 1)  # compiled and saved
    assert fresh_call() == (1, 0)  # loaded
    monkeypatch.setattr(_numba, "sources_stamp", lambda: "another-version")
    assert fresh_call() == (0, 1)  # the sources changed: compiled again, not loaded
    sys.modules.pop("stamped_kernels", None)
