"""`dig_jax._numba.njit`: kernels compile on first call; loading a segmenter imports no numba."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import ndimage
from shared_run import once_per_run

from dig_jax import _numba

# One fresh process for both checks that need one (each start imports jax: seconds on 2
# cores): it imports what predicting needs, says whether numba came with it, then runs a
# kernel (numba compiles and caches it) and says where the cache went.
FRESH_PROCESS = (
    "import os, sys, dig_jax.export, dig_jax.prompts, dig_jax.gestures, dig_jax.data.pipeline\n"
    "print('numba' in sys.modules)\n"
    "import numpy as np\n"
    "from dig_jax import _numba\n"
    "from dig_jax.gestures.edt import squared_edt\n"
    "squared_edt(np.ones((3, 3), bool), 4)\n"
    "print(os.environ['NUMBA_CACHE_DIR'], _numba.sources_stamp())\n"
)


@pytest.fixture(scope="module")
def fresh_process(tmp_path_factory) -> tuple[Path, list[str]]:
    """(its HOME, its output lines) of FRESH_PROCESS run without NUMBA_CACHE_DIR, once per
    test run (pytest-xdist workers share it)."""

    def build(folder: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
        env["HOME"] = str(folder / "home")
        out = subprocess.run(
            [sys.executable, "-c", FRESH_PROCESS], capture_output=True, text=True, env=env
        )
        assert out.returncode == 0, out.stderr
        (folder / "stdout.txt").write_text(out.stdout)

    folder = once_per_run(tmp_path_factory, "lazy_numba", build)
    return folder / "home", (folder / "stdout.txt").read_text().splitlines()


def test_predict_modules_import_no_numba(fresh_process):
    _, lines = fresh_process
    assert lines[0] == "False"


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


def test_cached_kernels_live_in_a_folder_named_by_the_package_sources_stamp(fresh_process):
    """A fresh process caches kernels under ~/.cache/dig_jax/numba/<sources stamp>: a callee
    edited in another module changes the stamp, so no stale caller's machine code is loaded
    (numba's own key, the kernel's bytecode and file stamp, would load it). A NUMBA_CACHE_DIR
    the user set is kept."""
    home, lines = fresh_process
    folder, stamp = lines[1].split()
    assert Path(folder) == home / ".cache" / "dig_jax" / "numba" / stamp
    assert len(stamp) == 16 and any(Path(folder).rglob("*.nbi"))  # numba's cache index files
    # The folder is chosen when numba is imported (before the first kernel compiles).
    code = (
        "import os\n"
        "from dig_jax import _numba\n"
        "_numba._import_numba()\n"
        "print(os.environ['NUMBA_CACHE_DIR'])\n"
    )
    env = {**os.environ, "HOME": str(home), "NUMBA_CACHE_DIR": str(home / "mine")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and out.stdout.split()[0] == str(home / "mine"), out.stderr
