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
