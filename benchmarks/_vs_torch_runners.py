"""The measured calls of `benchmarks/vs_torch.py`, one per (framework, forward/train).

Each returns {first_s, median_s, ...}; `first_s` is the first call (JAX: after an
ahead-of-time compile, reported as compile_s; torch: eager, its warm-up). Imported by the
child processes only (a module starting with "_": `make bench` does not run it).
"""

from __future__ import annotations

import functools
import time
from typing import Any

import numpy as np
from vs_torch import time_calls


def random_like(abstract: Any, seed: int = 0) -> Any:
    """Concrete numpy pytree shaped like `abstract`: small normal floats, ones for variances and
    Adam's second moments, zeros elsewhere (the cost does not depend on the values)."""
    import jax

    rng = np.random.default_rng(seed)

    def fill(path, leaf):
        if not np.issubdtype(leaf.dtype, np.floating):
            return np.zeros(leaf.shape, leaf.dtype)
        name = jax.tree_util.keystr(path)
        if "var" in name or "nu" in name:
            return np.ones(leaf.shape, leaf.dtype)
        return rng.normal(0, 0.05, leaf.shape).astype(leaf.dtype)

    return jax.tree_util.tree_map_with_path(fill, abstract)


def _jax_setup(config: Any, device: str = "cpu"):
    import jax

    if device == "cpu":
        from dig_jax.cpu import prepare_entry_point

        prepare_entry_point()  # as the entry points do (on jemalloc: calls on this thread)
        jax.config.update("jax_platforms", "cpu")
    elif jax.default_backend() != "gpu":
        raise RuntimeError(f"--device gpu: JAX sees no GPU ({jax.devices()})")
    jax.config.update("jax_enable_compilation_cache", False)  # cold compile times
    from dig_jax.models.interactive import build_segmenter

    return jax, build_segmenter(config.model)


def _compile(jitted, *args) -> tuple[Any, float, float]:
    """(compiled, compile s, XLA temp MiB). The compiler's freed heap goes back to the OS
    (on jemalloc at once while compiling, `freed_pages_returned`; then `release_freed_memory`:
    jemalloc's purge or glibc's malloc_trim), as the training loop does before its first step,
    so the first call's temporaries do not add to it in the peak RSS."""
    from dig_jax.cpu import freed_pages_returned, release_freed_memory

    start = time.perf_counter()
    with freed_pages_returned():
        compiled = jitted.lower(*args).compile()
    seconds = time.perf_counter() - start
    release_freed_memory()
    analysis = compiled.memory_analysis()
    temp = analysis.temp_size_in_bytes / 2**20 if analysis is not None else float("nan")
    return compiled, seconds, temp


def _jax_peak_mib(jax) -> dict:
    """{'device_peak_mib': ...} where the backend reports it (GPU), else {}."""
    stats = jax.devices()[0].memory_stats() or {}
    peak = stats.get("peak_bytes_in_use")
    return {} if peak is None else {"device_peak_mib": peak / 2**20}


def jax_forward(config: Any, data: dict, iters: int, warmup: int, plain: bool = False,
                device: str = "cpu") -> dict:  # fmt: skip
    """`LoadedSegmenter`'s jitted logits (weights as an argument, as `predict` runs them) on the
    uint8 batch (input built inside)."""
    jax, model = _jax_setup(config, device)
    import jax.numpy as jnp

    from dig_jax.export import LoadedSegmenter
    from dig_jax.prompts import batch_to_input

    x0 = jnp.zeros((1, 64, 64, model.in_channels))
    abstract = jax.eval_shape(lambda: model.init(jax.random.key(0), x0, train=False))
    segmenter = LoadedSegmenter(config, random_like(abstract))
    apply = segmenter.apply_logits
    options = getattr(segmenter, "compiler_options", {})
    options = options or None
    fn = jax.jit(lambda v, b: apply(v, batch_to_input(b, "gesture")), compiler_options=options)
    batch = {k: jax.device_put(v) for k, v in data.items() if k != "target"}
    weights = segmenter.variables
    compiled, compile_s, temp = _compile(fn, weights, batch)
    first, median, steady = time_calls(
        lambda: compiled(weights, batch).block_until_ready(), iters, warmup
    )
    params = sum(int(np.prod(v.shape)) for v in jax.tree.leaves(abstract["params"]))
    return {"first_s": first, "median_s": median, "steady_rss_mib": steady,
            "compile_s": compile_s, "xla_temp_mib": temp, "params": params,
            **_jax_peak_mib(jax)}  # fmt: skip


