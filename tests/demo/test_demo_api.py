"""The demo's HTTP API on a real server (127.0.0.1, free port) with tiny random checkpoints."""

from __future__ import annotations

import concurrent.futures
import re

import cv2
import numpy as np
import pytest

import dig_jax
from dig_jax.demo import photos
from dig_jax.demo.server import STATIC, DemoModel, create_app


def _examples():
    rng = np.random.default_rng(3)
    return [
        (photos.make_photo(rng.integers(0, 256, shape, dtype=np.uint8), f"ex{i}"), {"source": "t"})
        for i, shape in enumerate([(48, 64, 3), (70, 50, 3)])
    ]


@pytest.fixture(scope="module")
def single(tiny_single, serving):
    seg = dig_jax.load_segmenter(tiny_single)
    examples = _examples()
    app = create_app(DemoModel(seg, "single.digjax"), examples)
    with serving(app) as url:
        yield url, seg, examples


@pytest.fixture(scope="module")
def multi(tiny_multi, serving):
    seg = dig_jax.load_segmenter(tiny_multi)
    examples = _examples()
    with serving(create_app(DemoModel(seg, "multi.digjax"), examples)) as url:
        yield url, seg, examples


def free_port() -> int:
    """A TCP port of 127.0.0.1 that is free now."""
    import socket

    with socket.create_server(("127.0.0.1", 0)) as sock:
        return sock.getsockname()[1]


def _mask(response: dict, shape) -> np.ndarray:
    return photos.decode_mask(response["mask"], shape)


def test_page_and_assets_are_served_without_network(single, http):
    url, _, _ = single
    status, page = http(url + "/")
    assert status == 200 and b"<canvas" in page and b"/static/app.js" in page
    for name in ("app.js", "style.css"):
        status, body = http(f"{url}/static/{name}")
        assert status == 200 and len(body) > 100
    for path in STATIC.iterdir():  # no CDN, no remote fonts: everything is local
        assert not re.search(rb"https?://|//cdn", path.read_bytes()), path.name


def test_info_lists_model_limits_and_examples(single, http):
    url, seg, examples = single
    status, info = http(url + "/api/info")
    assert status == 200
    assert info["working_size"] == seg.size == 32 and info["multihead"] is False
    assert info["brush_radius"] == 5 and info["max_side"] == photos.MAX_SIDE
    assert [e["id"] for e in info["examples"]] == [p.id for p, _ in examples]
    status, png = http(f"{url}/api/photo/{examples[1][0].id}")
    decoded = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR)[..., ::-1]
    np.testing.assert_array_equal(decoded, examples[1][0].image)


def test_predict_equals_predict_and_refines(single, http):
    url, seg, examples = single
    photo = examples[0][0]
    points = [[10, 10], [40, 12], [44, 35], [12, 38], [10, 11]]
    status, out = http(url + "/api/predict", {"photo": photo.id, "points": points})
    assert status == 200, out
    gesture = photos.stroke_map(points, photo.shape)
    first = seg.predict(photo.image, gesture)
    np.testing.assert_array_equal(_mask(out, photo.shape), first)
    assert out["area"] == first.sum() and out["heads"] is None
    assert out["predict_ms"] > 0 and out["server_ms"] >= out["predict_ms"]
    refine = [[30, 30]]
    body = {"photo": photo.id, "points": refine, "prev_mask": out["mask"]}
    status, out2 = http(url + "/api/predict", body)
    assert status == 200
    want = seg.predict(photo.image, photos.stroke_map(refine, photo.shape), first)
    np.testing.assert_array_equal(_mask(out2, photo.shape), want)


def test_upload_then_predict_at_another_size(single, http):
    url, seg, _ = single
    image = np.random.default_rng(5).integers(0, 256, (90, 33, 3), dtype=np.uint8)
    png = cv2.imencode(".png", image[..., ::-1])[1].tobytes()
    status, up = http(url + "/api/upload", png, {"X-Filename": "mine.png"})
    assert status == 200 and (up["width"], up["height"], up["note"]) == (33, 90, "")
    points = [[5, 5], [25, 80]]
    status, out = http(url + "/api/predict", {"photo": up["id"], "points": points})
    assert status == 200
    want = seg.predict(image, photos.stroke_map(points, (90, 33)))
    np.testing.assert_array_equal(_mask(out, (90, 33)), want)
    assert seg._logits_jit._cache_size() == 1  # compiled once, at start-up, for every photo size


def test_a_6000_by_4000_upload_is_downscaled_and_said_so(single, http):
    url, _, _ = single
    big = np.full((4000, 6000, 3), 90, np.uint8)
    data = cv2.imencode(".jpg", big)[1].tobytes()
    status, up = http(url + "/api/upload", data, {"X-Filename": "big.jpg"})
    assert status == 200 and (up["width"], up["height"]) == (1024, 683)
    assert "6000×4000" in up["note"] and "1024 px" in up["note"]


