"""JAX vs PyTorch on this machine: forward and train step of the same segmenters.

    python benchmarks/vs_torch.py             # both models, four cases (quiet machine: ~25 min)
    python benchmarks/vs_torch.py --quick     # tiny HRNet / Lite at 64², 2 iterations (make bench)
    python benchmarks/vs_torch.py --models hrnet18s --cases "train b8 256" --iters 9

The PyTorch side is `benchmarks/torch_segmenters.py`: the same HRNet-18s and EfficientNet-Lite0
segmenters (same layers, widths, parameter count and head, checked leaf by leaf against the
Flax variables), the normalized focal loss and AdamW (+ global-norm clipping as in the config).
Every (model, case, runner) runs in its own child process of this one (same process tree;
they compile one at a time), so each reports its own peak RSS and cold compile time. Inputs are
the same uint8 batches (image, gesture, distance, previous mask, target) converted to model
input inside the timed call on both sides. Runners: `jax` — the project's paths: forward is
the jitted logits function of `LoadedSegmenter` (what `predict` runs on its S×S crop), the
train step is `dig_jax.train.train.train_step` (AdamW, donated state) compiled with
`dig_jax.cpu.train_compiler_options()`, on jemalloc where it is installed (`dig_jax.cpu.memory`);
`jax-glibc` — the same on glibc's allocator (only with --glibc); `jax-plain` — the train step
without those options (only with --plain); `torch` — eager NCHW; `torch-cl` —
eager channels_last; `torch-cl-je` — channels_last on the same jemalloc as `jax` (where
installed): "best torch" is the fastest of the three, "best torch on glibc" of the first two.
Throughput is images/s from the median of `--iters` timed calls after `--warmup` calls;
ratio = jax / best torch (≥ 1: JAX as fast); memory ratio = JAX peak RSS / that torch's (the
whole process: JAX's includes its compiler); steady = the peak RSS during the timed calls only
(after compile and warm-up, freed heap memory is returned — glibc's malloc_trim, jemalloc's
purge — and the kernel's count restarted via /proc/self/clear_refs, in both frameworks alike):
what training holds step after step.
Children get this process's environment (GLIBC_TUNABLES included), both frameworks alike.
Interleaved by default (`run_lockstep`): every child compiles and warms up alone, then their timed
calls alternate round by round, so the machine's speed changes (up to 2x within minutes here)
fall on both frameworks alike; the table adds the median and range of the per-round ratios.
`--sequential` times each child's calls in one go, one child after the other.
torch is optional (`pip install '.[bench]'`, torch==2.13.0, CPU build): without it the
benchmark says so and exits 0.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASES = {"forward b1 512": ("forward", 1, 512), "forward b8 256": ("forward", 8, 256),
         "train b8 256": ("train", 8, 256), "train b2 512": ("train", 2, 512)}  # fmt: skip
QUICK_CASES = {"forward b1 64": ("forward", 1, 64), "train b2 64": ("train", 2, 64)}
MODELS = ("hrnet18s", "efficientnet_lite0")


def model_config(name: str, quick: bool):
    """The experiment config of `name` ('offline' widths; 'tiny' with --quick)."""
    from dig_jax.train.config import base_config, with_lite_backbone

    config = base_config("tiny" if quick else "offline")
    if name == "efficientnet_lite0":
        config = with_lite_backbone(config)
        config.model.pretrained = ""  # random weights: the cost does not depend on them
    return config


def uint8_batch(batch: int, side: int, seed: int = 0) -> dict:
    """The uint8 arrays a training batch holds (random content: cost does not depend on it)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    masks = lambda: rng.integers(0, 2, (batch, side, side), dtype=np.uint8)
    target = masks()
    target[:, : side // 16] = 255  # some void
    return {"image": rng.integers(0, 256, (batch, side, side, 3), dtype=np.uint8),
            "gesture": masks(), "distance": rng.integers(0, 256, (batch, side, side), np.uint8),
            "prev_mask": masks(), "target": target}  # fmt: skip


_PEAK_BEFORE_RESET = [0.0]  # MiB: the whole-process peak, kept across `_reset_peak_rss`


def rss_mib() -> float:
    """Peak resident set size of this process so far, MiB (compile and warm-up included)."""
    return max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, _PEAK_BEFORE_RESET[0])


