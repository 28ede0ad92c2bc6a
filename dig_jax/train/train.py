"""The training loop, in one readable function: `train(config, workdir)`.

config -> device mesh (`data` axis) -> abstract init (`jax.eval_shape`) + sharded init ->
grain input (per-process batches assembled into global arrays) -> jitted, donated train step ->
periodic RICE evaluation per gesture kind -> orbax checkpoints (auto-resume, data position
included) -> JSONL metrics + tqdm progress -> exported segmenter file.
A NaN guard (an all-finite flag from every step) stops training before a non-finite state is
saved or exported; a resume whose config builds another model stops before touching anything
(`dig_jax.train.checkpointing`); SIGTERM or Ctrl-C ends the step in progress, saves a checkpoint
at it and returns (`dig_jax.train.stop_signal`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import shutil
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from tqdm.auto import tqdm

from dig_jax.cpu import (
    freed_pages_returned,
    init_compiler_options,
    predict_compiler_options,
    release_freed_memory,
    train_compiler_options,
)
from dig_jax.evaluation.scores import format_rice_table, score_batch, summarize_scores
from dig_jax.models.interactive import build_segmenter, pretrained_variables
from dig_jax.prompts.encode import batch_to_input, encode_context_clicks
from dig_jax.train import checkpointing, distributed
from dig_jax.train.config import validate_config
from dig_jax.train.evals import LoopEvaluators
from dig_jax.train.input_pipeline import make_eval_batches, make_train_iterator
from dig_jax.train.iterative import IterativeConfig, iterate_batch
from dig_jax.train.robust import Attacker, RobustConfig, click_map_function, robust_batch
from dig_jax.train.state import TrainState, make_optimizer, make_schedule, with_pretrained
from dig_jax.train.step import init_state, train_step
from dig_jax.train.stop_signal import StopOnSignal


@dataclasses.dataclass
class TrainResult:
    state: TrainState
    step: int
    eval_metrics: dict[str, float]
    stopped_by: str | None = None  # "SIGTERM" / "SIGINT" / "preemption": checkpointed, unfinished


def make_mesh(num_devices: int = 0) -> Mesh:
    """1-D mesh with axis `data` over all devices, or the first `num_devices` (single host)."""
    devices = jax.devices()
    if num_devices:
        if num_devices > len(devices) or jax.process_count() > 1:
            raise ValueError(
                f"num_devices={num_devices} needs a single host with that many devices"
            )
        devices = devices[:num_devices]
    return Mesh(np.asarray(devices), ("data",))


class NonFiniteError(FloatingPointError):
    """Training produced NaN/Inf: nothing of that state is saved or exported."""


def check_finite(flag: Any, step: int, manager: Any, metrics: dict | None = None) -> None:
    """Raise NonFiniteError naming `step` and the last good checkpoint unless `flag` holds."""
    if bool(jax.device_get(flag)):
        return
    shown = ""
    if metrics is not None:
        values = jax.device_get({k: metrics[k] for k in ("loss", "grad_norm") if k in metrics})
        shown = " (" + ", ".join(f"{k}={float(v):.4g}" for k, v in values.items()) + ")"
    steps = manager.all_steps()
    kept = f"step {max(steps)}" if steps else "none"
    raise NonFiniteError(
        f"training diverged: NaN/Inf loss, gradients or parameters at step {step}{shown}. "
        f"Stopped without saving or exporting that state; last good checkpoint: {kept} in "
        f"{manager.directory}. Lower optim.lr (or set optim.grad_clip) and resume."
    )


def eval_step(variables: dict, batch: dict, *, model, input_kind: str) -> dict[str, jax.Array]:
    """Per-sample RICE/IoU (global and local GT) of the thresholded prediction, with kinds;
    multi-head models add per-sample context and gesture-kind correctness (0/1)."""
    outputs = model.apply(variables, batch_to_input(batch, input_kind), train=False)
    scores = score_batch((outputs["mask"] > 0).astype(jnp.uint8), batch)
    if "context" in outputs:
        context = jnp.asarray(batch["context"]) == 1
        scores["context_acc"] = ((outputs["context"] > 0) == context).astype(jnp.float32)
        kind = jnp.asarray(batch["gesture_kind"])
        scores["kind_acc"] = (jnp.argmax(outputs["kind"], -1) == kind).astype(jnp.float32)
    return scores


def predicted_logits(variables: dict, batch: dict, *, model, input_kind: str) -> jax.Array:
    """float32[B, H, W]: the mask logits of the model in inference mode (no gradient)."""
    outputs = model.apply(variables, batch_to_input(batch, input_kind), train=False)
    return outputs["mask"].astype(jnp.float32)


def to_global(batch: dict, mesh: Mesh) -> dict[str, jax.Array]:
    """Per-process numpy batch -> global jax.Arrays sharded over the `data` axis."""
    sharding = NamedSharding(mesh, P("data"))
    return {k: jax.make_array_from_process_local_data(sharding, v) for k, v in batch.items()}


class _JsonlWriter:
    def __init__(self, path: Path, enabled: bool):
        self.path, self.enabled = path, enabled

    def drop_after(self, step: int) -> None:
        """Keep only rows with `step` <= step (and whole JSON lines): a resumed run re-logs the
        steps after its checkpoint, so they must not appear twice. The previous file is kept
        as `metrics.jsonl.bak` when rows are dropped."""
        if not (self.enabled and self.path.is_file()):
            return
        lines = self.path.read_text().splitlines()
        kept = []
        for line in lines:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:  # a line cut short by a kill
                continue
            if isinstance(row, dict) and row.get("step", step + 1) <= step:
                kept.append(line + "\n")
        if len(kept) == len(lines):
            return
        shutil.copyfile(self.path, self.path.with_suffix(".jsonl.bak"))
        tmp = self.path.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(kept))
        tmp.replace(self.path)

    def write(self, step: int, values: dict[str, Any]) -> None:
        if self.enabled:
            row = {"step": step, **{k: float(v) for k, v in values.items()}}
            with self.path.open("a") as f:
                f.write(json.dumps(row) + "\n")


def _shut_down(bar: Any, train_iter: Any, manager: Any, *, quiet: bool) -> None:
    """Close the progress bar and grain workers, wait for pending saves and close the manager;
    a failed pending save raises CheckpointSaveError (unless `quiet`: already failing)."""
    bar.close()
    if hasattr(train_iter, "close"):
        train_iter.close()  # stops grain worker processes
    try:
        manager.wait_until_finished()
        manager.close()
    except Exception as error:
        if not quiet:
            raise checkpointing.CheckpointSaveError(
                f"a checkpoint save in {manager.directory} failed "
                f"({type(error).__name__}: {str(error)[:200]})"
            ) from error


def train(config, workdir: str | Path, *, stop_after_steps: int | None = None) -> TrainResult:
    """Train (or resume) per `config` in `workdir`; `stop_after_steps` ends this call early
    (with a checkpoint), as a preemption would, and so does SIGTERM / SIGINT (the step in
    progress finishes first). Returns the final state and last eval metrics."""
    distributed.initialize()  # several processes: from the environment (docs/scale.md)
    validate_config(config, num_devices=config.get("num_devices", 0) or jax.device_count())
    mesh = make_mesh(config.get("num_devices", 0))
    workdir = Path(workdir)
    primary = jax.process_index() == 0
    workdir.mkdir(parents=True, exist_ok=True)
    writer = _JsonlWriter(workdir / "metrics.jsonl", primary)

    # Model, optimizer and state: shapes first, then a sharded (replicated) init.
    model = build_segmenter(config.model)
    tx = make_optimizer(config.optim, config.total_steps)
    channels = model.in_channels
    input_shape = (config.batch_size, config.image_size, config.image_size, channels)
    init_fn = functools.partial(init_state, model, tx, input_shape)
    key = jax.random.key(config.seed)
    abstract_state = jax.eval_shape(init_fn, key)
    replicated = NamedSharding(mesh, P())
    state_sharding = jax.tree.map(lambda _: replicated, abstract_state)
    data_sharding = NamedSharding(mesh, P("data"))

    # Input: this process's share of every global batch.
    train_iter = make_train_iterator(config, jax.process_index(), jax.process_count())
    eval_batches = make_eval_batches(config, jax.process_index(), jax.process_count())
    if jax.process_count() > 1:  # every process must run the same number of eval steps
        counts = multihost_utils.process_allgather(np.asarray(len(eval_batches)))
        eval_batches = eval_batches[: int(np.min(counts))]

    # Resume from the newest readable checkpoint, else initialise.
    manager = checkpointing.make_manager(
        workdir / "checkpoints",
        save_every=config.checkpoint.save_every,
        keep=config.checkpoint.keep,
        async_save=config.checkpoint.async_save,
    )
    abstract_sharded = jax.tree.map(
        lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s),
        abstract_state,
        state_sharding,
    )
    # A config whose model differs from the checkpoints raises here, before anything changes.
    try:
        restored = checkpointing.restore_latest(manager, abstract_sharded, train_iter, config)
    except BaseException:
        if hasattr(train_iter, "close"):
            train_iter.close()
        manager.close()
        raise
    if primary:
        (workdir / "config.json").write_text(config.to_json_best_effort(indent=2))
    if restored is None:
        start_step = 0
        state = jax.jit(
            init_fn, out_shardings=state_sharding, compiler_options=init_compiler_options() or None
        )(key)
        pretrained = pretrained_variables(config.model)
        if pretrained is not None:
            state = jax.device_put(with_pretrained(state, pretrained), state_sharding)
        if config.get("init_from", ""):  # every weight from an exported segmenter
            from dig_jax.export import load_variables

            state = jax.device_put(
                with_pretrained(state, load_variables(config.init_from)), state_sharding
            )
    else:
        start_step, state = restored
    writer.drop_after(start_step)

    step_fn = jax.jit(
        functools.partial(
            train_step, model=model, input_kind=config.model.input_kind, loss_config=config.loss
        ),
        in_shardings=(state_sharding, data_sharding),
        out_shardings=(state_sharding, replicated),
        donate_argnums=0,
        compiler_options=train_compiler_options() or None,
    )
    eval_fn = jax.jit(
        functools.partial(eval_step, model=model, input_kind=config.model.input_kind),
        in_shardings=(replicated, data_sharding),
        out_shardings=replicated,
        compiler_options=predict_compiler_options() or None,
    )

    iterative = IterativeConfig.from_config(config)
    logits_fn = jax.jit(
        functools.partial(predicted_logits, model=model, input_kind=config.model.input_kind),
        in_shardings=(replicated, data_sharding),
        out_shardings=data_sharding,
        compiler_options=predict_compiler_options() or None,
    )

    def own_logits(local_batch: dict) -> np.ndarray:
        """This process's rows of the current model's mask logits for its share of the batch."""
        logits = logits_fn(state.variables, to_global(local_batch, mesh))
        return np.asarray(multihost_utils.global_array_to_host_local_array(logits, mesh, P("data")))

    clicks = config.model.input_kind == "context" and config.model.context_encoding == "clicks"
    encode = encode_context_clicks if clicks else None

    robust = RobustConfig.from_config(config)
    attacker = None
    if robust.box_attack_prob > 0 or robust.stroke_attack_prob > 0:
        attacker = Attacker(model, robust, config.model.input_kind, config.model.context_encoding)
    click_map = click_map_function(robust.click_map) if robust.click_group_prob > 0 else None

    evaluated_at = -1
    loop_evals = LoopEvaluators(config, model, workdir, writer, primary)

    def run_eval(step: int) -> dict[str, float]:
        nonlocal evaluated_at
        evaluated_at = step
        if not eval_batches:
            return {}
        batches = (to_global(b, mesh) for b in eval_batches)
        results = summarize_scores(jax.device_get(eval_fn(state.variables, b)) for b in batches)
        writer.write(step, {f"eval/{k}": v for k, v in results.items()})
        return results

    schedule = make_schedule(config.optim, config.total_steps)
    end_step = config.total_steps
    if stop_after_steps is not None:
        end_step = min(end_step, start_step + stop_after_steps)
    eval_metrics: dict[str, float] = {}
    bar = tqdm(
        total=config.total_steps,
        initial=start_step,
        disable=not primary,
        desc=f"train {config.get('variant', '')}",
        unit="step",
        dynamic_ncols=True,
    )
    timer, timer_step = time.perf_counter(), start_step
    step = start_step
    # NaN guard: each step returns an all-finite flag (loss, gradient norm, new state). On an
    # accelerator it is read one step late, after the next step is queued, so the device never
    # idles; at log, eval and checkpoint steps it is read at once, so a NaN state is never
    # saved. On CPU it is read at once every step: XLA allocates a step's temporaries (one
    # block, 760 MiB for Lite at 224²) when the step is dispatched, so a step queued behind a
    # running one holds a second block, and under a caching allocator (`dig_jax.cpu.memory`)
    # both stay resident: Lite training on tcmalloc held 2532 MiB with steps queued, 1823
    # with each step awaited (docs/speed.md). On jemalloc the entry points also run CPU calls
    # on the calling thread, so a step's block is freed before the next step is dispatched
    # (`dig_jax.cpu.prepare_entry_point`).
    previous: tuple[int, Any] | None = None
    passes_sum = 0  # iterative passes since the last log row
    robust_counts: dict[str, int] = {}  # robust redraws since the last log row
    robust_seconds = 0.0  # and the time they took
    queue_ahead = jax.default_backend() != "cpu"
    stopped_by = None
    with StopOnSignal(install=jax.process_count() == 1) as stop:
        try:
            for step in range(start_step + 1, end_step + 1):
                # Copy out of grain's shared-memory buffers so they are released right away.
                batch = {k: np.array(v) for k, v in next(train_iter).items()}
                if iterative.prob > 0:  # seeded by step: a resumed run draws the same rounds
                    rng = np.random.default_rng([config.seed, step, jax.process_index()])
                    batch, passes = iterate_batch(batch, own_logits, rng, iterative, encode)
                    passes_sum += passes
                if robust.enabled:  # after the iterative rounds: the step's last interactions
                    started = time.perf_counter()
                    rng = np.random.default_rng([config.seed, step, jax.process_index(), 40])
                    batch, counts = robust_batch(
                        batch, rng, robust, attacker, state.variables, click_map
                    )
                    if encode is not None:
                        batch = encode(batch)
                    robust_seconds += time.perf_counter() - started
                    for key, value in counts.items():
                        robust_counts[key] = robust_counts.get(key, 0) + value
                batch = to_global(batch, mesh)
                if step == start_step + 1:
                    # Compile before the first call (jit reuses the executable) and hand the
                    # compiler's freed heap back first: the peak RSS is then the larger of compile
                    # and step, not their sum (the same compile-then-trim in vs_torch's runner,
                    # HRNet-18s at batch 8 x 256²: 2850 -> 1967 MiB; this loop's not measured).
                    with freed_pages_returned():
                        step_fn.lower(state, batch).compile()
                    release_freed_memory()
                state, metrics = step_fn(state, batch)
                finite = metrics.pop("finite")
                if previous is not None:
                    check_finite(previous[1], previous[0], manager)
                previous = (step, finite)
                bar.update(1)
                if step == start_step + 1:  # the ETA counts from here, not from the compile
                    bar.reset(total=config.total_steps)
                    bar.initial = bar.n = step
                    bar.refresh()
                logging_now = step % config.log_every == 0 or step == end_step
                evaluating = bool(config.eval.every_steps) and step % config.eval.every_steps == 0
                evaluators_due = bool(loop_evals.due(step, final=False))
                if (
                    not queue_ahead or logging_now or evaluating or evaluators_due
                    or step == end_step or manager.should_save(step)
                ):  # fmt: skip
                    check_finite(finite, step, manager, metrics)
                    previous = None
                if logging_now:
                    metrics = jax.device_get(metrics)
                    elapsed = time.perf_counter() - timer
                    rate = (step - timer_step) / max(elapsed, 1e-9)
                    window = max(step - timer_step, 1)
                    bar.set_postfix(loss=f"{metrics['loss']:.4f}")
                    writer.write(
                        step,
                        {
                            **metrics,
                            "lr": schedule(step - 1),
                            "steps_per_s": rate,
                            "images_per_s": rate * config.batch_size,
                            **(
                                {"iterative_passes": passes_sum / max(step - timer_step, 1)}
                                if iterative.prob > 0
                                else {}
                            ),
                            **(
                                {
                                    **{f"robust/{k}": v / window for k, v in robust_counts.items()},
                                    # the share of the wall time spent drawing robust prompts
                                    "robust/time_share": robust_seconds / max(elapsed, 1e-9),
                                }
                                if robust.enabled
                                else {}
                            ),
                        },
                    )
                    passes_sum, robust_counts, robust_seconds = 0, {}, 0.0
                    timer, timer_step = time.perf_counter(), step
                    release_freed_memory()  # after the step's compile and between evaluations
                # Several processes stop together at the preemption service's sync step.
                preempted = jax.process_count() > 1 and manager.reached_preemption(step)
                stopped_by = stop.signal_name or ("preemption" if preempted else None)
                if stopped_by is not None and previous is not None:
                    check_finite(previous[1], previous[0], manager, metrics)
                    previous = None
                force = step == end_step or stopped_by is not None
                checkpointing.save(manager, step, state, train_iter, force=force)
                if stopped_by is not None:
                    bar.write(f"{stopped_by}: stopped after step {step}, checkpoint saved")
                    break
                if evaluating:
                    eval_metrics = run_eval(step)
                if evaluators_due:
                    loop_evals.run(step, state.variables)
        except BaseException:
            _shut_down(bar, train_iter, manager, quiet=True)
            raise
        _shut_down(bar, train_iter, manager, quiet=False)

    finished = step == config.total_steps
    if finished and evaluated_at != step:
        eval_metrics = run_eval(step)
    if finished and primary:
        if eval_metrics:
            print(format_rice_table(eval_metrics, title=f"validation after {step} steps"))
        if config.get("export", False):
            from dig_jax.export import save_segmenter

            path = save_segmenter(workdir / "segmenter.digjax", state.variables, config)
            print(f"exported {path}")
    if finished and stopped_by is None:  # after the export: they read photos, take minutes
        for name, value in loop_evals.run(step, state.variables, final=True).items():
            if "/all/" in name or "/NoC@" in name:
                print(f"{name}: {value:.3f}")
    return TrainResult(state=state, step=step, eval_metrics=eval_metrics, stopped_by=stopped_by)
