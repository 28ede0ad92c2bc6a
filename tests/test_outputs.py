"""Output folders checked before any work (tests/reliability_cases.md, section "Output folders"):
a command never deletes or replaces a file it did not write."""

from __future__ import annotations

import os

import cv2
import numpy as np
import pytest
from tiny_models import tiny_variables

from dig_jax import attack, evaluate, rclicks
from dig_jax.data import build
from dig_jax.export import save_segmenter
from dig_jax.outputs import MANIFEST, check_out_dir, record_written, written_here

BUILD = ["--source", "procedural:2", "--kinds", "click", "--no-refinement", "--no-multi"]


def users_photos(root):
    """A folder as a user keeps it: `images/` with their own photo, a notes file."""
    (root / "images").mkdir(parents=True)
    (root / "images" / "holiday.jpg").write_bytes(b"my own photo")
    (root / "notes.txt").write_text("mine")
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_build_never_swaps_away_a_users_photos(tmp_path, capsys):
    """Case O1: build --out my_photos, where my_photos/images/ holds the user's photos."""
    before = users_photos(tmp_path / "my_photos")
    with pytest.raises(SystemExit) as exit_info:
        build.main([*BUILD, "--out", str(tmp_path / "my_photos")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--out" in err and "images/holiday.jpg" in err and "not written by dig-jax" in err
    assert {p: p.read_bytes() for p in (tmp_path / "my_photos").rglob("*") if p.is_file()} == before
    with pytest.raises(ValueError, match=r"images/holiday\.jpg"):
        build.build(["procedural:1"], tmp_path / "my_photos", progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["my_photos"]  # no staging left


def test_build_replaces_its_own_build_but_not_a_file_added_to_it(tmp_path, capsys):
    """Case O1: a rebuild replaces an earlier build; a photo the user added to it stops it."""
    out = tmp_path / "out"
    assert build.main([*BUILD, "--out", str(out)]) == 0
    assert build.main([*BUILD, "--out", str(out), "--seed", "3"]) == 0
    assert {"dig.json", "summary.json"} < written_here(out)
    assert len(list((out / "images").iterdir())) == 2
    (out / "images" / "added.jpg").write_bytes(b"mine")
    (out / "dig.json").unlink()  # a missing output is no problem
    with pytest.raises(SystemExit):
        build.main([*BUILD, "--out", str(out)])
    assert "images/added.jpg" in capsys.readouterr().err
    assert (out / "images" / "added.jpg").read_bytes() == b"mine"


def test_out_that_is_a_file_or_under_a_file_is_refused(tmp_path):
    """Case O2: --out naming an existing file (was FileExistsError after the whole run)."""
    (tmp_path / "f").write_text("x")
    with pytest.raises(ValueError, match=r"--out .*f is a file, not a folder"):
        check_out_dir(tmp_path / "f", ["a.json"])
    with pytest.raises(ValueError, match=r"cannot be created: .*f is a file"):
        check_out_dir(tmp_path / "f" / "sub", ["a.json"])
    with pytest.raises(ValueError, match=r"a.json \(a folder\)"):
        (tmp_path / "d" / "a.json").mkdir(parents=True)
        check_out_dir(tmp_path / "d", ["a.json"])
    (tmp_path / "e").mkdir()
    os.symlink(tmp_path / "d", tmp_path / "e" / "x")
    with pytest.raises(ValueError, match=r"x \(a link\)"):
        check_out_dir(tmp_path / "e", ["x/"])


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_out_is_refused(tmp_path):
    """Case O3: --out in a read-only folder (was PermissionError after the whole run)."""
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro").chmod(0o555)
    try:
        with pytest.raises(ValueError, match="cannot write in"):
            check_out_dir(tmp_path / "ro" / "out", ["a.json"])
    finally:
        (tmp_path / "ro").chmod(0o755)


def test_unwritable_out_is_refused_as_root_too(tmp_path, monkeypatch, capsys):
    """Case O3 where the probe file cannot be created (what a read-only folder does to a
    non-root user), for every command: exit 2 before any work."""
    import tempfile

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "TemporaryFile", refuse)
    with pytest.raises(ValueError, match=r"--out .*: cannot write in .* \(Permission denied\)"):
        check_out_dir(tmp_path / "out", ["a.json"])
    with pytest.raises(SystemExit) as exit_info:
        build.main([*BUILD, "--out", str(tmp_path / "out")])
    assert exit_info.value.code == 2 and "Permission denied" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_manifest_is_kept_and_read_safely(tmp_path):
    record_written(tmp_path, ["a.json", "images/x.png"])
    record_written(tmp_path, ["images/y.png"], forget=("images/",))
    assert written_here(tmp_path) == {"a.json", "images/y.png"}
    (tmp_path / MANIFEST).write_text("{not json")
    assert written_here(tmp_path) == set()
    (tmp_path / MANIFEST).write_text('{"a": 1}')
    assert written_here(tmp_path) == set()


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    config, variables = tiny_variables()
    return save_segmenter(tmp_path_factory.mktemp("ck") / "tiny.digjax", variables, config)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    data = tmp_path_factory.mktemp("toyset")
    (data / "images").mkdir()
    (data / "masks").mkdir()
    mask = np.zeros((24, 32), np.uint8)
    mask[4:16, 6:20] = 255
    cv2.imwrite(str(data / "images" / "im0.png"), np.full((24, 32, 3), 100, np.uint8))
    cv2.imwrite(str(data / "masks" / "im0.png"), mask)
    return data


def commands(checkpoint, dataset):
    return {
        "evaluate": (evaluate.main, "metrics.json",
                     ["--checkpoint", str(checkpoint), "--datasets", "procedural:1"]),
        "attack": (attack.main, "breps.json",
                   ["--checkpoint", str(checkpoint), "--datasets", str(dataset)]),
        "rclicks": (rclicks.main, "rclicks.json",
                    ["--checkpoint", str(checkpoint), "--datasets", "procedural:1"]),
    }  # fmt: skip


@pytest.mark.parametrize("command", ["evaluate", "attack", "rclicks"])
@pytest.mark.parametrize("case", ["file", "foreign", "under_file"])
def test_commands_check_out_before_any_work(checkpoint, dataset, tmp_path, capsys, command, case):
    """Cases O2, O4: evaluate / attack / rclicks --out naming a file, or a folder holding a
    metrics / results file of the user's: exit 2 with one line before any work."""
    main, name, argv = commands(checkpoint, dataset)[command]
    out = tmp_path / "out"
    if case == "file":
        out.write_text("mine")
    elif case == "foreign":
        out.mkdir()
        (out / name).write_text("mine")
    else:
        out.write_text("mine")
        out = out / "sub"
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--out", str(out)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "--out" in err[-1] and "Traceback" not in "".join(err)
    kept = out / name if case == "foreign" else tmp_path / "out"
    assert kept.read_text() == "mine"


def test_tables_checks_out_and_reads_json_safely(tmp_path, capsys):
    """`dig-jax tables`: a foreign tables.md in --out, a metrics file that is not UTF-8, nested
    too deep or not an object: exit 2 with one line."""
    from dig_jax.evaluation.tables import main as tables_main

    good = tmp_path / "m.json"
    good.write_text('{"results": {}}')
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "tables.md").write_text("mine")
    for argv, message in [
        ([str(good), "--out", str(tmp_path / "o")], "tables.md, not written by dig-jax"),
        ([str(tmp_path / "missing.json")], "cannot read"),
    ]:
        with pytest.raises(SystemExit) as exit_info:
            tables_main(argv)
        assert exit_info.value.code == 2 and message in capsys.readouterr().err
    for data, message in [(b'{"results": \xff}', "not UTF-8"), (b"[" * 10**5, "nested too deep"),
                          (b"[1]", "is not a metrics.json")]:  # fmt: skip
        good.write_bytes(data)
        with pytest.raises(SystemExit):
            tables_main([str(good)])
        assert message in capsys.readouterr().err
    assert (tmp_path / "o" / "tables.md").read_text() == "mine"
