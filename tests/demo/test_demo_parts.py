"""The demo's pure parts: default checkpoint, strokes, photos, masks, and the heads method."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

import dig_jax
from dig_jax.demo import photos
from dig_jax.demo.server import DEFAULT_CHECKPOINTS, default_checkpoint, read_heads
from dig_jax.gestures import Gesture, GestureKind, rasterize


def test_default_checkpoint_is_the_first_existing(tmp_path):
    lite, hrnet = tmp_path / "lite.digjax", tmp_path / "hrnet.digjax"
    with pytest.raises(ValueError, match="--checkpoint"):
        default_checkpoint((lite, hrnet))
    hrnet.write_bytes(b"x")
    assert default_checkpoint((lite, hrnet)) == hrnet
    lite.write_bytes(b"x")
    assert default_checkpoint((lite, hrnet)) == lite
    assert DEFAULT_CHECKPOINTS[0].name == "lite_iterative_offline_long3x.digjax"


def test_stroke_map_is_the_disc_brush_polyline():
    points = [[10.0, 12.0], [30.5, 20.0], [35.0, 40.0]]
    got = photos.stroke_map(points, (50, 60))
    want = rasterize(Gesture(GestureKind.SCRIBBLE, np.array(points), closed=False), (50, 60))
    np.testing.assert_array_equal(got, want)
    dot = photos.stroke_map([[20, 20]], (50, 60))
    assert dot.sum() == 81  # pixel centres within 5 px of the point
    partly_outside = photos.stroke_map([[-30, 5], [10, 5]], (50, 60))
    assert partly_outside.any() and partly_outside.dtype == np.uint8


@pytest.mark.parametrize(
    ("points", "match"),
    [
        ([], "empty stroke"),
        (None, "empty stroke"),
        ([[-50, -50], [-40, -60]], "does not touch"),
        ([[1, 2, 3]], r"\[x, y\]"),
        ([["a", 2]], r"\[x, y\]"),
        ([[float("nan"), 2]], r"\[x, y\]"),
    ],
)
def test_stroke_map_refuses_bad_strokes(points, match):
    with pytest.raises(ValueError, match=match):
        photos.stroke_map(points, (50, 60))


def _png(image: np.ndarray) -> bytes:
    return cv2.imencode(".png", image[..., ::-1])[1].tobytes()


def test_decode_photo_reads_and_limits():
    image = np.random.default_rng(0).integers(0, 256, (30, 40, 3), dtype=np.uint8)
    got, note = photos.decode_photo(_png(image))
    np.testing.assert_array_equal(got, image)
    assert note == ""
    gray, _ = photos.decode_photo(cv2.imencode(".png", image[..., 0])[1].tobytes())
    assert gray.shape == (30, 40, 3)
    for bad, match in [(b"", "empty"), (b"%PDF-1.4 not a photo", "not an image")]:
        with pytest.raises(ValueError, match=match):
            photos.decode_photo(bad)
    with pytest.raises(ValueError, match=r"40×30 px; the limit"):
        photos.decode_photo(_png(image), max_pixels=1000)
    with pytest.raises(ValueError, match="not an image"):
        photos.decode_photo(_png(image)[:60])  # truncated


def test_decode_photo_downscales_a_6000_by_4000_photo():
    big = np.zeros((4000, 6000, 3), np.uint8)
    big[1000:3000, 2000:4000] = (200, 50, 20)
    data = cv2.imencode(".jpg", big, [cv2.IMWRITE_JPEG_QUALITY, 80])[1].tobytes()
    got, note = photos.decode_photo(data)
    assert got.shape == (683, 1024, 3)
    assert "6000×4000" in note and "1024" in note


def test_mask_png_round_trip_and_errors():
    mask = (np.random.default_rng(1).random((20, 30)) > 0.5).astype(np.uint8)
    url = photos.encode_mask(mask)
    assert url.startswith("data:image/png;base64,")
    np.testing.assert_array_equal(photos.decode_mask(url, (20, 30)), mask)
    with pytest.raises(ValueError, match="30×20 px, the photo is 31×20"):
        photos.decode_mask(url, (20, 31))
    for bad in ["data:image/png;base64,AAAA", "%%%", 3]:
        with pytest.raises(ValueError, match="prev_mask"):
            photos.decode_mask(bad, (20, 30))


def test_photo_store_keeps_examples_and_recent_uploads():
    rng = np.random.default_rng(2)
    made = [
        photos.make_photo(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8), f"p{i}")
        for i in range(4)
    ]
    store = photos.PhotoStore([made[0]], capacity=2)
    for p in made[1:]:
        store.add(p)
    assert store.get(made[0].id) is made[0] and store.get(made[3].id) is made[3]
    with pytest.raises(photos.UnknownPhotoError, match="load it again"):
        store.get(made[1].id)
    assert photos.make_photo(made[2].image.copy(), "again").id == made[2].id


def test_read_heads_names_kind_and_context():
    heads = read_heads(2.0, np.array([0.0, 0.0, 5.0, 0.0, 0.0]))
    assert heads["kind"] == "loose lasso"
    assert heads["kind_probs"]["loose lasso"] > 0.9
    assert abs(sum(heads["kind_probs"].values()) - 1) < 1e-3
    assert heads["add_prob"] == pytest.approx(0.8808, abs=1e-4)


def test_predict_heads_matches_predict(tiny_single, tiny_multi):
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (40, 52, 3), dtype=np.uint8)
    gesture = photos.stroke_map([[10, 10], [30, 12], [28, 30]], (40, 52))
    prev = np.zeros((40, 52), np.uint8)
    prev[15:30, 20:40] = 1
    for path, multihead in [(tiny_single, False), (tiny_multi, True)]:
        seg = dig_jax.load_segmenter(path)
        out = seg.predict_heads(image, gesture, prev)
        np.testing.assert_allclose(
            out["logits"], seg.predict_logits(image, gesture, prev), rtol=1e-5, atol=1e-5
        )
        np.testing.assert_array_equal(out["mask"], seg.predict(image, gesture, prev))
        if multihead:
            assert isinstance(out["context"], float) and out["kind"].shape == (5,)
        else:
            assert out["context"] is None and out["kind"] is None


def test_decode_photo_turns_phone_photos_upright():
    import io

    from PIL import Image

    exif = Image.Exif()
    exif[0x0112] = 6  # EXIF orientation: the camera was turned 90° clockwise
    buffer = io.BytesIO()
    Image.new("RGB", (30, 20), (200, 10, 10)).save(buffer, "JPEG", exif=exif)
    image, _ = photos.decode_photo(buffer.getvalue())
    assert image.shape == (30, 20, 3)
