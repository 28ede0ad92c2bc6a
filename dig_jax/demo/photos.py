"""Photos and masks for the browser demo: decoding uploads (with size limits), PNG masks, the
bundled example photos, strokes -> gesture maps, and a small thread-safe photo store.

Pure functions except `PhotoStore` (a lock-guarded LRU of photos, keyed by content hash).
"""

from __future__ import annotations

import base64
import collections
import dataclasses
import hashlib
import io
import struct
import threading
import warnings
from collections.abc import Sequence
from typing import Any

import cv2
import numpy as np

from dig_jax import gestures
from dig_jax.data.resize import shrink_image

MAX_SIDE = 1024  # px: longer photos are downscaled to this long side on upload
MAX_PIXELS = 100_000_000  # uploads above this many pixels are refused before decoding
MAX_UPLOAD_BYTES = 32 * 1024 * 1024  # bytes of one upload
MAX_PREDICT_BYTES = 8 * 1024 * 1024  # bytes of one /api/predict body (points + mask PNG)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAX_POINTS = 20_000  # points of one stroke
STORE_CAPACITY = 64  # uploaded photos kept in memory (least recently used dropped first)


class UnknownPhotoError(LookupError):
    """A photo id the store does not hold (never uploaded, dropped, or server restarted)."""


@dataclasses.dataclass(frozen=True, eq=False)
class Photo:
    """A photo the page can draw on: `image` uint8[H, W, 3] RGB, its PNG bytes, a content id."""

    id: str
    name: str
    image: np.ndarray
    png: bytes
    note: str = ""

    @property
    def shape(self) -> tuple[int, int]:
        return self.image.shape[:2]


def make_photo(image: np.ndarray, name: str, note: str = "") -> Photo:
    """Photo from RGB uint8[H, W, 3]; the id is a hash of the pixels (same photo, same id)."""
    image = np.ascontiguousarray(image, np.uint8)
    digest = hashlib.sha1(repr(image.shape).encode() + image.tobytes()).hexdigest()[:16]
    ok, png = cv2.imencode(".png", image[..., ::-1])
    if not ok:
        raise ValueError(f"cannot encode photo {name!r} as PNG")
    return Photo(digest, name, image, png.tobytes(), note)


def downscale(image: np.ndarray, max_side: int = MAX_SIDE) -> np.ndarray:
    """uint8[H, W, C] shrunk so that its long side is at most `max_side` (the resize policy,
    `dig_jax.data.resize.shrink_image`)."""
    return shrink_image(image, max_side)


def decode_photo(
    data: bytes, max_side: int = MAX_SIDE, max_pixels: int = MAX_PIXELS
) -> tuple[np.ndarray, str]:
    """Uploaded file bytes -> (RGB uint8[H, W, 3] with long side <= `max_side`, note).

    Reads any format Pillow knows (PNG, JPEG, WebP, GIF, BMP, TIFF...), turns phone photos
    upright (EXIF orientation) and downscales large photos (the note says so). ValueError with
    a one-line message for an empty or non-image file and for more than `max_pixels` pixels.
    """
    from PIL import Image, ImageOps

    if not data:
        raise ValueError("the upload is empty: choose an image file")
    if len(data) > MAX_UPLOAD_BYTES:
        raise ValueError(f"the file is larger than {MAX_UPLOAD_BYTES // 2**20} MiB")
    too_big = f"the limit is {max_pixels / 1e6:.0f} megapixels"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # our own limit
            img = Image.open(io.BytesIO(data))
            w, h = img.size
            if w * h > max_pixels:
                raise ValueError(f"the photo is {w}×{h} px; {too_big}")
            img.draft("RGB", (max_side, max_side))  # JPEG: decode at a reduced scale when big
            img = ImageOps.exif_transpose(img).convert("RGB")
            image = np.asarray(img, np.uint8)
    except ValueError:
        raise
    except Image.DecompressionBombError:  # Pillow's own limit, above ours, before decoding
        raise ValueError(f"the photo has too many pixels; {too_big}") from None
    except Exception as exc:  # Pillow raises many kinds for files it cannot read
        raise ValueError(
            f"not an image file Pillow can read (PNG, JPEG, WebP, ...): {type(exc).__name__}"
        ) from None
    out = downscale(image, max_side)
    note = ""
    if out.shape != image.shape or max(w, h) > max_side:
        note = (
            f"the photo was {w}×{h} px; it was downscaled to {out.shape[1]}×{out.shape[0]} "
            f"(longest side at most {max_side} px)"
        )
    return out, note