def test_bad_requests_get_one_line_errors_and_the_server_keeps_serving(single, http):
    url, _, examples = single
    photo = examples[0][0]
    bad = [
        ("/api/upload", b"this is not an image", 400, "not an image"),
        ("/api/upload", b"", 400, "empty"),
        ("/api/predict", {"photo": photo.id, "points": []}, 400, "empty stroke"),
        ("/api/predict", {"photo": photo.id}, 400, "empty stroke"),
        ("/api/predict", {"photo": photo.id, "points": [[-99, -99]]}, 400, "does not touch"),
        ("/api/predict", {"photo": "nope", "points": [[1, 1]]}, 404, "unknown photo"),
        ("/api/predict", b"{not json", 400, "not JSON"),
        ("/api/predict", [1, 2], 400, "JSON object"),
        ("/api/predict", {"photo": photo.id, "points": [[5, 5]], "prev_mask": "xx"}, 400, "PNG"),
        ("/api/photo/unknown", None, 404, "unknown photo"),
    ]
    for path, data, code, match in bad:
        if isinstance(data, list):
            data = str(data).encode()
        status, body = http(url + path, data)
        assert status == code, (path, data, body)
        assert match in body["error"] and "\n" not in body["error"], body
    wrong = photos.encode_mask(np.zeros((5, 5), np.uint8))
    status, body = http(
        url + "/api/predict", {"photo": photo.id, "points": [[5, 5]], "prev_mask": wrong}
    )
    assert status == 400 and "5×5 px" in body["error"]
    status, out = http(url + "/api/predict", {"photo": photo.id, "points": [[9, 9], [20, 20]]})
    assert status == 200 and "mask" in out


def test_an_upload_over_the_size_limit_is_refused(single, http, monkeypatch):
    url, _, _ = single
    monkeypatch.setattr(photos, "MAX_UPLOAD_BYTES", 1000)
    status, body = http(url + "/api/upload", bytes(5000))
    assert status == 413 and "larger than" in body["error"]
    monkeypatch.undo()
    assert http(url + "/api/info")[0] == 200


def test_concurrent_requests_get_their_own_masks(single, http):
    url, seg, examples = single
    jobs = [(examples[i % 2][0], [[5 + 3 * i, 6], [30, 20 + 2 * i], [8, 40 - i]]) for i in range(8)]

    def call(job):
        photo, points = job
        status, out = http(url + "/api/predict", {"photo": photo.id, "points": points})
        assert status == 200
        return _mask(out, photo.shape)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        got = list(pool.map(call, jobs))
    for (photo, points), mask in zip(jobs, got, strict=True):
        want = seg.predict(photo.image, photos.stroke_map(points, photo.shape))
        np.testing.assert_array_equal(mask, want)


def test_multihead_checkpoint_reports_kind_and_context(multi, http):
    url, seg, examples = multi
    status, info = http(url + "/api/info")
    assert info["multihead"] is True
    photo = examples[1][0]
    points = [[5, 5], [40, 8], [45, 60]]
    status, out = http(url + "/api/predict", {"photo": photo.id, "points": points})
    assert status == 200
    heads = out["heads"]
    assert heads["kind"] in heads["kind_probs"] and 0 <= heads["add_prob"] <= 1
    want = seg.predict(photo.image, photos.stroke_map(points, photo.shape))
    np.testing.assert_array_equal(_mask(out, photo.shape), want)


def test_main_refuses_bad_checkpoints_with_one_line(tmp_path, capsys, tiny_single):
    from dig_jax.demo.__main__ import main

    garbage = tmp_path / "garbage.digjax"
    garbage.write_bytes(b"\x89PNG not a model")
    truncated = tmp_path / "truncated.digjax"
    truncated.write_bytes(tiny_single.read_bytes()[:3000])
    port = str(free_port())
    for path in (garbage, truncated, tmp_path / "missing.digjax"):
        assert main(["--checkpoint", str(path), "--port", port]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("dig_jax.demo: error: cannot load checkpoint") and "\n" not in err


@pytest.mark.parametrize("port", ["99999", "0", "-5"])
def test_main_refuses_a_port_outside_1_65535(port, capsys):
    from dig_jax.demo.__main__ import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--port", port])
    assert exit_info.value.code == 2
    assert "--port must be in 1..65535" in capsys.readouterr().err


def test_main_serves_the_given_checkpoint(tiny_single, monkeypatch, capsys):
    import uvicorn

    from dig_jax.demo.__main__ import main

    served = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: served.update(app=app, **kw))
    port = free_port()
    assert main(["--checkpoint", str(tiny_single), "--port", str(port), "--examples", "1"]) == 0
    assert served["host"] == "127.0.0.1" and served["port"] == port
    assert f"single.digjax ready on http://127.0.0.1:{port}/" in capsys.readouterr().out
