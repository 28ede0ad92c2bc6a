"""The training loop: device-count invariance, kill-and-resume, stop signals, corrupted
checkpoints, configs."""

from __future__ import annotations

import functools
import io
import json
import os
import shutil
import signal
import tarfile
from pathlib import Path

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from shared_run import once_per_run
from tiny_models import TINY_MODEL_CONFIG, TINY_MODEL_FLAGS

import dig_jax
from dig_jax.cpu import init_compiler_options
from dig_jax.models.interactive import build_segmenter
from dig_jax.train import checkpointing, snapshot
from dig_jax.train.__main__ import load_config, main, parse_flags
from dig_jax.train.config import validate_config
from dig_jax.train.input_pipeline import (
    device_batch,
    make_train_iterator,
    resolve_records,
    synthetic_sample,
)
from dig_jax.train.snapshot import main as snapshot_main
from dig_jax.train.state import make_optimizer
from dig_jax.train.train import init_state, make_mesh, to_global, train, train_step

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENTS = (
    "hrnet_base",
    "hrnet_dataaug",
    "hrnet_multihead",
    "hrnet_multihead_aug",
    "context_baseline",
)


def tiny_config(total_steps: int = 4):
    """hrnet_base:tiny with the test model (2 branches, not 4: the train step, evaluation and
    export compile in a fraction of the time; what is checked here is the loop, not the net)."""
    config = load_config(str(ROOT / "experiments" / "hrnet_base.py") + ":tiny")
    config.model.update(TINY_MODEL_CONFIG)
    config.total_steps = total_steps
    return config


def params_of(result) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree.leaves(jax.device_get(result.state.params))]


def exported_params(workdir: Path) -> list[np.ndarray]:
    segmenter = dig_jax.load_segmenter(workdir / "segmenter.digjax")
    return [np.asarray(x) for x in jax.tree.leaves(segmenter.variables["params"])]


