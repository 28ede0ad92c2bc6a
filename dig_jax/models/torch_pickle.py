"""Read PyTorch checkpoints with numpy alone (no torch): a restricted unpickler.

Both formats `torch.save` writes are read: the legacy stream (magic number, protocol, system
info, the pickled object, the storage keys, then each storage's raw bytes) and the zip archive
(`archive/data.pkl` + `archive/data/<key>`). Only tensors, OrderedDicts and plain Python values
are rebuilt; any other class in the pickle is refused, so reading a file runs no code from it.
Every tensor is checked against its storage before it is built (sizes and strides >= 0, offset
plus extent within the storage, at most `MAX_ELEMENTS`), so no view reads past a buffer.
"""

from __future__ import annotations

import collections
import io
import pickle
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_STORAGE_DTYPES = {
    "FloatStorage": np.float32,
    "DoubleStorage": np.float64,
    "HalfStorage": np.float16,
    "LongStorage": np.int64,
    "IntStorage": np.int32,
    "ShortStorage": np.int16,
    "CharStorage": np.int8,
    "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
}
MAX_ELEMENTS = 1 << 28  # per tensor or storage: 1 GiB of float32, far above any model here
MAX_DIMS = 8


def _is_count(value: Any) -> bool:
    return type(value) is int and 0 <= value <= MAX_ELEMENTS


def tensor_extent(offset: Any, size: tuple, stride: tuple) -> int:
    """The number of storage elements a tensor view reaches (offset included; 0 when empty).

    ValueError when the offset, sizes or strides are not non-negative integers of one length,
    or the view holds more than `MAX_ELEMENTS` elements."""
    fields = (offset, *size, *stride)
    if len(size) != len(stride) or len(size) > MAX_DIMS or not all(map(_is_count, fields)):
        raise ValueError(
            f"bad tensor layout: offset {offset!r}, size {size!r}, stride {stride!r} (need "
            f"<= {MAX_DIMS} non-negative integer sizes and strides, each <= {MAX_ELEMENTS})"
        )
    if int(np.prod(size, dtype=np.float64)) > MAX_ELEMENTS:
        raise ValueError(f"tensor of size {size} holds more than {MAX_ELEMENTS} elements")
    if 0 in size:
        return 0
    return offset + sum((n - 1) * st for n, st in zip(size, stride, strict=True)) + 1


class _Storage:
    """A placeholder for one torch storage: filled with a flat numpy array after unpickling."""

    def __init__(self, key: str, dtype: Any):
        if not any(dtype is t for t in _STORAGE_DTYPES.values()):
            raise pickle.UnpicklingError(f"storage {key}: unknown storage type {dtype!r}")
        self.key, self.dtype = key, np.dtype(dtype)
        self.array: np.ndarray | None = None


class _Tensor:
    """A tensor waiting for its storage: (storage, offset, size, stride) in elements."""

    def __init__(self, storage: _Storage, offset: int, size: tuple, stride: tuple):
        self.storage, self.offset, self.size, self.stride = storage, offset, size, stride

    def to_numpy(self) -> np.ndarray:
        flat = self.storage.array
        if flat is None:
            raise ValueError(f"storage {self.storage.key} was never read")
        extent = tensor_extent(self.offset, self.size, self.stride)
        if extent > flat.size:
            raise ValueError(
                f"a tensor of size {self.size}, stride {self.stride} at offset {self.offset} "
                f"reaches element {extent} of storage {self.storage.key}, which holds {flat.size}"
            )
        if extent == 0:
            return np.zeros(self.size, flat.dtype)
        item = flat.dtype.itemsize
        view = np.lib.stride_tricks.as_strided(
            flat[self.offset :],
            shape=tuple(self.size),
            strides=tuple(s * item for s in self.stride),
            writeable=False,
        )
        return np.array(view)


