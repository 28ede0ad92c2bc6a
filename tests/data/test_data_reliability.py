"""Bad data and bad data arguments (tests/reliability_cases.md, section "data"): no hang on an
all-bad source, clear errors for bad specs and flags, nothing silently dropped or half-read, a
build that produces nothing never replaces an earlier one."""

from __future__ import annotations

import json
import warnings

import cv2
import numpy as np
import pytest

from dig_jax.data.build import build, main, parse_kinds
from dig_jax.data.pipeline import NoValidSampleError, make_dataset, resolve_source
from dig_jax.data.sources.benchmark_folder import benchmark_folder, scan_benchmark_folder
from dig_jax.data.sources.dig_json import DigRowWriter, dig_json, write_dig_json
from dig_jax.data.sources.record import Record, jpeg_is_truncated, read_image

BASE = dict(image_size=32, batch_size=2, shard=(0, 1), read_threads=0)


def folder(root, good: int = 0, bad: int = 3, unmasked: int = 0):
    """A benchmark folder: `good` usable photos, `bad` ones whose mask has the wrong size,
    `unmasked` photos without any mask."""
    (root / "images").mkdir(parents=True)
    (root / "masks").mkdir()
    image = np.full((48, 48, 3), 90, np.uint8)
    mask = np.zeros((48, 48), np.uint8)
    mask[8:40, 8:40] = 255
    for i in range(good):
        cv2.imwrite(str(root / "images" / f"good{i}.png"), image)
        cv2.imwrite(str(root / "masks" / f"good{i}.png"), mask)
    for i in range(bad):
        cv2.imwrite(str(root / "images" / f"bad{i}.png"), image)
        cv2.imwrite(str(root / "masks" / f"bad{i}.png"), mask[:20])
    for i in range(unmasked):
        cv2.imwrite(str(root / "images" / f"nomask{i}.png"), image)
    return root


@pytest.mark.parametrize("workers", [0, 1])
def test_all_bad_source_raises_instead_of_spinning(tmp_path, workers):
    """Case D1: next() on a train dataset whose every record is bad."""
    spec = f"folder:{folder(tmp_path / 'allbad')}"
    ds = make_dataset(dict(BASE, sources=[spec], worker_count=workers, max_failures=12), "train")
    with pytest.raises(NoValidSampleError, match=r"source 'allbad' .* 12 tries.*mask size"):
        next(iter(ds))


def test_a_source_with_some_good_records_keeps_going(tmp_path):
    """Case D1, the other side: bad records among good ones are skipped, not fatal."""
    spec = f"folder:{folder(tmp_path / 'mixed', good=1, bad=2)}"
    ds = iter(make_dataset(dict(BASE, sources=[spec], max_failures=40), "train"))
    for _ in range(10):
        assert next(ds)["image"].shape == (2, 32, 32, 3)


def test_records_without_regions_count_as_failures(tmp_path):
    """Case D1 with readable files: no region of >= 300 px anywhere."""
    image = np.zeros((64, 64, 3), np.uint8)
    small = np.zeros((1, 64, 64), np.uint8)
    small[0, :5, :5] = 1
    records = [Record("specks", f"s{k}", image, (small, None)) for k in range(2)]
    ds = make_dataset(dict(BASE, sources=[records], max_failures=6), "train")
    with pytest.raises(NoValidSampleError, match="no usable region"):
        next(iter(ds))
    with pytest.raises(ValueError, match="max_failures"):
        make_dataset(dict(BASE, sources=[records], max_failures=-1))


@pytest.mark.parametrize(
    "spec",
    ["procedural:abc", "procedural:0", "procedural:5:x", "procedural:1:2:3",
     "procedural:2:-1", "procedural:10000000000"],  # issue 43: failed at load; listed 1e10
)  # fmt: skip
def test_bad_procedural_specs_name_the_spec(spec):
    """Case D2: source specs that do not parse."""
    with pytest.raises(ValueError, match=r"must be procedural\[:N\[:SEED\]\]"):
        resolve_source(spec)


def test_procedural_specs_that_parse():
    assert len(resolve_source("procedural:3", image_size=(32, 32))) == 3
    assert len(resolve_source("procedural:2:7", image_size=(32, 32))) == 2
    with pytest.raises(ValueError, match=r"size: must be 16\.\.8192 px per side"):
        resolve_source("procedural:1", image_size=(10**6, 10**6))


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--limit", "0"], "--limit must be >= 1, got 0"),
        (["--limit", "-1"], "--limit must be >= 1, got -1"),
        (["--kinds", "bogus"], "--kinds: 'bogus' is not a gesture kind"),
        (["--kinds", "7"], "--kinds: '7' is not a gesture kind"),
        (["--image-size", "0"], "--image-size must be in 16..8192 px"),
        (["--image-size", "100000"], "--image-size must be in 16..8192 px"),
        (["--seed", "-1"], "--seed must be >= 0, got -1"),  # issue 43: did not name the flag
    ],
)
def test_build_rejects_bad_flags(tmp_path, capsys, flags, message):
    """Case D3: build --limit 0 / -1, --kinds bogus."""
    with pytest.raises(SystemExit) as exit_info:
        main(["--source", "procedural:1", "--out", str(tmp_path / "out"), *flags])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]
    assert not (tmp_path / "out").exists()