@pytest.mark.slow  # compiles the train step for 1 and 4 devices
def test_one_step_on_4_devices_matches_1_device():
    config = tiny_config()
    model = build_segmenter(config.model)
    tx = make_optimizer(config.optim, config.total_steps)
    batch = device_batch(next(make_train_iterator(config)))
    shape = (config.batch_size, config.image_size, config.image_size, model.in_channels)
    # One initial state (its compile is as long as the step's), replicated onto each mesh.
    initial_state = jax.device_get(
        jax.jit(
            functools.partial(init_state, model, tx, shape),
            compiler_options=init_compiler_options() or None,
        )(jax.random.key(0))
    )
    initial = initial_state.params
    results = []
    for n in (1, 4):
        mesh = make_mesh(n)
        replicated = NamedSharding(mesh, P())
        sharding = jax.tree.map(lambda _, r=replicated: r, initial_state)
        state = jax.device_put(initial_state, sharding)
        step = jax.jit(
            functools.partial(
                train_step, model=model, input_kind="gesture", loss_config=config.loss
            ),
            in_shardings=(sharding, NamedSharding(mesh, P("data"))),
            out_shardings=(sharding, replicated),
            donate_argnums=0,
        )
        state, metrics = step(state, to_global(batch, mesh))
        results.append((jax.device_get(metrics), jax.device_get(state.params)))
    (metrics1, params1), (metrics4, params4) = results
    assert np.isfinite(metrics1["loss"])
    np.testing.assert_allclose(metrics4["loss"], metrics1["loss"], rtol=1e-5)
    np.testing.assert_allclose(metrics4["grad_norm"], metrics1["grad_norm"], rtol=1e-4)
    # Adam's first update is -lr * g / (|g| + 1e-8) (plus weight decay): parameters agree to a
    # fraction of the learning rate, except where the gradient itself is summation-order noise
    # (|g| within ~100x Adam's epsilon, told by a 1-device update under 0.99 lr), whose sign
    # may differ between 1 and 4 devices: those move by at most 2 lr either way. (Noise reaches
    # ~10x epsilon: one element of the head's 3x3 kernel gradient, a sum over 32k pixels, came
    # out near +-1e-7 with opposite signs on 1 and 4 devices once that gradient was summed by
    # the native kernel; the bound was 0.9 lr, i.e. 10x epsilon, before.)
    lr, flipped, total = config.optim.lr, 0, 0
    for a, b, p0 in zip(*(jax.tree.leaves(t) for t in (params1, params4, initial)), strict=True):
        decided = np.abs(a - p0) > 0.99 * lr
        np.testing.assert_allclose(a[decided], b[decided], rtol=0, atol=1e-4)
        assert np.abs(a - b).max() <= 2 * lr + 1e-6
        flipped, total = flipped + int((np.abs(a - b) > 1e-4).sum()), total + a.size
    assert flipped <= max(total // 1000, 1)  # noise-level gradients stay the exception


@pytest.fixture(scope="module")
def straight_run(tmp_path_factory):
    """4 steps through the command line (`python -m dig_jax.train`), read back from the export;
    trained once per test run (pytest-xdist workers share it)."""
    config = str(ROOT / "experiments" / "hrnet_base.py") + ":tiny"

    def build(workdir: Path) -> None:
        flags = ["--config", config, "--workdir", str(workdir), "--config.total_steps=4"]
        assert main([*flags, *TINY_MODEL_FLAGS]) == 0

    workdir = once_per_run(tmp_path_factory, "straight_run", build)
    return workdir, exported_params(workdir)


def test_straight_run_writes_metrics_table_and_export(straight_run):
    workdir, _ = straight_run
    rows = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    train_rows = [r for r in rows if "loss" in r]
    assert [r["step"] for r in train_rows] == [1, 2, 3, 4]
    assert all(np.isfinite(r["loss"]) and r["steps_per_s"] > 0 for r in train_rows)
    assert any("eval/rice_local/all/create" in r for r in rows)
    final = [r for r in rows if "eval/rice_local/all/refine" in r][-1]
    assert final["step"] == 4 and -1.0 <= final["eval/rice_local/all/refine"] <= 1.0
    assert (workdir / "segmenter.digjax").is_file()


def train_steps_logged(workdir: Path) -> list[int]:
    rows = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    return [r["step"] for r in rows if "loss" in r]


def test_kill_and_resume_gives_identical_parameters(straight_run, tmp_path):
    _, straight = straight_run
    config = tiny_config()
    config.checkpoint.async_save = True  # the default outside tests: exercise it once
    first = train(config, tmp_path, stop_after_steps=2)
    assert first.step == 2
    # A kill after logging step 3 but before its checkpoint leaves a row the resumed run redoes.
    with (tmp_path / "metrics.jsonl").open("a") as f:
        f.write(json.dumps({"step": 3, "loss": 123.0}) + "\n" + '{"step": 4, "lo')
    resumed = train(config, tmp_path)
    assert resumed.step == 4
    for a, b in zip(straight, params_of(resumed), strict=True):
        np.testing.assert_array_equal(a, b)
    assert train_steps_logged(tmp_path) == [1, 2, 3, 4]
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert all(r["loss"] != 123.0 for r in rows if "loss" in r)


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_stop_signal_checkpoints_the_step_and_the_run_resumes(
    straight_run, tmp_path, monkeypatch, capsys, signum, code
):
    _, straight = straight_run
    real_save = checkpointing.save

    def save_then_signal(manager, step, *args, **kwargs):  # the signal arrives after step 1
        saved = real_save(manager, step, *args, **kwargs)
        if step == 1:
            os.kill(os.getpid(), signum)
        return saved

    monkeypatch.setattr(checkpointing, "save", save_then_signal)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    config = str(ROOT / "experiments" / "hrnet_base.py") + ":tiny"
    flags = ["--config", config, "--workdir", str(tmp_path), "--config.total_steps=4"]
    flags += ["--config.checkpoint.save_every=100"]  # step 2 is saved for the stop alone
    assert main([*flags, *TINY_MODEL_FLAGS]) == code  # step 2 runs, then the loop stops
    error = capsys.readouterr().err
    assert f"stopped by {signal.Signals(signum).name} after step 2 of 4" in error
    assert max(int(p.name) for p in (tmp_path / "checkpoints").iterdir()) == 2
    assert not (tmp_path / "segmenter.digjax").exists()
    assert {s: signal.getsignal(s) for s in handlers} == handlers  # handlers given back
    monkeypatch.undo()
    assert main([*flags, *TINY_MODEL_FLAGS]) == 0
    for a, b in zip(straight, exported_params(tmp_path), strict=True):
        np.testing.assert_array_equal(a, b)
    assert train_steps_logged(tmp_path) == [1, 2, 3, 4]


def test_corrupted_final_checkpoint_is_replaced_and_run_finishes(straight_run, tmp_path):
    workdir, straight = straight_run
    shutil.copytree(workdir, tmp_path, dirs_exist_ok=True)
    (tmp_path / "segmenter.digjax").unlink()
    for path in (tmp_path / "checkpoints" / "4" / checkpointing.STATE).rglob("*"):
        if path.is_file():
            path.write_bytes(b"\x00garbage")
    with pytest.warns(UserWarning, match="step 4"):
        resumed = train(tiny_config(), tmp_path)  # restores step 2, saves step 4 again
    assert resumed.step == 4
    for a, b in zip(straight, exported_params(tmp_path), strict=True):
        np.testing.assert_array_equal(a, b)
    assert train_steps_logged(tmp_path) == [1, 2, 3, 4]


def test_corrupted_latest_checkpoint_falls_back_with_warning(straight_run, tmp_path):
    _, straight = straight_run
    train(tiny_config(), tmp_path, stop_after_steps=2)
    train(tiny_config(), tmp_path, stop_after_steps=1)  # checkpoint at step 3 (forced)
    latest = tmp_path / "checkpoints" / "3" / checkpointing.STATE
    files = [p for p in latest.rglob("*") if p.is_file()]
    assert files
    for path in files:
        path.write_bytes(b"\x00garbage")
    with pytest.warns(UserWarning, match="step 3"):
        resumed = train(tiny_config(), tmp_path)
    for a, b in zip(straight, params_of(resumed), strict=True):
        np.testing.assert_array_equal(a, b)
    assert train_steps_logged(tmp_path) == [1, 2, 3, 4]  # step 3 is logged once


@pytest.mark.parametrize("name", EXPERIMENTS)
@pytest.mark.parametrize("variant", ["paper", "offline", "demo", "tiny"])
def test_experiment_configs_validate(name, variant):
    config = load_config(f"{ROOT / 'experiments' / name}.py:{variant}")
    validate_config(config, num_devices=1)
    assert config.variant == variant


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("optim.lr", -1.0),
        ("batch_size", 0),
        ("model.input_kind", "clicks"),
        ("loss.mask", "dice"),
        ("loss.obey_weight", -1.0),
        ("image_size", 48),
        ("data.multi_region_prob", 1.5),
        ("model.stage_modules", (1, 1)),
        ("checkpoint.keep", 0),
        ("num_devices", -1),
    ],
)
def test_config_validation_names_the_bad_key(key, value):
    config = tiny_config()
    *parents, leaf = key.split(".")
    node = config
    for name in parents:
        node = node[name]
    node[leaf] = value
    with pytest.raises(ValueError, match=rf"config\.{key.replace('.', '[.]')}"):
        validate_config(config)


