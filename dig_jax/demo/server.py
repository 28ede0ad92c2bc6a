"""The demo's ASGI app (starlette): one page plus a small JSON API around one loaded segmenter.

    GET  /                 the page (dig_jax/demo/static/index.html; JS and CSS under /static)
    GET  /api/info         checkpoint, working size, heads, limits, the example photos
    GET  /api/photo/{id}   the photo as PNG (what the page draws on, after any downscaling)
    POST /api/upload       body = the image file -> {"id", "name", "width", "height", "note"}
    POST /api/predict      {"photo": id, "points": [[x, y], ...], "prev_mask": PNG data URL or
                           null} -> {"mask": PNG data URL, "predict_ms", "server_ms", "area",
                           "heads": null or {"kind", "kind_probs", "add_prob"}}

State: the server keeps only photos (`PhotoStore`, content-addressed, lock-guarded); each page
keeps its own previous mask and undo stack and sends the previous mask with every stroke, so
requests are independent and any number of tabs can draw at once. The model is compiled once in
`create_app` (warm-up); requests run it in starlette's thread pool, off the event loop. Bad
input answers 400/404/413 with {"error": one line}; the server keeps serving. Bodies are
size-checked while they are read (`photos.MAX_UPLOAD_BYTES`, `photos.MAX_PREDICT_BYTES`), and a
previous mask's declared PNG size before it is decoded.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from dig_jax.demo import photos
from dig_jax.export import LoadedSegmenter
from dig_jax.gestures import BRUSH_RADIUS, GestureKind
from dig_jax.paths import shipped_checkpoints

STATIC = Path(__file__).resolve().parent / "static"
# The shipped gesture-agnostic checkpoints, preferred first (see `default_checkpoint`).
DEFAULT_CHECKPOINTS = shipped_checkpoints("gesture")
KIND_NAMES = {k: k.name.lower().replace("_", " ") for k in GestureKind}
log = logging.getLogger("dig_jax.demo")


def default_checkpoint(candidates: tuple[Path, ...] = DEFAULT_CHECKPOINTS) -> Path:
    """The first existing file of `candidates`; ValueError naming them all when none exists."""
    for path in candidates:
        if Path(path).is_file():
            return Path(path)
    raise ValueError(
        "no default checkpoint found (looked for "
        + ", ".join(map(str, candidates))
        + "); pass --checkpoint FILE.digjax"
    )


def read_heads(context_logit: float, kind_logits: np.ndarray) -> dict[str, Any]:
    """Multi-head outputs -> {"kind": name, "kind_probs": {name: p}, "add_prob": p(ADD)}."""
    z = np.asarray(kind_logits, np.float64)
    probs = np.exp(z - z.max())
    probs /= probs.sum()
    names = [KIND_NAMES[GestureKind(i)] for i in range(len(probs))]
    return {
        "kind": names[int(np.argmax(probs))],
        "kind_probs": {n: round(float(p), 4) for n, p in zip(names, probs, strict=True)},
        "add_prob": round(float(1.0 / (1.0 + np.exp(-context_logit))), 4),
    }


class DemoModel:
    """One loaded segmenter shared by all requests. `segment` is thread-safe: it reads only
    immutable state and calls jitted functions compiled once by `warm_up`."""

    def __init__(self, segmenter: LoadedSegmenter, name: str = ""):
        self.segmenter = segmenter
        self.name = name
        self.multihead = bool(segmenter.config.model.get("multihead", False))

    def segment(
        self, image: np.ndarray, gesture: np.ndarray, prev: np.ndarray | None
    ) -> tuple[np.ndarray, dict[str, Any] | None, float]:
        """(mask uint8[H, W] {0,1}, heads or None, predict time in ms) for one stroke.

        Single-head checkpoints go through `LoadedSegmenter.predict`; multi-head ones through
        `predict_heads`, the same zoom-in and paste-back with one network run for all heads."""
        start = time.perf_counter()
        if not self.multihead:
            mask = self.segmenter.predict(image, gesture, prev)
            return mask, None, (time.perf_counter() - start) * 1e3
        out = self.segmenter.predict_heads(image, gesture, prev)
        mask = out["mask"]
        heads = None if out["kind"] is None else read_heads(out["context"], out["kind"])
        return mask, heads, (time.perf_counter() - start) * 1e3

    def warm_up(self) -> float:
        """Compile the network (once: every prompt runs at the working size S×S); seconds."""
        start = time.perf_counter()
        image = np.zeros((64, 64, 3), np.uint8)
        self.segment(image, photos.stroke_map([[20, 20], [40, 40]], (64, 64)), None)
        return time.perf_counter() - start


def error(message: str, status: int = 400) -> JSONResponse:
    return JSONResponse({"error": str(message)}, status_code=status)


class BodyTooLargeError(ValueError):
    """A request body over its limit (answered 413)."""


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused (`BodyTooLargeError`) as soon as its declared Content-Length
    or the bytes received pass `limit`: a large body is never read whole."""
    too_large = BodyTooLargeError(f"the request is larger than {limit / 2**20:g} MiB")
    declared = request.headers.get("content-length", "")
    if declared.strip().isdigit() and int(declared) > limit:
        raise too_large
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > limit:
            raise too_large
    return bytes(data)


