"""Hostile requests to the demo (issue 43, security): bodies and masks size-checked before they
are read or decoded; decompression bombs refused with a message that says so."""

from __future__ import annotations

import base64
import struct
import zlib

import cv2
import numpy as np
import pytest
from PIL import Image

import dig_jax
from dig_jax.demo import photos
from dig_jax.demo.server import DemoModel, create_app


def png_declaring(width: int, height: int, channels: int = 1) -> bytes:
    """A small real PNG whose IHDR is rewritten to declare `width` x `height` (CRC fixed)."""
    shape = (4, 4) if channels == 1 else (4, 4, channels)
    data = bytearray(cv2.imencode(".png", np.zeros(shape, np.uint8))[1].tobytes())
    data[16:24] = struct.pack(">II", width, height)
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])))
    return bytes(data)


def data_url(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode()


def test_prev_mask_size_is_read_from_the_header_before_decoding(monkeypatch):
    """Case S2: a 142 kB prev_mask PNG decoded to +1.7 GiB before its size was checked."""
    bomb = data_url(png_declaring(40_000, 40_000))
    monkeypatch.setattr(cv2, "imdecode", lambda *a: pytest.fail("decoded before the check"))
    with pytest.raises(ValueError, match="prev_mask is 40000×40000 px, the photo is 30×20"):
        photos.decode_mask(bomb, (20, 30))
    assert photos.png_size(png_declaring(7, 5)) == (7, 5)
    for bad in (b"", b"GIF89a" + bytes(30), png_declaring(7, 5)[:20]):
        with pytest.raises(ValueError, match="not a PNG"):
            photos.png_size(bad)


def test_a_jpeg_or_truncated_prev_mask_is_refused():
    jpeg = cv2.imencode(".jpg", np.zeros((20, 30), np.uint8))[1].tobytes()
    with pytest.raises(ValueError, match="prev_mask is not a readable PNG"):
        photos.decode_mask(data_url(jpeg), (20, 30))
    cut = cv2.imencode(".png", np.zeros((20, 30), np.uint8))[1].tobytes()[:40]
    with pytest.raises(ValueError, match="prev_mask is not a readable PNG"):
        photos.decode_mask(data_url(cut), (20, 30))


def test_upload_bombs_are_refused_saying_so(monkeypatch):
    """Cases S5, S6: a 30000² PNG was 'not an image...: DecompressionBombError'; a 90 MP one,
    under the documented 100 MP limit, was refused as a DecompressionBombWarning."""
    with pytest.raises(ValueError, match="the photo has too many pixels; the limit is 100 meg"):
        photos.decode_photo(png_declaring(30_000, 30_000, 3))
    with pytest.raises(ValueError, match="the photo is 12000×9000 px; the limit is 100 meg"):
        photos.decode_photo(png_declaring(12_000, 9_000, 3))
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)  # Pillow warns above this
    image = np.random.default_rng(0).integers(0, 256, (30, 40, 3), dtype=np.uint8)
    got, _ = photos.decode_photo(cv2.imencode(".png", image)[1].tobytes())
    assert got.shape == (30, 40, 3)


@pytest.fixture(scope="module")
def server(tiny_single, serving):
    seg = dig_jax.load_segmenter(tiny_single)
    photo = photos.make_photo(np.full((20, 30, 3), 90, np.uint8), "ex")
    with serving(create_app(DemoModel(seg, "single.digjax"), [(photo, {"source": "t"})])) as url:
        yield url, photo


def test_predict_body_is_limited_before_it_is_read(server, http, monkeypatch):
    """Case S3: /api/predict read a 64 MiB body whole."""
    url, photo = server
    monkeypatch.setattr(photos, "MAX_PREDICT_BYTES", 1000)
    big = {"photo": photo.id, "points": [[5, 5]] * 400}
    status, body = http(url + "/api/predict", big)
    assert status == 413 and "larger than" in body["error"]
    monkeypatch.undo()
    status, _ = http(url + "/api/predict", {"photo": photo.id, "points": [[5, 5]]})
    assert status == 200


def test_hostile_predict_requests_get_one_line_errors(server, http):
    url, photo = server
    bomb = data_url(png_declaring(40_000, 40_000))
    cases = [
        ({"photo": photo.id, "points": [[5, 5]], "prev_mask": bomb}, 400, "40000×40000 px"),
        (b"[" * 100_000 + b"]" * 100_000, 400, "not JSON"),  # was a RecursionError
        ({"photo": photo.id, "points": [[5, float("nan")]]}, 400, "finite numbers"),
        (b'{"photo": 1e999999, "points": [[5, 5]]}', 404, "unknown photo"),
    ]
    for data, code, match in cases:
        status, body = http(url + "/api/predict", data)
        assert status == code and match in body["error"] and "\n" not in body["error"], body


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--max-side", "0"], "--max-side must be >= 32 px, got 0"),
        (["--examples", "0"], "--examples must be in 1..64, got 0"),
    ],
)
def test_main_refuses_bad_flags_before_loading(flags, message, capsys):
    """Cases F1, F2: demo --max-side 0 shrank uploads to 1×1; --examples 0 blamed a spec."""
    from dig_jax.demo.__main__ import main

    with pytest.raises(SystemExit) as exit_info:
        main(flags)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_create_app_refuses_a_max_side_that_shrinks_photos_to_nothing(tiny_single):
    seg = dig_jax.load_segmenter(tiny_single)
    with pytest.raises(ValueError, match="max_side must be >= 32 px, got 0"):
        create_app(DemoModel(seg, "single.digjax"), [], max_side=0)


def test_main_refuses_an_address_it_cannot_listen_on(capsys):
    """Case H2: an unknown --host, or a --port in use, printed "ready" and then failed."""
    import socket

    from dig_jax.demo.__main__ import main

    with socket.create_server(("127.0.0.1", 0)) as busy:
        busy.listen()
        port = str(busy.getsockname()[1])
        for flags in (["--host", "999.0.0.1"], ["--port", port]):
            with pytest.raises(SystemExit) as exit_info:
                main(flags)
            assert exit_info.value.code == 2
            err = capsys.readouterr().err
            assert "--host/--port: cannot listen on" in err and " ready on " not in err
