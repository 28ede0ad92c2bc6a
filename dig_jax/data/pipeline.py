"""The on-the-fly input pipeline (grain): records -> samples -> resize -> dataAug -> batches.

    ds = make_dataset(dict(sources=["procedural:2000"], image_size=256, batch_size=8), "train")
    it = iter(ds); batch = next(it); state = it.get_state()  # checkpointable position

Order of operations per element (a `Record`, or a static `DigEntry` / `TfdsEntry`):
1. load the image and masks at the photo's own size, shrunk when its long side exceeds
   `max_side` (the resize policy, `dig_jax.data.resize`);
2. draw a sample *at that size* — regions/parts (>= 300 px), with probability `prior_prob` a
   refinement of a synthetic prior, gesture simulated and rasterised with the 5 px brush on the
   photo, as a person would draw it; static DIG entries are used as built;
3. with probability `multi_region_prob` another disjoint region joins the previous mask and GT
   (records only: static samples are used as built, multi-region variants included);
4. zoom in exactly as `predict` does (`dig_jax.prompts`): the prompt's zoom box (with scale /
   shift noise and a random horizontal flip in training) is resampled to `image_size`²
   and the distance map computed there;
5. batch (a leading axis on every field).
Bad items never stop the pipeline: a record or entry whose loading or sampling raises ValueError
(every source reports a corrupt file or field that way), and a row a JSON source cannot list,
is logged, skipped and counted (`bad_item_count()`, per process: grain worker processes keep
their own counts). Records without a usable region yield nothing (not counted as bad).
A source whose first `max_failures` tries (default 200) all fail, either way, stops the
pipeline with `NoValidSampleError` naming the source and its first reasons, instead of
skipping forever (each grain worker process counts its own tries).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import grain
import numpy as np

from dig_jax.data.priors import COARSE_OVER
from dig_jax.data.resize import resize_image, resize_labels
from dig_jax.data.samples import ALL_KINDS, Sample, distance_uint8, random_sample
from dig_jax.data.sources.benchmark_folder import benchmark_folder
from dig_jax.data.sources.bsds_regions import bsds_regions
from dig_jax.data.sources.camvid import camvid
from dig_jax.data.sources.clothing_parsing import clothing_co_parsing
from dig_jax.data.sources.coco_json import scan_coco_json
from dig_jax.data.sources.dig_json import DigEntry, scan_dig_json
from dig_jax.data.sources.procedural import procedural
from dig_jax.data.sources.record import Record, shrink_loaded
from dig_jax.data.sources.yolo_polygons import yolo_polygons
from dig_jax.paths import dataset_dir
from dig_jax.prompts import zoom_sample

log = logging.getLogger(__name__)
_bad_items = [0]
_bad_items_lock = threading.Lock()


def report_bad_item(message: str) -> None:
    """Log a skipped bad item and count it (see `bad_item_count`)."""
    with _bad_items_lock:
        _bad_items[0] += 1
    log.warning("skipping bad item: %s", message)


def bad_item_count() -> int:
    """Bad items skipped so far in this process (unlistable rows, failed loads or samples)."""
    with _bad_items_lock:
        return _bad_items[0]


class NoValidSampleError(ValueError):
    """A source gave no valid sample in its first `max_failures` tries."""


# (transform token, source name) -> [failed tries, any success, first reasons]; per process.
_source_health: dict[tuple[str, str], list] = {}
MAX_REASONS = 3


def _source_name(element: Any) -> str:
    if isinstance(element, Record):
        return element.source
    return getattr(element, "json_path", "") or type(element).__name__


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    """Arguments of `make_dataset`.

    sources: list of source specs (see `resolve_source`) or lists of Record / DigEntry objects.
    image_size: output side in px (int) or (H, W).
    batch_size: samples per batch.
    prior_prob: probability that a sample refines a previous segmentation.
    multi_region_prob: probability of the dataAug multi-region augmentation.
    seed: seeds the shuffle and every per-sample random draw.
    worker_count: grain worker processes (0 = in the calling process).
    read_threads: threads per process that make samples ahead (0 = on demand); the
      look-ahead buffer holds 2 * batch_size samples.
    shard: (index, count) of this host; None = (jax.process_index(), jax.process_count()).
    num_epochs: passes over the data (None = forever; eval splits use 1).
    kinds: gesture kinds to draw from (codes 0..4).
    max_side: photos whose long side exceeds this (px) are shrunk to it before sampling
      (None = the photo's own size).
    max_failures: a source whose first this-many tries all fail (bad file, no usable region)
      raises NoValidSampleError (0 = skip forever).
    leak_prob: probability that a synthetic prior also holds another region of the photo, which
      the sample's REMOVE gesture corrects (`dig_jax.data.samples.leak_prior`; records only).
    leak_kinds: gesture kinds (codes 0..4) whose samples may get a leaky prior (e.g. (0,): only
      corrections made with a click, so that no lasso learns "remove" from a leak).
    coarse_prob: probability that a prior is a badly wrong one (a small piece of the region,
      or the region with a blob of background) whose largest error the sample corrects
      (`dig_jax.data.priors.coarse_prior`; records only).
    coarse_kinds: gesture kinds (codes 0..4) whose samples may get a coarse prior (e.g. (0,):
      only corrections made with a click).
    coarse_over: (low, high) background an over-segmenting coarse prior takes in, as a share
      of the region's area (drawn uniformly; the default's first masks are 1.3-2.5x the object).
    focus_prob: probability that a training creation click is cropped around its target, as
      `predict`'s focus pass sees it (`dig_jax.prompts.focus_box`), not the whole image.
    paper_mode: the DIG paper's input: the whole photo resized to `image_size`², no zoom-in
      crop (`dig_jax.prompts.paper_box`); evaluate such a model with `--paper-mode`.
    """

    sources: tuple = ("procedural",)
    image_size: int | tuple[int, int] = 256
    batch_size: int = 8
    prior_prob: float = 0.5
    multi_region_prob: float = 0.0
    seed: int = 0
    worker_count: int = 0
    read_threads: int = 0
    shard: tuple[int, int] | None = None
    num_epochs: int | None = None
    kinds: tuple[int, ...] = tuple(int(k) for k in ALL_KINDS)
    max_side: int | None = 640
    max_failures: int = 200
    focus_prob: float = 0.0
    paper_mode: bool = False
    leak_prob: float = 0.0
    leak_kinds: tuple[int, ...] = tuple(int(k) for k in ALL_KINDS)
    coarse_prob: float = 0.0
    coarse_kinds: tuple[int, ...] = tuple(int(k) for k in ALL_KINDS)
    coarse_over: tuple[float, float] = COARSE_OVER

    def __post_init__(self) -> None:
        for name in ("prior_prob", "multi_region_prob", "focus_prob", "leak_prob", "coarse_prob"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name}: must be in [0, 1], got {getattr(self, name)}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size: must be >= 1, got {self.batch_size}")
        if self.worker_count < 0:
            raise ValueError(f"worker_count: must be >= 0, got {self.worker_count}")
        if self.read_threads < 0:
            raise ValueError(f"read_threads: must be >= 0, got {self.read_threads}")
        if min(self.size) < 16:
            raise ValueError(f"image_size: must be >= 16 px, got {self.image_size}")
        if self.size[0] != self.size[1]:
            raise ValueError(f"image_size: zoom crops are square, got {self.image_size}")
        if self.max_side is not None and self.max_side < 16:
            raise ValueError(f"max_side: must be >= 16 px or None, got {self.max_side}")
        if not self.kinds or any(int(k) not in range(5) for k in self.kinds):
            raise ValueError(f"kinds: must be a non-empty subset of 0..4, got {self.kinds}")
        for name in ("leak_kinds", "coarse_kinds"):
            if any(int(k) not in range(5) for k in getattr(self, name)):
                raise ValueError(f"{name}: must be a subset of 0..4, got {getattr(self, name)}")
        low, high = (float(v) for v in self.coarse_over)
        if not (0.0 <= low <= high and np.isfinite(high)):
            raise ValueError(f"coarse_over: expected finite 0 <= low <= high, got {(low, high)}")
        if self.max_failures < 0:
            raise ValueError(f"max_failures: must be >= 0, got {self.max_failures}")

    @classmethod
    def from_config(cls, config: Any, split: str, **overrides: Any) -> PipelineConfig:
        """The pipeline of an experiment config: `config.data` (sources or val_sources by
        `split`, prior_prob, multi_region_prob, max_side, worker_count) with the top-level
        image_size, batch_size (eval.batch_size for "val") and seed (+10 000 for "val")."""
        data = config.data
        train = split == "train"
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in fields}
        values.update(
            sources=tuple(data.sources if train else data.val_sources),
            image_size=int(config.image_size),
            batch_size=int(config.batch_size if train else config.eval.batch_size),
            seed=int(config.seed) + (0 if train else 10_000),
        )
        values.update(overrides)
        return cls(**values)

    @property
    def size(self) -> tuple[int, int]:
        s = self.image_size
        return (int(s), int(s)) if isinstance(s, (int, np.integer)) else (int(s[0]), int(s[1]))


def resolve_source(spec: str, *, image_size: tuple[int, int] = (256, 256)) -> list:
    """Records (or DigEntries) named by a spec string.

    "procedural[:N[:SEED]]" (default N=1000, SEED=0, rendered at `image_size`);
    "grabcut" | "berkeley" | "coco_mval" (folders under `dig_jax.paths.data_roots()`);
    "bsds500_regions[/train|/val]"; "clothing_co_parsing[:PATH]", "camvid[/SPLIT][:PATH]"
    and "feral_cats[/SPLIT][:PATH]" (docs/data.md; named folders are found by
    `dig_jax.paths.dataset_dir`); "folder:PATH" (a benchmark-style folder);
    "bsds:PATH"; "coco_json:ANNOTATIONS.json:IMAGE_DIR"; "dig_json:FILE.json:IMAGE_DIR[:GT_DIR]"
    (GT_DIR: the source annotations, `<img_id>.png` instance maps, the global GT of rows
    without `obj_gt`);
    "tfds:DATA_DIR" (a prepared `dig_jax.data.tfds_builder.DigSamples`, split train).
    Items a JSON source cannot list are reported and counted (`report_bad_item`), not returned.
    """
    kind, _, rest = spec.partition(":")
    if kind == "procedural":
        n, seed = _procedural_args(spec, rest)
        return procedural(seed, n, size=image_size)
    if kind in ("grabcut", "berkeley", "coco_mval"):
        return benchmark_folder(dataset_dir(kind))
    if kind.startswith("bsds500_regions"):
        split = kind.partition("/")[2]
        root = dataset_dir("bsds500_regions")
        return bsds_regions(root / split) if split else bsds_regions(root)
    name, _, split = kind.partition("/")
    if name in _PUBLIC_SETS:
        reader, default_split = _PUBLIC_SETS[name]
        root = Path(rest) if rest else dataset_dir(name)
        if not root.is_dir():
            raise ValueError(f"sources: {spec!r}: no folder {root} (see docs/data.md)")
        return reader(root, split or default_split) if default_split else reader(root)
    if kind == "folder":
        return benchmark_folder(Path(rest))
    if kind == "bsds":
        return bsds_regions(Path(rest))
    if kind == "tfds":
        from dig_jax.data.tfds_builder import tfds_entries  # imports tensorflow_datasets

        return tfds_entries(rest)
    if kind in ("coco_json", "dig_json"):
        path, sep, image_dir = rest.rpartition(":")
        gt_dir = ""
        if kind == "dig_json" and ".json:" in rest:  # FILE.json:IMAGE_DIR[:GT_DIR]
            cut = rest.index(".json:") + len(".json")
            path, sep = rest[:cut], ":"
            image_dir, _, gt_dir = rest[cut + 1 :].partition(":")
        if not sep or not path:
            raise ValueError(f"sources: {spec!r} must be {kind}:FILE.json:IMAGE_DIR")
        if kind == "coco_json":
            items, problems = scan_coco_json(path, image_dir)
        else:  # multi-region variants are drawn with probability multi_region_prob instead
            items, problems = scan_dig_json(
                path, image_dir, include_multi=False, gt_dir=gt_dir or None
            )
        for problem in problems:
            report_bad_item(problem)
        return items
    raise ValueError(f"sources: unknown source spec {spec!r}")


# Public sets with regions and parts (docs/data.md): name -> (reader, default split or "").
_PUBLIC_SETS = {
    "clothing_co_parsing": (clothing_co_parsing, ""),
    "camvid": (camvid, "train"),
    "feral_cats": (functools.partial(yolo_polygons, name="feral_cats"), "train"),
}


MAX_PROCEDURAL = 1_000_000  # scenes of one spec: their records are listed up front


def _procedural_args(spec: str, rest: str) -> tuple[int, int]:
    """(N, SEED) of "procedural[:N[:SEED]]"; ValueError naming the spec otherwise."""
    parts = rest.split(":") if rest else []
    try:
        values = [int(p) for p in parts]
    except ValueError:
        values = []
    ok = len(values) == len(parts) <= 2 and all(v >= 0 for v in values)
    if not ok or (values and not 1 <= values[0] <= MAX_PROCEDURAL):
        raise ValueError(
            f"sources: {spec!r} must be procedural[:N[:SEED]] with integers "
            f"1 <= N <= {MAX_PROCEDURAL} and SEED >= 0"
        )
    n, seed = (values + [1000, 0][len(values) :])[:2]
    return n, seed


def resize_sample(sample: Sample, size: tuple[int, int]) -> Sample:
    """A sample resized to `size` = (H, W) by the resize policy (`dig_jax.data.resize`): image
    `resize_image`, gesture and masks (void included) `resize_labels`, distance recomputed."""
    h, w = size
    if sample["image"].shape[:2] == (h, w):
        return sample
    out = dict(sample)
    out["image"] = resize_image(sample["image"], (h, w))
    for key in ("gesture", "prev_mask", "target", "region", "local", "void"):
        if key in sample:
            out[key] = resize_labels(sample[key], (h, w))
    out["distance"] = distance_uint8(out["gesture"])
    return out


@dataclasses.dataclass(frozen=True)
class SampleTransform:
    """grain random-map transform: a Record, or a prebuilt sample (DigEntry, TfdsEntry:
    anything with `.load() -> Sample`) + rng -> Sample in its zoom crop, or None to skip (a
    ValueError while loading or sampling is reported and counted by `report_bad_item`).
    `augment`: jitter the zoom box and flip (training)."""

    size: tuple[int, int]
    prior_prob: float
    multi_region_prob: float
    kinds: tuple[int, ...]
    max_side: int | None = None
    augment: bool = False
    max_failures: int = 0
    focus_prob: float = 0.0
    paper_mode: bool = False
    leak_prob: float = 0.0
    leak_kinds: tuple[int, ...] = tuple(int(k) for k in ALL_KINDS)
    coarse_prob: float = 0.0
    coarse_kinds: tuple[int, ...] = tuple(int(k) for k in ALL_KINDS)
    coarse_over: tuple[float, float] = COARSE_OVER
    token: str = dataclasses.field(default_factory=lambda: uuid.uuid4().hex)

    def __call__(self, element: Record | DigEntry, rng: np.random.Generator) -> Sample | None:
        sample, reason = self._make(element, rng)
        self._track(element, sample is not None, reason)
        return sample

    def _multi(self, entry: DigEntry, rng: np.random.Generator) -> bool:
        """dataAug on static DIG samples: a creation sample that has a multi-region variant is
        replaced by it with probability `multi_region_prob` (as records are)."""
        if self.multi_region_prob <= 0 or entry.multi or not entry.has_multi:
            return False
        return entry.is_creation and rng.random() < self.multi_region_prob

    def _make(self, element: Record | DigEntry, rng: np.random.Generator) -> tuple[Any, str]:
        """(sample, "") or (None, why not)."""
        try:
            if not isinstance(element, Record):
                if hasattr(element, "multi_variant") and self._multi(element, rng):
                    element = element.multi_variant()
                sample = element.load()
            else:
                loaded = shrink_loaded(element.load(), self.max_side)
                sample = random_sample(
                    loaded, rng, prior_prob=self.prior_prob,
                    multi_region_prob=self.multi_region_prob, kinds=self.kinds,
                    with_distance=False,  # zoom_sample computes it on the crop
                    leak_prob=self.leak_prob, leak_kinds=self.leak_kinds,
                    coarse_prob=self.coarse_prob,
                    coarse_kinds=self.coarse_kinds, coarse_over=self.coarse_over,
                )  # fmt: skip
                if sample is None:
                    name = element.describe or f"{element.source}:{element.image_id}"
                    return None, f"{name}: no usable region (>= 300 px)"
            crop = zoom_sample(
                sample, self.size[0], rng if self.augment else None, self.focus_prob,
                self.paper_mode,
            )  # fmt: skip
            return crop, ""
        except ValueError as err:
            name = getattr(element, "describe", "") if isinstance(element, Record) else ""
            message = f"{name}: {err}" if name and name not in str(err) else str(err)
            report_bad_item(message)
            return None, message

    def _track(self, element: Any, ok: bool, reason: str) -> None:
        """Raise NoValidSampleError once a source has failed `max_failures` tries without a
        single valid sample (per process)."""
        if self.max_failures <= 0:
            return
        source = _source_name(element)
        with _bad_items_lock:
            entry = _source_health.setdefault((self.token, source), [0, False, []])
            if ok or entry[1]:
                entry[1] = True
                return
            entry[0] += 1
            if len(entry[2]) < MAX_REASONS and reason not in entry[2]:
                entry[2].append(reason)
            if entry[0] < self.max_failures:
                return
            tries, reasons = entry[0], list(entry[2])
        raise NoValidSampleError(
            f"source {source!r} gave no valid sample in {tries} tries; first reasons: "
            + " | ".join(reasons)
        )


def _as_config(config: Any, overrides: Mapping[str, Any]) -> PipelineConfig:
    if config is None:
        values: dict[str, Any] = {}
    elif isinstance(config, PipelineConfig):
        values = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    elif hasattr(config, "to_dict"):
        values = dict(config.to_dict())
    elif isinstance(config, Mapping):
        values = dict(config)
    else:
        raise ValueError(
            f"config: expected a dict, ConfigDict or PipelineConfig, got {type(config)}"
        )
    values.update(overrides)
    known = {f.name for f in dataclasses.fields(PipelineConfig)}
    unknown = set(values) - known
    if unknown:
        raise ValueError(f"config: unknown pipeline keys {sorted(unknown)}")
    if "sources" in values and isinstance(values["sources"], str):
        values["sources"] = (values["sources"],)
    listed = ("sources", "kinds", "leak_kinds", "coarse_kinds", "coarse_over", "shard")
    for key in (*listed, "image_size"):
        if isinstance(values.get(key), list):
            values[key] = tuple(values[key])
    return PipelineConfig(**values)


def collect_elements(cfg: PipelineConfig) -> list:
    """The concatenated records / DigEntries of every configured source, in order."""
    elements: list = []
    for src in cfg.sources:
        if isinstance(src, str):
            elements.extend(resolve_source(src, image_size=cfg.size))
        elif isinstance(src, Sequence):
            elements.extend(src)
        else:
            raise ValueError(f"sources: expected spec strings or lists of records, got {src!r}")
    if not elements:
        raise ValueError(f"sources: {cfg.sources!r} yield no records")
    return elements


def _shard(cfg: PipelineConfig) -> tuple[int, int]:
    if cfg.shard is not None:
        index, count = (int(v) for v in cfg.shard)
    else:
        import jax

        index, count = jax.process_index(), jax.process_count()
    if count < 1 or not 0 <= index < count:
        raise ValueError(f"shard: expected 0 <= index < count, got {(index, count)}")
    return index, count


def make_dataset(
    config: Any = None, split: str = "train", seed: int | None = None, **overrides: Any
) -> grain.IterDataset:
    """A grain IterDataset of batched sample dicts for this host's shard.

    Args:
      config: dict, ml_collections.ConfigDict or PipelineConfig with `PipelineConfig` fields
        (sources, image_size, batch_size, prior_prob, multi_region_prob, seed, worker_count,
        read_threads, shard, num_epochs, kinds); missing keys take the defaults.
      split: "train" shuffles (reshuffled each epoch) and repeats `num_epochs` times (None =
        forever), dropping the last partial batch; any other split keeps the file order, one
        epoch, keeps the partial batch and skips the multi-region augmentation.
      seed: overrides `config.seed`.
      **overrides: further `PipelineConfig` fields.
    Records are split over hosts by slicing `[index::count]` before shuffling, so shards are
    disjoint and cover every record. Iterators support `get_state()` / `set_state()`.
    """
    if seed is not None:
        overrides = {**overrides, "seed": seed}
    cfg = _as_config(config, overrides)
    index, count = _shard(cfg)
    shuffle_seed, map_seed = np.random.SeedSequence([cfg.seed, index]).generate_state(2)
    ds = grain.MapDataset.source(collect_elements(cfg))[index::count]
    train = split == "train"
    if train:
        ds = ds.shuffle(seed=int(shuffle_seed)).repeat(cfg.num_epochs)
    transform = SampleTransform(
        cfg.size, cfg.prior_prob, cfg.multi_region_prob if train else 0.0, cfg.kinds,
        cfg.max_side, augment=train, max_failures=cfg.max_failures,
        focus_prob=cfg.focus_prob if train else 0.0, paper_mode=cfg.paper_mode,
        leak_prob=cfg.leak_prob if train else 0.0, leak_kinds=cfg.leak_kinds,
        coarse_prob=cfg.coarse_prob if train else 0.0, coarse_kinds=cfg.coarse_kinds,
        coarse_over=tuple(float(v) for v in cfg.coarse_over),
    )  # fmt: skip
    ds = ds.random_map(transform, seed=int(map_seed))
    read = grain.ReadOptions(num_threads=cfg.read_threads, prefetch_buffer_size=2 * cfg.batch_size)
    it_ds = ds.to_iter_dataset(read).batch(cfg.batch_size, drop_remainder=train)
    if cfg.worker_count > 0:
        from absl import flags

        if not flags.FLAGS.is_parsed():  # grain's worker start-up reads absl flags
            flags.FLAGS.mark_as_parsed()
        it_ds = it_ds.mp_prefetch(
            grain.MultiprocessingOptions(num_workers=cfg.worker_count),
            worker_init_fn=exit_with_parent,
        )
    return it_ds


def exit_with_parent(worker_index: int, worker_count: int, poll_s: float = 1.0) -> None:
    """grain `worker_init_fn`: end this worker process within `poll_s` seconds of its parent's
    death. A parent stopped by SIGTERM closes its workers itself; one killed by SIGKILL (or the
    OOM killer) cannot, and its worker would go on computing batches for nobody. Polls the
    parent pid from a daemon thread rather than using prctl(PR_SET_PDEATHSIG), which fires on
    the death of the *thread* that started the worker, not of the process."""
    del worker_index, worker_count
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os._exit(1)  # the parent is gone: nothing will read what this worker makes

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()