def _reset_peak_rss() -> bool:
    """Return freed heap memory to the OS (glibc malloc_trim: the compiler's, torch's first
    call's) and restart the kernel's peak-RSS count (VmHWM); False where unsupported."""
    from dig_jax.cpu import release_freed_memory

    _PEAK_BEFORE_RESET[0] = rss_mib()  # clear_refs also restarts ru_maxrss
    release_freed_memory()
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_rss_since_reset() -> float | None:
    """VmHWM in MiB (Linux), or None."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


_LOCKSTEP = [False]  # worker: timed calls one at a time on the parent's "RUN" (lockstep)


_CALL_KERNEL: list[dict] = []  # per timed call: kernel CPU s and page faults (getrusage)


def _timed(fn, record: bool = False) -> float:
    """Wall-clock s of fn(); with `record`, also its kernel time and page faults."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    fn()
    seconds = time.perf_counter() - start
    if record:
        after = resource.getrusage(resource.RUSAGE_SELF)
        _CALL_KERNEL.append({"sys_s": round(after.ru_stime - before.ru_stime, 4),
                             "minflt": after.ru_minflt - before.ru_minflt,
                             "majflt": after.ru_majflt - before.ru_majflt})  # fmt: skip
    return seconds


def time_calls(fn, iters: int, warmup: int) -> tuple[float, float, float | None]:
    """(first call s, median s of `iters` calls after `warmup` more, peak RSS MiB during the
    timed calls: compile and warm-up excluded, None where the kernel cannot say).

    In lockstep (a `--lockstep` worker) the timed calls wait for the parent: after warm-up the
    worker prints READY, then times one call per "RUN" line on stdin (printing TIMED s) until
    "STOP", so the parent can interleave the frameworks' calls."""
    first = _timed(fn)
    for _ in range(warmup):
        fn()
    reset = _reset_peak_rss()
    runs = []
    if _LOCKSTEP[0]:
        print("READY", flush=True)
        for line in sys.stdin:
            if line.strip() != "RUN":
                break
            runs.append(_timed(fn, record=True))
            print(f"TIMED {runs[-1]!r}", flush=True)
    else:
        runs = [_timed(fn, record=True) for _ in range(iters)]
    return first, statistics.median(runs), _peak_rss_since_reset() if reset else None


def worker(args: argparse.Namespace) -> dict:
    """One (runner, model, case) in this process; returns the measurements."""
    kind, batch, side = (QUICK_CASES if args.quick else CASES)[args.case]
    config = model_config(args.model, args.quick)
    data = uint8_batch(batch, side)
    base_rss = rss_mib()
    if args.worker.startswith("jax"):
        from _vs_torch_runners import jax_forward, jax_train

        run = jax_forward if kind == "forward" else jax_train
        result = run(config, data, args.iters, args.warmup, args.worker == "jax-plain", args.device)
    else:
        from _vs_torch_runners import torch_forward, torch_train

        run = torch_forward if kind == "forward" else torch_train
        channels_last = args.worker.startswith("torch-cl")
        result = run(config, data, args.iters, args.warmup, channels_last, args.threads,
                     args.device)  # fmt: skip
    first, median = result.pop("first_s"), result.pop("median_s")
    steady = result.pop("steady_rss_mib", None)
    return {"images_per_s": batch / median, "median_s": median, "first_s": first,
            "peak_rss_mib": rss_mib(), "steady_rss_mib": steady, "base_rss_mib": base_rss,
            "call_kernel": _CALL_KERNEL, **result}  # fmt: skip


def runner_environment(runner: str, env: dict[str, str]) -> dict[str, str]:
    """`env` for one runner's child. `jax`, `jax-plain` and `torch-cl-je` run on jemalloc where
    it is installed (`dig_jax.cpu.memory.jemalloc_environment`); `jax-glibc`, `torch` and
    `torch-cl` on glibc, as PyTorch users run it."""
    from dig_jax.cpu.memory import find_jemalloc, jemalloc_environment

    library = find_jemalloc()
    if runner in ("jax", "jax-plain", "torch-cl-je") and library is not None:
        return jemalloc_environment(env, library)
    return {k: v for k, v in env.items() if k not in ("LD_PRELOAD", "MALLOC_CONF")}


def _child_command(runner: str, model: str, case: str, args: argparse.Namespace) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--worker", runner, "--model", model,
            "--case", case, "--iters", str(args.iters), "--warmup", str(args.warmup),
            "--threads", str(args.threads), "--device", args.device] + (
            ["--quick"] if args.quick else []) + (
            ["--lockstep"] if args.lockstep else [])  # fmt: skip


def run_child(runner: str, model: str, case: str, args: argparse.Namespace) -> dict:
    """Run one measurement in a child process; {'error': ...} when it fails."""
    cmd = _child_command(runner, model, case, args)
    env = runner_environment(runner, dict(os.environ))
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {args.timeout} s"}
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
    return {"error": f"exit {done.returncode}: " + " | ".join(tail)}


