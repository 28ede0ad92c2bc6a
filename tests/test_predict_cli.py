"""`dig-jax predict`: one photo, one gesture, one mask file; bad input is a one-line error."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from dig_jax import cli
from dig_jax.predict import gesture_from_points, parse_points


def test_parse_points_reads_pairs_with_spaces_or_semicolons():
    pts = parse_points("10,20 30.5,40;50,60")
    np.testing.assert_array_equal(pts, [[10, 20], [30.5, 40], [50, 60]])
    assert pts.dtype == np.float32


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "empty"),
        ("1,2,3", "two numbers"),
        ("a,b", "pairs of numbers"),
        ("nan,3", "NaN or infinite"),
    ],
)
def test_parse_points_names_the_problem(text, message):
    with pytest.raises(ValueError, match=message):
        parse_points(text)


def test_gesture_from_points_click_stroke_and_lasso():
    click = gesture_from_points(np.array([[20, 10]], np.float32), (40, 50), closed=False)
    assert click[10, 20] == 1 and click.sum() < 100  # the radius-5 disc
    lasso = np.array([[5, 5], [40, 5], [40, 30], [5, 30]], np.float32)
    outline = gesture_from_points(lasso, (40, 50), closed=True)
    assert outline[5, 20] == 1 and outline[17, 22] == 0  # drawn, not filled
    with pytest.raises(ValueError, match="does not touch"):
        gesture_from_points(np.array([[500, 500]], np.float32), (40, 50), closed=False)
    with pytest.raises(ValueError, match="at least 3 points"):
        gesture_from_points(lasso[:2], (40, 50), closed=True)


@pytest.fixture
def photo(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    image = rng.integers(0, 255, (45, 70, 3), dtype=np.uint8)
    image[10:35, 20:50] = (200, 30, 30)
    path = tmp_path / "photo.png"
    cv2.imwrite(str(path), image)
    return path


def test_predict_writes_a_mask_of_the_photo_size(photo, tmp_path, tiny_checkpoint, capsys):
    out, over = tmp_path / "out" / "mask.png", tmp_path / "over.png"
    argv = ["predict", "--checkpoint", str(tiny_checkpoint), "--image", str(photo)]
    assert cli.main([*argv, "--points", "35,22", "--out", str(out), "--overlay", str(over)]) == 0
    mask = cv2.imread(str(out), cv2.IMREAD_UNCHANGED)
    assert mask.shape == (45, 70) and set(np.unique(mask)) <= {0, 255}
    assert cv2.imread(str(over)).shape == (45, 70, 3)
    assert f"wrote {out}" in capsys.readouterr().out
    # the written mask refines: it goes back in as --prev-mask with a gesture file
    gesture = np.zeros((45, 70), np.uint8)
    gesture[20:24, 30:34] = 255
    cv2.imwrite(str(tmp_path / "g.png"), gesture)
    again = [*argv, "--gesture", str(tmp_path / "g.png"), "--prev-mask", str(out)]
    assert cli.main([*again, "--out", str(tmp_path / "m2.png")]) == 0
    # an existing file is replaced only with --force (the refinement loop writing back)
    before = out.read_bytes()
    assert cli.main([*again, "--out", str(out)]) == 2
    assert "exists" in capsys.readouterr().err and out.read_bytes() == before
    assert cli.main([*again, "--out", str(out), "--force"]) == 0


def test_predict_turns_a_phone_photo_upright_as_viewers_show_it(tmp_path, tiny_checkpoint, capsys):
    from PIL import Image

    stored = np.zeros((40, 80, 3), np.uint8)  # stored sideways: 80 wide, 40 high
    stored[:, :40] = 255
    image = Image.fromarray(stored)
    exif = image.getexif()
    exif[0x0112] = 6  # EXIF orientation: rotate 90° clockwise to view
    path = tmp_path / "phone.jpg"
    image.save(path, exif=exif.tobytes(), quality=95)
    out = tmp_path / "mask.png"
    argv = ["predict", "--checkpoint", str(tiny_checkpoint), "--image", str(path)]
    assert cli.main([*argv, "--points", "20,70", "--out", str(out)]) == 0  # (x, y) upright
    assert cv2.imread(str(out), cv2.IMREAD_UNCHANGED).shape == (80, 40)  # 40 wide, 80 high
    # a point inside the stored frame but outside the upright one
    assert cli.main([*argv, "--points", "70,20", "--out", str(tmp_path / "m2.png")]) == 2
    assert "does not touch" in capsys.readouterr().err


def test_predict_bad_inputs_are_one_line_errors(photo, tmp_path, tiny_checkpoint, capsys):
    argv = ["predict", "--checkpoint", str(tiny_checkpoint), "--out", str(tmp_path / "m.png")]
    small = tmp_path / "small.png"
    cv2.imwrite(str(small), np.full((5, 5), 255, np.uint8))
    empty = tmp_path / "empty.png"
    cv2.imwrite(str(empty), np.zeros((45, 70), np.uint8))
    not_image = tmp_path / "notes.txt"
    not_image.write_text("hello")
    zero_bytes = tmp_path / "zero.jpg"
    zero_bytes.write_bytes(b"")
    cases = [
        (["--image", str(not_image), "--points", "1,1"], "cannot decode"),
        (["--image", str(zero_bytes), "--points", "1,1"], "empty image file (0 bytes)"),
        (["--image", str(photo), "--gesture", str(small)], "is 5×5 px, the photo is 70×45"),
        (["--image", str(photo), "--gesture", str(empty)], "marks no pixel"),
        (["--image", str(photo), "--points", "1,1", "--prev-mask", str(small)], "prev mask"),
        (["--image", str(photo), "--points", "inf,1"], "NaN or infinite"),
    ]
    for extra, message in cases:
        assert cli.main([*argv, *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and "\n" not in err
    assert not (tmp_path / "m.png").exists()


def test_notebooks_refuses_an_unknown_name(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["notebooks", "nosuch"])
    assert stop.value.code == 2 and "no notebook named ['nosuch']" in capsys.readouterr().err


def test_every_command_is_under_dig_jax():
    assert {"predict", "export", "curves", "tables", "train", "evaluate", "attack"} <= set(
        cli.COMMANDS
    )