def test_train_validates_config_before_building_the_mesh(tmp_path, monkeypatch):
    def no_mesh(num_devices):
        raise AssertionError(f"make_mesh({num_devices}) ran before validation")

    monkeypatch.setattr("dig_jax.train.train.make_mesh", no_mesh)
    for key, value in (("num_devices", -1), ("batch_size", 0)):
        config = tiny_config()
        config[key] = value
        with pytest.raises(ValueError, match=rf"config\.{key}"):
            train(config, tmp_path)


def test_batch_must_divide_over_devices():
    config = tiny_config()
    config.batch_size = 6
    with pytest.raises(ValueError, match=r"config\.batch_size"):
        validate_config(config, num_devices=4)


def test_config_flags_override_and_name_bad_keys():
    spec = str(ROOT / "experiments" / "hrnet_base.py") + ":tiny"

    def parse(*overrides):
        return parse_flags(["--config", spec, "--workdir", "w", *overrides])[0]

    config = parse("--config.total_steps=7", "--config.optim.schedule=warmup_cosine")
    assert config.total_steps == 7 and config.optim.schedule == "warmup_cosine"
    config = parse("--config.model.widths=(2, 4, 8, 16)", "--config.loss.mask=bce")
    assert config.model.widths == (2, 4, 8, 16) and config.loss.mask == "bce"
    assert parse("--config.data.sources=('procedural:3',)").data.sources == ("procedural:3",)
    with pytest.raises(ValueError, match=r"--config\.optim\.nope: the config has no field"):
        parse("--config.optim.nope=1")
    with pytest.raises(ValueError, match=r"config\.total_steps=many"):
        parse("--config.total_steps=many")
    with pytest.raises(ValueError, match=r"--config\.seed\.x: the config has no field"):
        parse("--config.seed.x=1")
    with pytest.raises(ValueError, match="--workdir is required"):
        parse_flags(["--config", spec])
    with pytest.raises(ValueError, match="--config is required"):
        parse_flags(["--workdir", "w"])