class _LockstepChild:
    """A worker started with --lockstep: compiles and warms up on its own, then times one call
    per `call()`; killed after `timeout` s in all."""

    def __init__(self, cmd: list[str], env: dict[str, str], timeout: float):
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, text=True, env=env)  # fmt: skip
        self.watchdog = threading.Timer(timeout, self.proc.kill)
        self.watchdog.start()
        self.error: str | None = None

    def _await(self, prefix: str) -> str | None:
        """The first stdout line starting with `prefix` (or RESULT); None at exit."""
        for line in self.proc.stdout:
            if line.startswith(prefix) or line.startswith("RESULT "):
                return line.rstrip("\n")
        self.proc.wait()
        self.stderr.seek(0)
        tail = self.stderr.read().strip().splitlines()[-3:]
        killed = " (killed: timed out)" if not self.watchdog.is_alive() else ""
        self.error = f"exit {self.proc.returncode}{killed}: " + " | ".join(tail)
        return None

    def ready(self) -> bool:
        return self._await("READY") == "READY"

    def call(self) -> float | None:
        """One timed call, s; None when the child failed."""
        try:
            self.proc.stdin.write("RUN\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            self._await("TIMED ")  # reads to the end: records the child's error
            return None
        line = self._await("TIMED ")
        return float(line[6:]) if line and line.startswith("TIMED ") else None

    def finish(self) -> dict:
        """The child's RESULT (or {'error': ...}); the child exits."""
        if self.error is None:
            try:
                self.proc.stdin.write("STOP\n")
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
            line = self._await("RESULT ")
            result = json.loads(line[7:]) if line and line.startswith("RESULT ") else None
        else:
            result = None
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.watchdog.cancel()
        self.stderr.close()
        return result if result is not None else {"error": self.error or "no result"}


def run_lockstep(runners: list[str], model: str, case: str, args: argparse.Namespace) -> dict:
    """Every runner's child compiles and warms up in turn (alone on the machine), then their
    timed calls interleave — round i calls each ready child once, the order rotated by i — so
    a change in the machine's speed over minutes falls on every framework alike. Each result
    gains `round_s`, its call times in round order."""
    env = dict(os.environ)
    children, results = {}, {}
    for runner in runners:
        child = _LockstepChild(_child_command(runner, model, case, args),
                               runner_environment(runner, env), args.timeout)  # fmt: skip
        if child.ready():
            children[runner] = child
        else:
            results[runner] = child.finish()
    rounds: dict[str, list[float]] = {r: [] for r in children}
    for i in range(args.iters):
        live = [r for r in children if children[r].error is None]
        for runner in live[i % max(len(live), 1) :] + live[: i % max(len(live), 1)]:
            seconds = children[runner].call()
            if seconds is not None:
                rounds[runner].append(seconds)
            time.sleep(0.05)  # let the last child's spinning worker threads go to sleep
    for runner, child in children.items():
        results[runner] = {**child.finish(), "round_s": rounds[runner]}
        if "error" in results[runner]:
            results[runner].pop("round_s")
    return {r: results[r] for r in runners}


def fmt(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def round_ratios(jax_result: dict | None, torch_result: dict | None) -> str:
    """'median (min–max)' of the per-round JAX / torch speed ratios of interleaved calls
    (`run_lockstep`); '-' without them."""
    jax_s = (jax_result or {}).get("round_s") or []
    torch_s = (torch_result or {}).get("round_s") or []
    ratios = [t / j for j, t in zip(jax_s, torch_s, strict=False)]
    if not ratios:
        return "-"
    return f"{statistics.median(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f})"


def report(model: str, rows: dict[str, dict[str, dict]], runners: list[str]) -> list[str]:
    """Markdown table of one model's results."""
    lines = [f"\n{model}", "| case (images/s) | " + " | ".join(runners) + " | jax / best torch "
             "| jax / best torch on glibc | per round: median (min–max) | JAX compile s "
             "| torch first call s "
             "| peak memory JAX / torch MiB | memory ratio "
             "| steady RSS JAX / torch MiB | steady ratio |",
             "|---" * (len(runners) + 10) + "|"]  # fmt: skip
    for case, results in rows.items():
        ok = {r: v for r, v in results.items() if "error" not in v}
        speeds = [fmt(ok[r]["images_per_s"]) if r in ok else "err" for r in runners]
        torch = [r for r in ok if r.startswith("torch")]
        best = max(torch, key=lambda r: ok[r]["images_per_s"], default=None)
        jax_r = ok.get("jax")
        ratio = jax_r["images_per_s"] / ok[best]["images_per_s"] if jax_r and best else None
        # GPU runs report the device's peak memory, CPU runs the process's peak RSS.
        key = "device_peak_mib" if jax_r and "device_peak_mib" in jax_r else "peak_rss_mib"
        mem = jax_r[key] / ok[best][key] if jax_r and best and key in ok[best] else None
        rss = f"{fmt(jax_r and jax_r.get(key), '.0f')} / " + fmt(
            ok[best].get(key) if best else None, ".0f"
        )
        # Peak RSS during the timed calls only (compile and warm-up excluded; CPU).
        j_steady = jax_r.get("steady_rss_mib") if jax_r else None
        t_steady = ok[best].get("steady_rss_mib") if best else None
        steady = j_steady / t_steady if j_steady and t_steady else None
        glibc = [r for r in torch if r in ("torch", "torch-cl")]
        best_glibc = max(glibc, key=lambda r: ok[r]["images_per_s"], default=None)
        ratio_glibc = (jax_r["images_per_s"] / ok[best_glibc]["images_per_s"]
                       if jax_r and best_glibc else None)  # fmt: skip
        lines.append(
            f"| {case} | " + " | ".join(speeds) + f" | {fmt(ratio)} | {fmt(ratio_glibc)} | "
            f"{round_ratios(jax_r, ok.get(best) if best else None)} | "
            f"{fmt(jax_r and jax_r.get('compile_s'), '.1f')} | "
            f"{fmt(ok[best]['first_s'] if best else None, '.2f')} | {rss} | {fmt(mem)} | "
            f"{fmt(j_steady, '.0f')} / {fmt(t_steady, '.0f')} | {fmt(steady)} |"
        )
        for r, v in results.items():
            if "error" in v:
                lines.append(f"  {r}: {v['error']}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny models at 64², 2 iterations")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--cases", default=None, help="comma-separated case names")
    parser.add_argument("--iters", type=int, default=None, help="timed calls (default 7)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed calls after the first")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch threads")
    parser.add_argument("--plain", action="store_true", help="also the train step without options")
    parser.add_argument("--glibc", action="store_true",
                        help="also JAX on glibc's allocator (the jax-glibc runner; `jax` runs "
                        "on jemalloc where installed, as the entry points do)")  # fmt: skip
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                        help="gpu: CUDA devices of JAX and torch; device peak memory")  # fmt: skip
    parser.add_argument("--timeout", type=int, default=1800, help="s per child process")
    parser.add_argument("--sequential", action="store_true",
                        help="each child's timed calls in one go, one child after the other "
                        "(default: interleaved round by round, see run_lockstep)")  # fmt: skip
    parser.add_argument("--lockstep", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, default=None, help="write every result here")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.iters = args.iters or (2 if args.quick else 7)
    args.warmup = args.warmup if args.warmup is not None else (0 if args.quick else 2)
    if args.worker:
        sys.modules.setdefault("vs_torch", sys.modules[__name__])  # the runners' `time_calls`
        _LOCKSTEP[0] = args.lockstep
        print("RESULT " + json.dumps(worker(args)), flush=True)
        return 0
    if importlib.util.find_spec("torch") is None:
        print("vs_torch: PyTorch is not installed, skipping (pip install '.[bench]' installs "
              "torch==2.13.0, the CPU build)")  # fmt: skip
        return 0
    cases = QUICK_CASES if args.quick else CASES
    names = [c.strip() for c in args.cases.split(",")] if args.cases else list(cases)
    unknown = [c for c in names if c not in cases]
    if unknown:
        parser.error(f"--cases: unknown {unknown}; choose from {list(cases)}")
    args.lockstep = not args.sequential
    from dig_jax.cpu.memory import find_jemalloc

    jemalloc = find_jemalloc() is not None
    runners = (["jax"] + (["jax-glibc"] if args.glibc else []) + (["jax-plain"] if args.plain
               else []) + ["torch", "torch-cl"]
               + (["torch-cl-je"] if jemalloc else []))  # fmt: skip
    print(
        f"JAX vs PyTorch, {os.cpu_count()} CPU cores, torch threads {args.threads}, median of "
        f"{args.iters} calls after {args.warmup} warm-up{' (quick: tiny models)' * args.quick}"
        f"{', interleaved round by round' * args.lockstep}; "
        f"GLIBC_TUNABLES={os.environ.get('GLIBC_TUNABLES', '')!r} for both; "
        + (
            "jax and torch-cl-je on jemalloc (dig_jax.cpu.memory), torch and torch-cl on glibc"
            if jemalloc
            else "jemalloc not installed: every runner on glibc"
        )
    )
    everything: dict = {}
    for model in [m.strip() for m in args.models.split(",") if m.strip()]:
        rows: dict[str, dict[str, dict]] = {}
        for case in names:
            if args.lockstep:
                rows[case] = run_lockstep(runners, model, case, args)
            else:
                rows[case] = {r: run_child(r, model, case, args) for r in runners}
            speeds = ", ".join(f"{r} {fmt(v.get('images_per_s'))}" for r, v in rows[case].items())
            print(f"  {model} {case}: {speeds} images/s", flush=True)
        print("\n".join(report(model, rows, runners)), flush=True)
        everything[model] = rows
    if args.json:
        args.json.write_text(json.dumps(everything, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