def create_app(
    model: DemoModel,
    examples: list[tuple[photos.Photo, dict]] | None = None,
    max_side: int = photos.MAX_SIDE,
) -> Starlette:
    """The demo app around `model` (warmed up here, so the first stroke is not a compile).
    `examples`: (photo, origin) pairs offered on the page (default: `photos.example_photos`)."""
    if max_side < 32:
        raise ValueError(f"max_side must be >= 32 px, got {max_side}")
    model.warm_up()
    examples = photos.example_photos(max_side=max_side) if examples is None else examples
    store = photos.PhotoStore([p for p, _ in examples])
    config = model.segmenter.config.model
    info = {
        "checkpoint": model.name,
        "working_size": model.segmenter.size,
        "input_kind": model.segmenter.input_kind,
        "multihead": model.multihead,
        "brush_radius": BRUSH_RADIUS,
        "max_side": max_side,
        "max_upload_mib": photos.MAX_UPLOAD_BYTES // 2**20,
        "backbone": config.get("backbone", "hrnet18s"),
        "examples": [
            {"id": p.id, "name": p.name, "width": p.shape[1], "height": p.shape[0], **origin}
            for p, origin in examples
        ],
    }

    async def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})

    async def get_info(request: Request) -> Response:
        return JSONResponse(info)

    async def get_photo(request: Request) -> Response:
        try:
            photo = store.get(request.path_params["photo_id"])
        except photos.UnknownPhotoError as exc:
            return error(exc, 404)
        return Response(photo.png, media_type="image/png")

    async def upload(request: Request) -> Response:
        try:
            data = await read_body(request, photos.MAX_UPLOAD_BYTES)
        except BodyTooLargeError as exc:
            return error(str(exc).replace("request", "file"), 413)
        name = request.headers.get("x-filename", "upload")[:200]
        try:
            image, note = await run_in_threadpool(photos.decode_photo, data, max_side)
            photo = store.add(await run_in_threadpool(photos.make_photo, image, name, note))
        except ValueError as exc:
            return error(exc)
        return JSONResponse(
            {
                "id": photo.id,
                "name": name,
                "width": photo.shape[1],
                "height": photo.shape[0],
                "note": photo.note,
            }
        )

    def run_predict(payload: Any) -> dict[str, Any]:
        start = time.perf_counter()
        if not isinstance(payload, dict):
            raise ValueError('the request must be a JSON object {"photo", "points", "prev_mask"}')
        photo = store.get(str(payload.get("photo", "")))
        gesture = photos.stroke_map(payload.get("points"), photo.shape)
        prev = payload.get("prev_mask")
        prev = None if prev is None else photos.decode_mask(prev, photo.shape)
        mask, heads, predict_ms = model.segment(photo.image, gesture, prev)
        return {
            "mask": photos.encode_mask(mask),
            "area": int(mask.sum()),
            "heads": heads,
            "predict_ms": round(predict_ms, 1),
            "server_ms": round((time.perf_counter() - start) * 1e3, 1),
        }

    async def predict(request: Request) -> Response:
        try:
            payload = json.loads(await read_body(request, photos.MAX_PREDICT_BYTES))
        except BodyTooLargeError as exc:
            return error(exc, 413)
        except (ValueError, RecursionError):  # RecursionError: JSON nested too deep
            return error("the request body is not JSON")
        try:
            return JSONResponse(await run_in_threadpool(run_predict, payload))
        except photos.UnknownPhotoError as exc:
            return error(exc, 404)
        except ValueError as exc:
            return error(exc)

    async def server_error(request: Request, exc: Exception) -> Response:
        log.exception("request %s failed", request.url.path, exc_info=exc)
        return error(f"internal error: {type(exc).__name__}: {exc}", 500)

    routes = [
        Route("/", index),
        Route("/api/info", get_info),
        Route("/api/photo/{photo_id}", get_photo),
        Route("/api/upload", upload, methods=["POST"]),
        Route("/api/predict", predict, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    return Starlette(routes=routes, exception_handlers={Exception: server_error})