def test_kinds_read_codes_and_names():
    assert parse_kinds("click,rectangle") == (0, 4) and parse_kinds("4, 0,4") == (4, 0)


def test_build_limit_counts_records(tmp_path):
    """Case D3: --limit 1 builds one record per source (0 builds none: an error)."""
    table = build(["procedural:3"], tmp_path / "one", limit=1, kinds=(0,), refinement=False,
                  multi=False, progress=False)  # fmt: skip
    assert table["procedural:3"]["images"] == 1
    with pytest.raises(ValueError, match="no sample was built"):
        build(["procedural:3"], tmp_path / "none", limit=0, progress=False)
    assert not (tmp_path / "none").exists()
    with pytest.raises(ValueError, match="limit: must be >= 0"):
        build(["procedural:3"], tmp_path / "neg", limit=-1, progress=False)


def test_build_that_produces_nothing_keeps_the_earlier_result(tmp_path, capsys):
    """Case D4: an all-bad source built into a folder holding an earlier build."""
    out = tmp_path / "out"
    argv = ["--out", str(out), "--kinds", "click", "--no-refinement", "--no-multi"]
    assert main(["--source", "procedural:1", *argv]) == 0
    before = {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    bad = folder(tmp_path / "allbad")
    assert main(["--source", f"folder:{bad}", *argv]) == 1
    assert "no sample was built" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert main(["--source", "procedural:2:5", *argv]) == 0  # a real result replaces it
    assert len(json.loads((out / "dig.json").read_text())) == 2
    assert len(list((out / "images").iterdir())) == 2  # the old image went with the old build
    assert sorted(p.name for p in tmp_path.iterdir()) == ["allbad", "out"]  # no leftovers


def test_bad_source_spec_in_build_is_one_line(tmp_path, capsys):
    """Case D2 through the build command."""
    assert main(["--source", "procedural:abc", "--out", str(tmp_path / "o")]) == 1
    assert "must be procedural[:N[:SEED]]" in capsys.readouterr().err


def test_dig_json_gesture_kind_out_of_range_is_refused(tmp_path):
    """Case D5: DIG JSON with gesture kind 9."""
    cv2.imwrite(str(tmp_path / "im.png"), np.zeros((20, 20, 3), np.uint8))
    mask = np.zeros((20, 20), np.uint8)
    mask[5:15, 5:15] = 1
    writer = DigRowWriter("im", (20, 20), "im.png")
    writer.set_object(1, mask)
    writer.add_sample(obj_id=1, target=mask, annotation=mask, gesture=9, mode=1, has_prior=False)
    write_dig_json(tmp_path / "d.json", [writer.row])
    (entry,) = dig_json(tmp_path / "d.json", tmp_path)
    with pytest.raises(ValueError, match=r"d\.json row 'im' #0: field 'gesture' must be .* 0\.\.4"):
        entry.load()


def test_images_without_masks_are_reported(tmp_path):
    """Case D6: photos in images/ with no mask are named, not silently dropped."""
    root = folder(tmp_path / "f", good=1, bad=0, unmasked=2)
    records, problems = scan_benchmark_folder(root)
    assert len(records) == 1 and len(problems) == 2
    assert all("has no mask" in p for p in problems) and "nomask0.png" in problems[0]
    with pytest.warns(UserWarning, match=r"2 image\(s\) without a mask left out.*nomask0"):
        assert len(benchmark_folder(root)) == 1


def test_truncated_jpeg_is_refused_naming_the_file(tmp_path):
    """Case D7: a JPEG cut short decodes half grey with only a libjpeg warning."""
    image = np.random.default_rng(0).integers(0, 256, (64, 80, 3)).astype(np.uint8)
    _, data = cv2.imencode(".jpg", image)
    data = data.tobytes()
    (tmp_path / "cut.jpg").write_bytes(data[: len(data) // 2])
    (tmp_path / "tail.jpg").write_bytes(data + b"\x00trailer bytes after the end marker")
    with pytest.raises(ValueError, match=r"truncated image file .*cut\.jpg"):
        read_image(tmp_path / "cut.jpg")
    assert read_image(tmp_path / "tail.jpg").shape == (64, 80, 3)
    assert jpeg_is_truncated(data[:100]) and not jpeg_is_truncated(b"\x89PNG not a jpeg")


def test_real_jpegs_are_not_flagged(shared_data):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        paths = sorted((shared_data / "grabcut" / "images").glob("*.jpg"))[:10]
        assert paths and not any(jpeg_is_truncated(p.read_bytes()) for p in paths)
