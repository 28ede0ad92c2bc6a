"""A TFDS builder that packs a static DIG build into ArrayRecord files (no TensorFlow needed).

    python -m dig_jax.data.build --source grabcut --out build/grabcut
    builder = DigSamples(build_dir="build/grabcut", data_dir="build/tfds")
    builder.download_and_prepare()            # writes dig_samples/1.1.0/*.array_record
    source = builder.as_data_source()["train"]  # random access, a grain MapDataset source

Every example is one sample dict of the contract (masks as zlib-compressed uint8 Tensors);
`distance` is not stored but recomputed by `tfds_sample`. Split "train" holds the samples,
split "multi" their multi-region variants (DIG's dataAug), which the dataset's metadata
(`multi_index`: per train example, its variant's index or -1) ties to their samples; the
pipeline reads such a folder with the source spec "tfds:DATA_DIR" and, like DIG JSON, swaps a
creation sample for its variant with probability `multi_region_prob` (not every variant every
time). A build whose global GT is unknown (DIG JSON without `obj_gt`) is refused.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import ClassVar

import numpy as np
import tensorflow_datasets as tfds
from tensorflow_datasets.core import writer as writer_lib
from tensorflow_datasets.proto import tf_example_pb2

from dig_jax.data.samples import SAMPLE_KEYS, Sample, distance_uint8
from dig_jax.data.sources.dig_json import DigEntry, dig_json

_MASKS = ("gesture", "prev_mask", "target", "region", "local", "void")


class DigSamples(tfds.core.GeneratorBasedBuilder):
    """DIG samples from a `dig_jax.data.build` output folder (`dig.json` + `images/`)."""

    VERSION = tfds.core.Version("1.2.0")
    RELEASE_NOTES: ClassVar[dict[str, str]] = {
        "1.0.0": "Samples of dig_jax.data.build.",
        "1.1.0": "Local GT (`local`) and dataset void (`void`) for scoring.",
        "1.2.0": "Multi-region variants in split `multi`, tied by metadata `multi_index`.",
    }

    def __init__(self, *, build_dir: str | Path | None = None, **kwargs):
        self._build_dir = None if build_dir is None else Path(build_dir)
        kwargs.setdefault("file_format", "array_record")
        super().__init__(**kwargs)

    def _info(self) -> tfds.core.DatasetInfo:
        mask = functools.partial(tfds.features.Tensor, shape=(None, None), dtype=np.uint8,
                                 encoding="zlib")  # fmt: skip
        features = {key: mask() for key in _MASKS}
        features["image"] = tfds.features.Tensor(
            shape=(None, None, 3), dtype=np.uint8, encoding="zlib"
        )
        features["gesture_kind"] = tfds.features.Scalar(dtype=np.int32)
        features["context"] = tfds.features.Scalar(dtype=np.int32)
        features["has_prev"] = tfds.features.Scalar(dtype=np.bool_)
        features["image_id"] = tfds.features.Text()
        features["instance_id"] = tfds.features.Scalar(dtype=np.int32)
        return self.dataset_info_from_configs(
            features=tfds.features.FeaturesDict(features), disable_shuffling=True,
            metadata=tfds.core.MetadataDict(),
        )  # fmt: skip

    def _example_writer(self) -> writer_lib.ExampleWriter:
        return SortedFeaturesWriter(file_format=self.info.file_format)

    def _split_generators(self, dl_manager):
        del dl_manager
        if self._build_dir is None or not (self._build_dir / "dig.json").is_file():
            raise ValueError(f"build_dir: no dig.json in {self._build_dir}")
        entries = dig_json(self._build_dir / "dig.json", self._build_dir / "images")
        samples = [e for e in entries if not e.multi]
        variants = [e for e in entries if e.multi]
        where = {(id(e.row), e.index): k for k, e in enumerate(variants)}
        self.info.metadata["multi_index"] = [where.get((id(e.row), e.index), -1) for e in samples]
        splits = {"train": self._generate_examples(samples)}
        if variants:
            splits["multi"] = self._generate_examples(variants)
        return splits

    def _generate_examples(self, entries: list):
        for k, entry in enumerate(entries):
            yield k, dig_example(entry)


class SortedFeaturesWriter(writer_lib.ExampleWriter):
    """Writes every example with its features in name order. TFDS serialises a
    `tf.train.Example` whose feature map protobuf writes in an order that changes from process
    to process, so the same example would be different bytes in two runs (or Beam workers);
    re-serialised deterministically it is the same bytes, read back the same."""

    def write(self, path, examples):
        return super().write(path, ((key, _sorted_features(ex)) for key, ex in examples))


def _sorted_features(serialized: bytes) -> bytes:
    example = tf_example_pb2.Example.FromString(serialized)
    return example.SerializeToString(deterministic=True)


def dig_example(entry: DigEntry, image: np.ndarray | None = None) -> dict:
    """The DigSamples example of a DIG JSON sample: the sample dict without `distance`
    (`image`: the photo already in memory, else read from the entry's path); ValueError for a
    sample whose global GT is unknown."""
    sample = entry.load(image)
    if "has_region" in sample:
        raise ValueError(f"{entry.name}: no global GT (obj_gt); not a dig_jax build")
    sample.pop("distance")
    return sample


def tfds_sample(example: dict) -> Sample:
    """A decoded TFDS example -> the sample dict (str image_id, distance recomputed)."""
    out = dict(example)
    image_id = out["image_id"]
    out["image_id"] = image_id.decode() if isinstance(image_id, bytes) else str(image_id)
    out["distance"] = distance_uint8(np.asarray(out["gesture"]))
    return {key: out[key] for key in SAMPLE_KEYS}


@functools.lru_cache(maxsize=8)
def _builder(data_dir: str):
    return tfds.builder("dig_samples", data_dir=data_dir)


@functools.lru_cache(maxsize=8)
def _data_source(data_dir: str, split: str):
    return _builder(data_dir).as_data_source()[split]


@dataclasses.dataclass(frozen=True)
class TfdsEntry:
    """A picklable reference to example `index` of a prepared DigSamples split; like a
    `DigEntry`, it knows its multi-region variant (`multi_index` in split "multi", -1: none)."""

    data_dir: str
    split: str
    index: int
    multi_index: int = -1

    def load(self) -> Sample:
        return tfds_sample(_data_source(self.data_dir, self.split)[self.index])

    @property
    def multi(self) -> bool:
        """True for a multi-region variant."""
        return self.split == "multi"

    @property
    def has_multi(self) -> bool:
        return self.multi_index >= 0

    @property
    def is_creation(self) -> bool:
        """True for the samples that have a variant (only creation samples have one)."""
        return self.has_multi

    def multi_variant(self) -> TfdsEntry:
        """This sample's multi-region variant (DIG's dataAug)."""
        if not self.has_multi:
            raise ValueError(f"{self.data_dir} #{self.index}: no multi-region variant")
        return TfdsEntry(self.data_dir, "multi", self.multi_index)


def tfds_entries(data_dir: str | Path, split: str = "train") -> list[TfdsEntry]:
    """References to every example of a split ("train": the samples, each knowing its
    multi-region variant) of a prepared DigSamples dataset under `data_dir`."""
    if not (Path(data_dir) / "dig_samples").is_dir():
        raise ValueError(f"data_dir: no prepared dig_samples dataset under {data_dir}")
    n = len(_data_source(str(data_dir), split))
    index = _builder(str(data_dir)).info.metadata.get("multi_index", []) if split == "train" else []
    multi = [int(m) for m in index] if len(index) == n else [-1] * n
    return [TfdsEntry(str(data_dir), split, i, multi[i]) for i in range(n)]