def test_synthetic_samples_follow_the_sample_contract():
    a, b = synthetic_sample(3, 5, 32), synthetic_sample(3, 5, 32)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    assert a["image"].shape == (32, 32, 3) and a["image"].dtype == np.uint8
    for key in ("gesture", "distance", "prev_mask", "target", "region"):
        assert a[key].shape == (32, 32) and a[key].dtype == np.uint8
    assert bool(a["has_prev"]) and a["prev_mask"].sum() < a["region"].sum()
    assert a["distance"][a["gesture"] == 1].max() == 0


def test_load_config_errors_name_the_problem(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        load_config(str(tmp_path / "missing.py") + ":demo")
    (tmp_path / "empty.py").write_text("x = 1\n")
    with pytest.raises(ValueError, match="get_config"):
        load_config(str(tmp_path / "empty.py"))
    with pytest.raises(ValueError, match="variant"):
        load_config(str(ROOT / "experiments" / "hrnet_base.py") + ":huge")


def test_holdout_split_is_disjoint_and_complete():
    train_ids = [r.image_id for r in resolve_records("procedural:25%train", 32)]
    val_ids = [r.image_id for r in resolve_records("procedural:25%val", 32)]
    assert len(val_ids) == 3 and len(train_ids) == 22
    assert not set(train_ids) & set(val_ids)
    with pytest.raises(ValueError, match="%train or %val"):
        resolve_records("procedural:25%test", 32)


def test_a_snapshot_moves_a_run_to_a_new_workdir_and_it_resumes(straight_run, tmp_path):
    _, straight = straight_run
    first = tmp_path / "first"
    train(tiny_config(), first, stop_after_steps=2)
    packed = snapshot.pack(first, tmp_path / "run.tar")
    assert snapshot.pack(first, tmp_path / "again.tar").read_bytes() == packed.read_bytes()
    assert snapshot.read_manifest(packed)["step"] == 2
    moved = tmp_path / "moved"
    assert snapshot_main(["unpack", str(packed), "--workdir", str(moved)]) == 0
    assert snapshot.saved_steps(moved) == [2]
    resumed = train(tiny_config(), moved)
    assert resumed.step == 4
    for a, b in zip(straight, params_of(resumed), strict=True):
        np.testing.assert_array_equal(a, b)
    assert train_steps_logged(moved) == [1, 2, 3, 4]
    with pytest.raises(snapshot.SnapshotError, match="already holds a run"):
        snapshot.unpack(packed, moved)  # nothing is overwritten
    compact = snapshot.pack(first, tmp_path / "compact.tar", compact=True)
    with tarfile.open(compact) as tar:
        tar.extractall(tmp_path / "raw", filter="data")
    state = snapshot._load_state(tmp_path / "raw" / snapshot.COMPACT)

    def floats(tree) -> set[str]:
        leaves = jax.tree.leaves(tree)
        return {str(x.dtype) for x in leaves if jax.numpy.issubdtype(x.dtype, jax.numpy.floating)}

    assert floats(state["opt_state"]) == {"bfloat16"} and floats(state["params"]) == {"float32"}
    assert snapshot.read_manifest(compact)["compact"] == ["opt_state"]
    assert snapshot.unpack(compact, tmp_path / "from_compact") == 2
    assert not (tmp_path / "from_compact" / snapshot.COMPACT).exists()
    resumed = train(tiny_config(), tmp_path / "from_compact")
    assert resumed.step == 4  # the moments were rounded to bfloat16 once: close, not equal
    for a, b in zip(straight, params_of(resumed), strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-4)


def test_snapshot_errors_name_the_problem(tmp_path):
    with pytest.raises(snapshot.SnapshotError, match="no saved checkpoint step"):
        snapshot.pack(tmp_path, tmp_path / "x.tar")
    (tmp_path / "checkpoints" / "3.orbax-checkpoint-tmp-1").mkdir(parents=True)
    (tmp_path / "checkpoints" / "2.corrupt").mkdir()
    with pytest.raises(snapshot.SnapshotError, match="no saved checkpoint step"):
        snapshot.pack(tmp_path, tmp_path / "x.tar")  # neither is a finished step
    (tmp_path / "checkpoints" / "1").mkdir()
    with pytest.raises(snapshot.SnapshotError, match=r"no checkpoint at step 5 \(saved: \[1\]\)"):
        snapshot.pack(tmp_path, tmp_path / "x.tar", step=5)
    junk = tmp_path / "junk.tar"
    junk.write_bytes(b"\x00not a tar")
    with pytest.raises(snapshot.SnapshotError, match="exists and is not a dig-jax snapshot"):
        snapshot.pack(tmp_path, junk)  # a file of the user's is never replaced
    assert junk.read_bytes() == b"\x00not a tar"
    with pytest.raises(snapshot.SnapshotError, match="is a folder"):
        snapshot.pack(tmp_path, tmp_path / "checkpoints")
    with pytest.raises(snapshot.SnapshotError, match="not a dig-jax snapshot"):
        snapshot.unpack(junk, tmp_path / "new")
    with pytest.raises(snapshot.SnapshotError, match="no such snapshot file"):
        snapshot.unpack(tmp_path / "missing.tar", tmp_path / "new")
    with tarfile.open(junk, "w") as tar:  # a tar, but with no manifest
        tar.add(tmp_path / "checkpoints", arcname="checkpoints")
    with pytest.raises(snapshot.SnapshotError, match="not a dig-jax snapshot"):
        snapshot.unpack(junk, tmp_path / "new")
    escaping = tmp_path / "escaping.tar"
    with tarfile.open(escaping, "w") as tar:
        for name, data in (("snapshot.json", b'{"format": 1, "step": 1}'), ("../evil", b"x")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with pytest.raises(snapshot.SnapshotError, match=r"unexpected member '\.\./evil'"):
        snapshot.unpack(escaping, tmp_path / "new")
    assert not (tmp_path / "evil").exists()