def jax_train(config: Any, data: dict, iters: int, warmup: int, plain: bool = False,
              device: str = "cpu") -> dict:  # fmt: skip
    """`dig_jax.train.train.train_step` (AdamW, donated state), compiled with the train-step
    compiler options unless `plain`."""
    jax, model = _jax_setup(config, device)
    from dig_jax.cpu import train_compiler_options
    from dig_jax.train.state import make_optimizer
    from dig_jax.train.step import init_state, train_step

    batch_size, side = data["image"].shape[:2]
    tx = make_optimizer(config.optim, 1000)
    init = functools.partial(init_state, model, tx, (batch_size, side, side, model.in_channels))
    abstract = jax.eval_shape(init, jax.random.key(0))
    state = jax.device_put(random_like(abstract))
    n = batch_size
    batch = {**data, "gesture_kind": np.zeros(n, np.int32), "context": np.ones(n, np.int32),
             "has_prev": np.zeros(n, bool)}  # fmt: skip
    batch = {k: jax.device_put(v) for k, v in batch.items()}
    step = jax.jit(
        functools.partial(train_step, model=model, input_kind="gesture", loss_config=config.loss),
        donate_argnums=0,
        compiler_options=None if plain else (train_compiler_options() or None),
    )
    compiled, compile_s, temp = _compile(step, state, batch)
    holder = [state]

    def call() -> None:
        holder[0], metrics = compiled(holder[0], batch)
        jax.block_until_ready(metrics)

    first, median, steady = time_calls(call, iters, warmup)
    params = sum(int(np.prod(v.shape)) for v in jax.tree.leaves(abstract.params))
    return {"first_s": first, "median_s": median, "steady_rss_mib": steady,
            "compile_s": compile_s, "xla_temp_mib": temp, "params": params,
            **_jax_peak_mib(jax)}  # fmt: skip


def _torch_setup(config: Any, channels_last: bool, threads: int, train: bool, device: str):
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    from torch_segmenters import TorchSegmenter

    model = TorchSegmenter(config.model, 6).train(train)
    if device == "gpu":
        if not torch.cuda.is_available():
            raise RuntimeError("--device gpu: torch sees no CUDA device")
        model = model.cuda()
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    return torch, model


def _torch_input(torch, t: dict, channels_last: bool):
    """f32[B, 6, H, W] from the uint8 tensors, as `batch_to_input` builds it."""
    x = torch.cat(
        [t["image"].permute(0, 3, 1, 2).float(), t["gesture"][:, None].float(),
         t["distance"][:, None].float() / 255.0, t["prev_mask"][:, None].float()], 1,
    )  # fmt: skip
    return x.contiguous(
        memory_format=torch.channels_last if channels_last else torch.contiguous_format
    )


def _to_torch(torch, data: dict, device: str) -> dict:
    t = {k: torch.from_numpy(v) for k, v in data.items()}
    return {k: v.cuda() for k, v in t.items()} if device == "gpu" else t


def _sync(torch, device: str) -> None:
    if device == "gpu":
        torch.cuda.synchronize()


def _torch_peak_mib(torch, device: str) -> dict:
    if device != "gpu":
        return {}
    return {"device_peak_mib": torch.cuda.max_memory_allocated() / 2**20}


def torch_forward(config: Any, data: dict, iters: int, warmup: int, channels_last: bool,
                  threads: int, device: str = "cpu") -> dict:  # fmt: skip
    torch, model = _torch_setup(config, channels_last, threads, False, device)
    t = _to_torch(torch, data, device)

    def call() -> None:
        with torch.inference_mode():
            model(_torch_input(torch, t, channels_last))
        _sync(torch, device)

    first, median, steady = time_calls(call, iters, warmup)
    params = sum(p.numel() for p in model.parameters())
    return {"first_s": first, "median_s": median, "steady_rss_mib": steady, "params": params,
            **_torch_peak_mib(torch, device)}  # fmt: skip


def torch_train(config: Any, data: dict, iters: int, warmup: int, channels_last: bool,
                threads: int, device: str = "cpu") -> dict:  # fmt: skip
    """AdamW (lr, weight decay of the config), global-norm clipping when the config clips."""
    torch, model = _torch_setup(config, channels_last, threads, True, device)
    from torch_segmenters import focal_loss

    t = _to_torch(torch, data, device)
    optim = config.optim
    opt = torch.optim.AdamW(model.parameters(), lr=optim.lr, weight_decay=optim.weight_decay)
    params = list(model.parameters())

    def call() -> None:
        logits = model(_torch_input(torch, t, channels_last))
        loss = focal_loss(logits, t["target"], config.loss.focal_alpha, config.loss.focal_gamma)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if optim.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(params, optim.grad_clip)
        opt.step()
        _sync(torch, device)

    first, median, steady = time_calls(call, iters, warmup)
    return {"first_s": first, "median_s": median, "steady_rss_mib": steady,
            "params": sum(p.numel() for p in params), **_torch_peak_mib(torch, device)}  # fmt: skip