def encode_mask(mask: np.ndarray) -> str:
    """{0,1} mask [H, W] -> data URL of a grayscale PNG (0 / 255)."""
    ok, png = cv2.imencode(".png", (np.asarray(mask) > 0).astype(np.uint8) * 255)
    if not ok:
        raise ValueError("cannot encode the mask as PNG")
    return "data:image/png;base64," + base64.b64encode(png.tobytes()).decode()


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) a PNG declares in its IHDR chunk, read without decoding; ValueError
    when `data` does not start like a PNG."""
    if len(data) < 24 or not data.startswith(PNG_SIGNATURE) or data[12:16] != b"IHDR":
        raise ValueError("not a PNG file")
    return struct.unpack(">II", data[16:24])


def decode_mask(data_url: str, shape: tuple[int, int]) -> np.ndarray:
    """Data URL (or bare base64) of a PNG mask -> uint8[H, W] {0,1} (pixels > 127 are set);
    ValueError when it is not a PNG of the photo's `shape` (H, W). The size the PNG declares
    is checked before it is decoded, so a small request cannot decode into a huge mask."""
    if not isinstance(data_url, str):
        raise ValueError("prev_mask must be a PNG data URL string or null")
    payload = data_url.partition(",")[2] if data_url.startswith("data:") else data_url
    try:
        raw = base64.b64decode(payload, validate=True)
        w, h = png_size(raw)
    except ValueError:
        raise ValueError("prev_mask is not a readable PNG") from None
    if (h, w) != tuple(shape):
        raise ValueError(f"prev_mask is {w}×{h} px, the photo is {shape[1]}×{shape[0]}")
    try:
        mask = cv2.imdecode(np.frombuffer(raw, np.uint8), cv2.IMREAD_GRAYSCALE)
    except cv2.error:
        mask = None
    if mask is None or mask.shape != tuple(shape):
        raise ValueError("prev_mask is not a readable PNG")
    return (mask > 127).astype(np.uint8)


def stroke_map(points: Any, shape: tuple[int, int]) -> np.ndarray:
    """One stroke, as drawn, -> gesture map uint8[H, W] {0,1}.

    `points`: [[x, y], ...] in photo pixels, in drawing order: an open polyline (one point: a
    dot) with the radius-5 disc brush (`dig_jax.gestures.stroke_map`), exactly what the page
    paints; the model is never told a kind. ValueError for an empty, too long or malformed
    stroke, or one that does not touch the photo.
    """
    if not isinstance(points, list | tuple) or len(points) == 0:
        raise ValueError("empty stroke: draw on the photo (press, move, release)")
    if len(points) > MAX_POINTS:
        raise ValueError(f"the stroke has {len(points)} points; the limit is {MAX_POINTS}")
    return gestures.stroke_map(points, shape)


def example_photos(n: int = 4, max_side: int = MAX_SIDE) -> list[tuple[Photo, dict]]:
    """Up to `n` bundled examples with where they come from ({"source", "image_id"}): GrabCut
    photos from `dig_jax.paths.data_root()` when present, else procedural scenes (384×512)."""
    from dig_jax.data.pipeline import resolve_source
    from dig_jax.paths import has_data

    source = "grabcut" if has_data("grabcut") else "procedural"
    try:
        records = resolve_source(source)[:n] if source == "grabcut" else []
    except (ValueError, OSError):
        records = []
    if not records:
        source = "procedural"
        records = resolve_source(f"procedural:{n}:0", image_size=(384, 512))
    out = []
    for record in records:
        try:
            image = downscale(record.load_image(), max_side)
        except (ValueError, OSError) as exc:
            warnings.warn(f"example {record.source}/{record.image_id} skipped: {exc}", stacklevel=2)
            continue
        photo = make_photo(image, f"{record.source}/{record.image_id}")
        out.append((photo, {"source": record.source, "image_id": record.image_id}))
    return out


class PhotoStore:
    """Photos by id: pinned examples plus the last `capacity` uploads (LRU). Thread-safe."""

    def __init__(self, pinned: Sequence[Photo] = (), capacity: int = STORE_CAPACITY):
        self._pinned = {p.id: p for p in pinned}
        self._uploads: collections.OrderedDict[str, Photo] = collections.OrderedDict()
        self._capacity = capacity
        self._lock = threading.Lock()

    def add(self, photo: Photo) -> Photo:
        """Keep `photo` (an upload); drops the least recently used upload beyond capacity."""
        with self._lock:
            if photo.id in self._pinned:
                return self._pinned[photo.id]
            self._uploads[photo.id] = photo
            self._uploads.move_to_end(photo.id)
            while len(self._uploads) > self._capacity:
                self._uploads.popitem(last=False)
        return photo

    def get(self, photo_id: str) -> Photo:
        """The photo with `photo_id`; UnknownPhotoError with a message when it is not held."""
        with self._lock:
            if photo_id in self._pinned:
                return self._pinned[photo_id]
            if photo_id in self._uploads:
                self._uploads.move_to_end(photo_id)
                return self._uploads[photo_id]
        raise UnknownPhotoError(
            f"unknown photo {photo_id!r} (server restarted or photo dropped): load it again"
        )

    def __len__(self) -> int:
        with self._lock:
            return len(self._pinned) + len(self._uploads)