def _rebuild_tensor(storage, offset, size, stride, *_):
    if not isinstance(storage, _Storage) or not isinstance(size, (tuple, list)):
        raise pickle.UnpicklingError("a tensor without a storage or a size tuple")
    if not isinstance(stride, (tuple, list)):
        raise pickle.UnpicklingError("a tensor without a stride tuple")
    return _Tensor(storage, offset, tuple(size), tuple(stride))


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, storages: dict[str, _Storage]):
        super().__init__(file)
        self.storages = storages

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if module == "torch._utils" and name in ("_rebuild_tensor", "_rebuild_tensor_v2"):
            return _rebuild_tensor
        if module == "torch" and name in _STORAGE_DTYPES:
            return _STORAGE_DTYPES[name]
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a weights file")

    def persistent_load(self, pid: Any) -> _Storage:
        if not (isinstance(pid, tuple) and pid and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"unexpected persistent id {pid!r}")
        dtype, key = pid[1], str(pid[2])
        if key not in self.storages:
            self.storages[key] = _Storage(key, dtype)
        return self.storages[key]


def _materialise(obj: Any) -> Any:
    if isinstance(obj, _Tensor):
        return obj.to_numpy()
    if isinstance(obj, dict):
        return collections.OrderedDict((k, _materialise(v)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(_materialise(v) for v in obj)
    return obj


def _load_legacy(data: bytes, path: Path) -> Any:
    stream = io.BytesIO(data)
    storages: dict[str, _Storage] = {}
    if _Unpickler(stream, storages).load() != LEGACY_MAGIC:
        raise ValueError(f"{path}: not a PyTorch checkpoint (bad magic number)")
    _Unpickler(stream, storages).load()  # protocol version
    info = _Unpickler(stream, storages).load()
    if isinstance(info, dict) and not info.get("little_endian", True):
        raise ValueError(f"{path}: big-endian checkpoints are not supported")
    obj = _Unpickler(stream, storages).load()
    keys = _Unpickler(stream, storages).load()
    for key in keys:
        storage = storages[str(key)]
        (count,) = np.frombuffer(stream.read(8), "<i8")
        if not 0 <= count <= MAX_ELEMENTS:
            raise ValueError(f"{path}: storage {key} declares {count} elements")
        raw = stream.read(int(count) * storage.dtype.itemsize)
        if len(raw) != int(count) * storage.dtype.itemsize:
            raise ValueError(f"{path}: truncated storage {key}")
        storage.array = np.frombuffer(raw, storage.dtype.newbyteorder("<"))
    return _materialise(obj)


def _load_zip(path: Path) -> Any:
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        pkl = next((n for n in names if n.endswith("/data.pkl")), None)
        if pkl is None:
            raise ValueError(f"{path}: zip file without data.pkl is not a PyTorch checkpoint")
        root = pkl[: -len("data.pkl")]
        storages: dict[str, _Storage] = {}
        obj = _Unpickler(io.BytesIO(archive.read(pkl)), storages).load()
        for key, storage in storages.items():
            info = archive.getinfo(f"{root}data/{key}")
            if info.file_size > MAX_ELEMENTS * storage.dtype.itemsize:
                raise ValueError(f"{path}: storage {key} holds {info.file_size} bytes")
            raw = archive.read(info)
            if len(raw) % storage.dtype.itemsize:
                raise ValueError(f"{path}: storage {key} is not a whole number of elements")
            storage.array = np.frombuffer(raw, storage.dtype.newbyteorder("<"))
    return _materialise(obj)


def load_torch_state_dict(path: str | Path) -> dict[str, np.ndarray]:
    """{name: numpy array} from a `torch.save`d state dict at `path` (legacy or zip format).

    ValueError naming the file when it is missing, truncated, or holds anything but tensors.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"weights file not found: {path}")
    try:
        if zipfile.is_zipfile(path):
            obj = _load_zip(path)
        else:
            obj = _load_legacy(path.read_bytes(), path)
    except (pickle.UnpicklingError, EOFError, KeyError, zipfile.BadZipFile, RecursionError) as err:
        raise ValueError(f"{path}: cannot read PyTorch weights ({err})") from None
    except ValueError as err:
        raise ValueError(f"{path}: {err}".replace(f"{path}: {path}: ", f"{path}: ")) from None
    if not isinstance(obj, dict) or not all(isinstance(v, np.ndarray) for v in obj.values()):
        raise ValueError(f"{path}: expected a state dict of tensors")
    return dict(obj)
