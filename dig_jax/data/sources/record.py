"""The record every source yields: one image with its instance masks, loaded lazily.

A `Record` is cheap to create and to pickle (grain workers receive records): it holds a path,
an array or a picklable zero-argument callable for the image, and the same for the masks.
`Record.load()` reads and checks everything and returns a `LoadedRecord`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from dig_jax.data.resize import resize_image, resize_labels, shrunk_shape

ImageRef = str | Path | np.ndarray | Callable[[], np.ndarray]
# A mask loader returns (instances uint8[K,H,W] in {0,1}, void uint8[H,W] in {0,1}), or
# (instances, void, instance_ids) when the ids are known only after loading.
MaskRef = tuple[np.ndarray, ...] | Callable[[], tuple[np.ndarray, ...]]


def jpeg_is_truncated(data: bytes) -> bool:
    """True for JPEG bytes cut short: no end-of-image marker after the first scan (libjpeg
    decodes such files with a grey or repeated lower part and only a warning)."""
    if not data.startswith(b"\xff\xd8"):
        return False  # not a JPEG: left to the decoder
    pos = 2
    while pos + 4 <= len(data):  # walk the header segments (skipping e.g. an EXIF thumbnail)
        if data[pos] != 0xFF:
            return False  # malformed header: the decoder reports it
        marker = data[pos + 1]
        if marker == 0xFF or 0xD0 <= marker <= 0xD7 or marker == 0x01:
            pos += 1 if marker == 0xFF else 2
            continue
        if marker == 0xDA:  # start of scan; in scan data 0xFF 0xD9 can only be the real EOI
            return data.find(b"\xff\xd9", pos) < 0
        pos += 2 + int.from_bytes(data[pos + 2 : pos + 4], "big")
    return True  # the header itself is cut short


def _imread(path: Path, what: str, flags: int = cv2.IMREAD_UNCHANGED) -> np.ndarray:
    """cv2 decoding (`flags`; IMREAD_UNCHANGED: the pixels as stored) with every failure, a
    truncated JPEG included, turned into a ValueError naming the file."""
    if not path.is_file():
        raise ValueError(f"{what} file not found: {path}")
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise ValueError(f"cannot read {what} file: {path} ({err})") from None
    if not raw:
        raise ValueError(f"empty {what} file (0 bytes): {path}")
    if jpeg_is_truncated(raw):
        raise ValueError(f"truncated {what} file (JPEG cut short): {path}")
    try:
        data = cv2.imdecode(np.frombuffer(raw, np.uint8), flags)
    except cv2.error as err:
        raise ValueError(f"cannot decode {what} file: {path} ({str(err).strip()[:80]})") from None
    if data is None:
        raise ValueError(f"cannot decode {what} file: {path}")
    return data


def read_json(path: Path, field: str) -> Any:
    """The JSON value in `path`; ValueError naming `field` and the file when it is not UTF-8
    JSON or is nested too deep to read."""
    try:
        return json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as err:
        raise ValueError(f"{field}: {path} is not UTF-8 text (byte {err.start})") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"{field}: {path} is not valid JSON ({err})") from None
    except RecursionError:
        raise ValueError(f"{field}: {path} is JSON nested too deep to read") from None


def read_image(path: str | Path) -> np.ndarray:
    """Read an image file as RGB uint8[H, W, 3]; ValueError if missing or unreadable."""
    return to_rgb(_imread(Path(path), "image"), name=str(path), bgr=True)


def read_photo(path: str | Path) -> np.ndarray:
    """A user's photo as RGB uint8[H, W, 3], turned upright as its EXIF orientation says (as
    image viewers show it, and as gestures and masks are drawn on it: a phone's portrait photo is
    stored sideways); ValueError if missing or unreadable. Data sets use `read_image`: their
    masks were drawn on the pixels as stored."""
    return to_rgb(_imread(Path(path), "image", cv2.IMREAD_COLOR), name=str(path), bgr=True)


def read_gray(path: str | Path) -> np.ndarray:
    """Read a single-channel mask or label file unchanged (uint8 or uint16 [H, W]); ValueError
    naming the file if missing or unreadable."""
    data = _imread(Path(path), "mask")
    if data.ndim == 3:  # a colour-saved binary mask: every channel holds the same value
        data = data[..., 0]
    return data


def to_rgb(image: np.ndarray, *, name: str = "image", bgr: bool = False) -> np.ndarray:
    """Coerce gray / RGB / RGBA uint8 arrays to RGB uint8[H, W, 3] (BGR input if `bgr`)."""
    image = np.asarray(image)
    if image.dtype == np.uint16:
        image = (image >> 8).astype(np.uint8)
    if image.dtype != np.uint8:
        raise ValueError(f"{name}: image must be uint8, got {image.dtype}")
    if image.ndim == 2:
        return np.repeat(image[..., None], 3, axis=-1)
    if image.ndim != 3 or image.shape[-1] not in (3, 4):
        raise ValueError(f"{name}: image must be [H, W], [H, W, 3] or [H, W, 4], got {image.shape}")
    image = image[..., :3]
    return np.ascontiguousarray(image[..., ::-1] if bgr else image)


@dataclasses.dataclass(frozen=True, eq=False)
class LoadedRecord:
    """A record in memory: `image` uint8[H,W,3], `instances` uint8[K,H,W] {0,1},
    `void` uint8[H,W] {0,1} (pixels no metric or loss should look at), ids."""

    source: str
    image_id: str
    image: np.ndarray
    instances: np.ndarray
    void: np.ndarray
    instance_ids: tuple[int, ...]

    @property
    def shape(self) -> tuple[int, int]:
        return self.image.shape[:2]


@dataclasses.dataclass(frozen=True, eq=False)
class Record:
    """One image and its instance masks, not yet read.

    Attributes:
      source: name of the source (e.g. "grabcut", "procedural").
      image_id: identifier unique within the source.
      image: path, RGB uint8 array or zero-argument callable returning one.
      masks: (instances, void) arrays or a zero-argument callable returning them, or returning
        (instances, void, instance_ids) when the ids are known only after loading.
      instance_ids: ids of the instances when known without reading (else None; a 3-tuple from
        `masks` overrides them).
      describe: file name(s) used in error messages.
    """

    source: str
    image_id: str
    image: ImageRef
    masks: MaskRef
    instance_ids: tuple[int, ...] | None = None
    describe: str = ""

    @property
    def num_instances(self) -> int | None:
        return None if self.instance_ids is None else len(self.instance_ids)

    def load_image(self) -> np.ndarray:
        """RGB uint8[H, W, 3]."""
        ref = self.image
        if isinstance(ref, (str, Path)):
            return read_image(ref)
        if callable(ref):
            ref = ref()
        return to_rgb(ref, name=self.describe or self.image_id)

    def load(self) -> LoadedRecord:
        """Read and validate the image and masks; ValueError naming the file on bad input."""
        name = self.describe or f"{self.source}:{self.image_id}"
        image = self.load_image()
        loaded = self.masks() if callable(self.masks) else self.masks
        ids = self.instance_ids
        if len(loaded) == 3:
            instances, void, ids = loaded
        else:
            instances, void = loaded
        instances = np.asarray(instances)
        void = np.zeros(image.shape[:2], np.uint8) if void is None else np.asarray(void)
        if instances.ndim != 3:
            raise ValueError(f"{name}: instances must be [K, H, W], got {instances.shape}")
        if instances.shape[1:] != image.shape[:2] or void.shape != image.shape[:2]:
            raise ValueError(
                f"{name}: mask size {instances.shape[1:]} differs from image size {image.shape[:2]}"
            )
        instances = (instances > 0).astype(np.uint8)
        void = (void > 0).astype(np.uint8)
        if ids is None:
            ids = tuple(range(1, len(instances) + 1))
        if len(ids) != len(instances):
            raise ValueError(f"{name}: {len(instances)} masks but {len(ids)} instance ids")
        empty = [i for i, m in zip(ids, instances, strict=True) if not m.any()]
        if empty:
            raise ValueError(f"{name}: empty instance mask(s) {empty}")
        return LoadedRecord(self.source, self.image_id, image, instances, void, tuple(ids))


def resize_loaded(loaded: LoadedRecord, size: tuple[int, int]) -> LoadedRecord:
    """Resize to `size` = (H, W) by the resize policy (`dig_jax.data.resize`): image
    `resize_image`, masks and void `resize_labels`; `loaded` itself at its own size."""
    h, w = size
    if loaded.shape == (h, w):
        return loaded
    image = resize_image(loaded.image, (h, w))
    instances = (
        np.stack([resize_labels(m, (h, w)) for m in loaded.instances])
        if len(loaded.instances)
        else np.zeros((0, h, w), np.uint8)
    )
    void = resize_labels(loaded.void, (h, w))
    return dataclasses.replace(loaded, image=image, instances=instances, void=void)


def shrink_loaded(loaded: LoadedRecord, max_side: int | None) -> LoadedRecord:
    """`loaded` shrunk (aspect kept) when its long side exceeds `max_side` (`shrunk_shape`),
    else itself: how training and evaluation size every photo."""
    return resize_loaded(loaded, shrunk_shape(loaded.shape, max_side))
