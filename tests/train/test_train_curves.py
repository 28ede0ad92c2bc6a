"""Training-curve figure from metrics.jsonl."""

from __future__ import annotations

import json

import pytest

from dig_jax.train.curves import plot_curves, read_metrics


def test_plot_curves_writes_png(tmp_path):
    rows = [{"step": s, "loss": 1.0 / s, "lr": 1e-3} for s in range(1, 30)]
    rows.append({"step": 29, "eval/rice_local/all/create": 0.5, "eval/rice_local/all/refine": 0.1})
    path = tmp_path / "metrics.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert len(read_metrics(path)) == 30
    out = plot_curves(path, tmp_path / "fig" / "curves.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_line_names_file_and_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\nnot json\n')
    with pytest.raises(ValueError, match=r"metrics.jsonl:2: not JSON"):
        read_metrics(path)


def test_missing_or_odd_metrics_are_one_line_errors(tmp_path, capsys):
    """`curves` on a workdir without metrics.jsonl printed a FileNotFoundError traceback."""
    from dig_jax.train.curves import main

    with pytest.raises(SystemExit) as exit_info:
        main([str(tmp_path / "nowhere")])
    assert exit_info.value.code == 2 and "metrics.jsonl: cannot be read" in capsys.readouterr().err
    path = tmp_path / "metrics.jsonl"
    for text, message in [(b"\xff\n", "not UTF-8"), (b"[1]\n", r"metrics\.jsonl:1: not a metrics"),
                          (b"[" * 10**5 + b"\n", "nested too deep")]:  # fmt: skip
        path.write_bytes(text)
        with pytest.raises(ValueError, match=message):
            read_metrics(path)


def test_out_over_a_users_file_is_refused(tmp_path, capsys):
    """`curves --out photo.png` replaced any file there."""
    from dig_jax.train.curves import main

    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "loss": 1.0, "lr": 0.1}\n')
    (tmp_path / "photo.png").write_bytes(b"mine")
    with pytest.raises(SystemExit) as exit_info:
        main([str(tmp_path), "--out", str(tmp_path / "photo.png")])
    assert (
        exit_info.value.code == 2 and "photo.png, not written by dig-jax" in capsys.readouterr().err
    )
    assert (tmp_path / "photo.png").read_bytes() == b"mine"
    assert main([str(tmp_path), "--out", str(tmp_path / "plots" / "c.png")]) == 0
    assert main([str(tmp_path), "--out", str(tmp_path / "plots" / "c.png")]) == 0  # its own
