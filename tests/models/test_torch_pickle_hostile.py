"""Hostile PyTorch pickles (issue 43, security): every tensor is bounds-checked against its
storage before it is built; a view past the buffer, a negative stride or a huge size is a
ValueError naming the file, never heap memory or a segfault."""

from __future__ import annotations

import collections
import io
import pickle
import sys
import types
import zipfile

import numpy as np
import pytest

from dig_jax.models.torch_pickle import (
    LEGACY_MAGIC,
    MAX_ELEMENTS,
    load_torch_state_dict,
    tensor_extent,
)


@pytest.fixture
def torch_names(monkeypatch):
    """`torch.FloatStorage` and `torch._utils._rebuild_tensor_v2` stand-ins for pickling."""
    torch, utils = types.ModuleType("torch"), types.ModuleType("torch._utils")

    class FloatStorage:
        pass

    def _rebuild_tensor_v2(*args):
        raise AssertionError("never called while writing")

    FloatStorage.__module__, FloatStorage.__qualname__ = "torch", "FloatStorage"
    _rebuild_tensor_v2.__module__ = "torch._utils"
    _rebuild_tensor_v2.__qualname__ = "_rebuild_tensor_v2"
    torch.FloatStorage, torch._utils, utils._rebuild_tensor_v2 = (
        FloatStorage,
        utils,
        _rebuild_tensor_v2,
    )
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch._utils", utils)
    return torch


class _Ref:
    def __init__(self, key: str, size: int):
        self.key, self.size = key, size


class _Tensor:
    def __init__(self, *args):
        self.args = args

    def __reduce__(self):
        rebuild = sys.modules["torch._utils"]._rebuild_tensor_v2
        return rebuild, (*self.args, False, collections.OrderedDict())


def write_zip(path, torch, tensor_args, storage_floats=4, persistent=None):
    """A zip checkpoint {"w": tensor(*tensor_args)} over one float32 storage "0"."""

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            if isinstance(obj, _Ref):
                return persistent or ("storage", torch.FloatStorage, obj.key, "cpu", obj.size)
            return None

    data = io.BytesIO()
    Pickler(data, protocol=2).dump({"w": _Tensor(_Ref("0", storage_floats), *tensor_args)})
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", data.getvalue())
        archive.writestr("archive/data/0", np.arange(storage_floats, dtype="<f4").tobytes())
    return path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0, (64,), (1,)), "reaches element 64 of storage 0, which holds 4"),  # heap read
        ((0, (10**8,), (1,)), "reaches element 100000000"),  # segfaulted
        ((3, (2,), (1,)), "reaches element 5"),  # offset + extent
        ((0, (2, 2), (0, 4)), "reaches element 5"),  # a stride past the end
        ((0, (2,), (-1,)), "bad tensor layout"),  # negative stride
        ((-1, (1,), (1,)), "bad tensor layout"),  # negative offset
        ((0, (-2,), (1,)), "bad tensor layout"),  # negative size
        ((0, (2, 2), (1,)), "bad tensor layout"),  # stride of another rank
        ((0, (2.5,), (1,)), "bad tensor layout"),  # not integers
        ((0, (1 << 20, 1 << 20), (0, 0)), "more than"),  # a huge broadcast view
    ],
)
def test_tensors_past_their_storage_are_refused(tmp_path, torch_names, args, message):
    path = write_zip(tmp_path / "hostile.pth", torch_names, args)
    with pytest.raises(ValueError, match=rf"hostile\.pth: .*{message}"):
        load_torch_state_dict(path)


def test_in_bounds_views_still_read(tmp_path, torch_names):
    path = write_zip(tmp_path / "ok.pth", torch_names, (1, (3,), (1,)))
    np.testing.assert_array_equal(load_torch_state_dict(path)["w"], [1, 2, 3])
    path = write_zip(tmp_path / "empty.pth", torch_names, (9, (0, 5), (5, 1)))
    assert load_torch_state_dict(path)["w"].shape == (0, 5)
    path = write_zip(tmp_path / "bcast.pth", torch_names, (0, (2, 2), (0, 1)))
    np.testing.assert_array_equal(load_torch_state_dict(path)["w"], [[0, 1], [0, 1]])


def test_storage_of_an_unknown_type_is_refused(tmp_path, torch_names):
    path = write_zip(tmp_path / "odd.pth", torch_names, (0, (1,), (1,)),
                     persistent=("storage", "object", "0", "cpu", 4))  # fmt: skip
    with pytest.raises(ValueError, match=r"odd\.pth: .*unknown storage type"):
        load_torch_state_dict(path)


def test_legacy_storage_with_a_negative_or_huge_count_is_refused(tmp_path):
    stream = io.BytesIO()
    for header in (LEGACY_MAGIC, 1001, {"little_endian": True}, {}, ["0"]):
        pickle.dump(header, stream, protocol=2)
    (tmp_path / "neg.pth").write_bytes(stream.getvalue())  # storage "0" is never declared
    with pytest.raises(ValueError, match=r"neg\.pth"):
        load_torch_state_dict(tmp_path / "neg.pth")


def test_tensor_extent():
    assert tensor_extent(2, (2, 3), (3, 1)) == 8
    assert tensor_extent(5, (0,), (1,)) == 0
    with pytest.raises(ValueError, match="more than"):
        tensor_extent(0, (MAX_ELEMENTS, 2), (0, 0))


def test_a_pickle_nested_too_deep_is_refused(tmp_path):
    stream = io.BytesIO()
    for header in (LEGACY_MAGIC, 1001, {"little_endian": True}):
        pickle.dump(header, stream, protocol=2)
    stream.write(b"(" * 200_000 + b"l" * 200_000 + b".")  # 200,000 nested lists
    (tmp_path / "deep.pth").write_bytes(stream.getvalue())
    with pytest.raises(ValueError, match=r"deep\.pth"):
        load_torch_state_dict(tmp_path / "deep.pth")
