"""Iterative training: the next interaction on the model's own mask, hand-made cases, and the
loop with it (and with `init_from`)."""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np
import pytest

from dig_jax.data.regions import VOID
from dig_jax.gestures.types import Context, GestureKind
from dig_jax.train.__main__ import load_config
from dig_jax.train.config import validate_config
from dig_jax.train.iterative import IterativeConfig, grow_masks, iterate_batch, next_interaction
from dig_jax.train.train import train

ROOT = Path(__file__).resolve().parents[2]
S = 48


def _batch(n: int = 2) -> dict[str, np.ndarray]:
    region = np.zeros((S, S), np.uint8)
    region[8:40, 8:40] = 1
    zeros = np.zeros((n, S, S), np.uint8)
    return {
        "image": np.zeros((n, S, S, 3), np.uint8),
        "gesture": zeros.copy(), "distance": np.full((n, S, S), 255, np.uint8),
        "prev_mask": zeros.copy(), "target": np.repeat(region[None], n, 0),
        "region": np.repeat(region[None], n, 0), "local": np.repeat(region[None], n, 0),
        "void": zeros.copy(), "gesture_kind": np.zeros(n, np.int32),
        "context": np.ones(n, np.int32), "has_prev": np.zeros(n, bool),
    }  # fmt: skip


def _prediction() -> np.ndarray:
    """The region missing its bottom-right quadrant (256 px) with a 6x6 blob outside (36 px)."""
    pred = np.zeros((S, S), np.uint8)
    pred[8:40, 8:40] = 1
    pred[24:40, 24:40] = 0
    pred[1:7, 41:47] = 1
    return pred


def test_the_next_click_aims_at_an_error_and_the_target_corrects_only_it():
    batch = _batch(1)
    pred = _prediction()[None]
    config = IterativeConfig(prob=1.0, min_area=50, kinds=(int(GestureKind.CLICK),))
    out, changed = next_interaction(batch, pred, np.random.default_rng(0), config)
    assert changed.tolist() == [True]
    missing = np.zeros((S, S), bool)
    missing[24:40, 24:40] = True  # the only error of >= 50 px: an ADD correction
    np.testing.assert_array_equal(out["prev_mask"][0], pred[0])
    assert out["context"][0] == Context.ADD and out["has_prev"][0]
    assert out["gesture_kind"][0] == GestureKind.CLICK
    rows, cols = np.nonzero(out["gesture"][0])  # a radius-5 disc centred in the error
    assert missing[round(rows.mean()), round(cols.mean())]
    assert out["distance"][0][out["gesture"][0] > 0].max() == 0
    np.testing.assert_array_equal(out["local"][0], pred[0] | missing)
    expected = (pred[0] | missing).astype(np.uint8)
    expected[1:7, 41:47] = VOID  # the other error is left as it was: void in the target
    np.testing.assert_array_equal(out["target"][0], expected)
    np.testing.assert_array_equal(batch["prev_mask"], 0)  # the input is not changed


def test_a_mask_without_error_keeps_its_interaction_and_void_is_no_error():
    batch = _batch(2)
    pred = batch["region"].copy()
    batch["void"][1, 1:7, 41:47] = 1
    pred[1, 1:7, 41:47] = 1  # extra pixels, but on void
    out, changed = next_interaction(batch, pred, np.random.default_rng(0), IterativeConfig())
    assert changed.tolist() == [False, False]
    for key in batch:
        np.testing.assert_array_equal(out[key], batch[key])


def test_iterate_batch_is_deterministic_and_off_at_prob_zero():
    batch = _batch(2)
    calls = []

    def predict(b):
        calls.append(1)
        return np.repeat(_prediction()[None], len(b["image"]), 0)

    config = IterativeConfig(prob=1.0, max_steps=3)
    first, passes = iterate_batch(batch, predict, np.random.default_rng(5), config)
    second, again = iterate_batch(batch, predict, np.random.default_rng(5), config)
    assert 1 <= passes == again <= 3 and len(calls) == 2 * passes
    for key in batch:
        assert first[key].tobytes() == second[key].tobytes()
    off, none = iterate_batch(batch, predict, np.random.default_rng(5), IterativeConfig(prob=0.0))
    assert off is batch and none == 0


def test_grow_masks_takes_the_highest_logits_up_to_the_scaled_region_area():
    logits = np.full((3, S, S), -5.0, np.float32)
    logits[:, 10:20, 10:20] = 1.0  # the model's own mask: 100 px
    ramp = np.arange(S * S, dtype=np.float32).reshape(S, S) / (S * S) - 2.0  # in [-2, -1)
    logits[:, 30:, :] = ramp[30:]  # then the bottom rows, highest last
    region = np.zeros((3, S, S), np.uint8)
    region[:, 10:20, 10:20] = 1  # 100 px
    void = np.zeros((3, S, S), np.uint8)
    void[2, 10:15, 10:20] = 1  # half of the third region is void: 50 px count
    grown = grow_masks(logits, region, void, np.array([3.0, 0.5, 3.0]))
    assert grown[0].sum() == 300 and grown[0][10:20, 10:20].all()
    order = np.argsort(-logits[0].ravel(), kind="stable")[:300]
    np.testing.assert_array_equal(np.flatnonzero(grown[0].ravel()), np.sort(order))
    assert grown[0][S - 1, S - 200 + 100 :].all()  # the 200 added pixels: the highest of the ramp
    np.testing.assert_array_equal(grown[1], logits[1] > 0)  # never below its own mask
    assert grown[2].sum() == 150
    huge = grow_masks(logits[:1], region[:1], void[:1], np.array([1000.0]))
    assert huge.sum() == int(0.9 * S * S)  # at most 0.9 of the crop


def test_a_grown_first_mask_is_corrected_by_a_grow_kind_and_growth_off_draws_nothing_new():
    batch = _batch(4)
    logits = np.full((4, S, S), -3.0, np.float32)
    logits[:, 8:40, 8:40] = 2.0  # the model's own mask is the region exactly ...
    logits[:, :8, :] = -1.0  # ... and it would grow into the top rows first
    kinds = (int(GestureKind.SCRIBBLE),)
    config = IterativeConfig(
        prob=1.0, max_steps=1, kinds=kinds, grow_prob=1.0, grow_scale=(2.0, 2.0)
    )
    out, passes = iterate_batch(batch, lambda b: logits, np.random.default_rng(3), config)
    assert passes == 1
    for i in range(4):  # 1024 px region grown to 2048: the 384 top-row pixels and 640 more
        assert out["prev_mask"][i].sum() == 2048 and out["prev_mask"][i][:8].all()
        assert out["context"][i] == Context.REMOVE and out["has_prev"][i]
        assert out["gesture_kind"][i] == GestureKind.CLICK  # grow_kinds, not kinds
    plain = IterativeConfig(prob=1.0, max_steps=1, kinds=kinds)
    off, _ = iterate_batch(batch, lambda b: logits, np.random.default_rng(3), plain)
    # ungrown, the model's mask is the region: no error, so no new interaction
    assert not off["has_prev"].any() and not off["prev_mask"].any()
    masks, _ = iterate_batch(
        batch, lambda b: (logits > 0).astype(np.uint8), np.random.default_rng(3), plain
    )
    for key in batch:  # with growth off, logits and {0,1} masks give the same bytes
        assert masks[key].tobytes() == off[key].tobytes()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [("prob", 1.5, "prob: must be in"), ("max_steps", 0, "max_steps"), ("kinds", (7,), "kinds"),
     ("grow_prob", -0.1, "grow_prob"), ("grow_scale", (0.5, 2.0), "grow_scale"),
     ("grow_scale", (3.0, 2.0), "grow_scale"), ("grow_kinds", (), "grow_kinds")],
)  # fmt: skip
def test_bad_iterative_fields_are_named(field, value, message):
    config = load_config(str(ROOT / "experiments" / "lite_iterative.py") + ":tiny")
    config.iterative[field] = value
    with pytest.raises(ValueError, match=f"config.iterative.{message}"):
        validate_config(config)


def test_lite_iterative_variants_validate():
    path = ROOT / "experiments" / "lite_iterative.py"
    long_variants = ("offline_long", "offline_clicks", "offline_obey", "offline_leak",
                     "offline_coarse", "offline_coarse_clicks", "offline_coarse_wide",
                     "offline_long3x", "offline_long3x_coarse_clicks")  # fmt: skip
    for variant in ("offline", *long_variants, "demo", "tiny"):
        validate_config(load_config(f"{path}:{variant}"))
    long = load_config(f"{path}:offline_long")
    assert long.init_from.endswith("lite_iterative_offline.digjax")  # continues its start
    assert long.iterative.kinds.count(0) == 2 and long.total_steps == 4000
    assert long.predict.rescue_zoom == 2.5 and long.predict.click_size == 320 and long.predict.flip
    assert long.predict.rescue_strokes and long.data.leak_prob == 0.3
    assert long.predict.obey_clicks == 0.3  # the click pass (docs/model_quality.md)
    assert long.predict.open_threshold == -0.25  # the open prompts' cut (docs/model_quality.md)
    clicks = load_config(f"{path}:offline_clicks")
    # measured on the 4000-step default
    assert clicks.init_from.endswith("lite_iterative_offline_long.digjax")
    assert clicks.data.kinds.count(0) == 2 and clicks.iterative.kinds.count(0) == 3
    obey = load_config(f"{path}:offline_obey")
    assert obey.init_from == clicks.init_from and obey.loss.obey_weight > 0
    leak = load_config(f"{path}:offline_leak")
    assert leak.init_from == clicks.init_from and leak.data.leak_prob > 0
    coarse = load_config(f"{path}:offline_coarse")  # the default's run with coarse priors
    assert coarse.data.coarse_prob == 0.3 and long.data.coarse_prob == 0.0
    assert coarse.init_from == long.init_from and coarse.total_steps == long.total_steps
    assert tuple(coarse.data.coarse_kinds) == (0, 1, 2, 3, 4)
    clicks_only = load_config(f"{path}:offline_coarse_clicks")  # coarse priors for clicks only
    assert tuple(clicks_only.data.coarse_kinds) == (0,)
    rest = {k: v for k, v in clicks_only.data.items() if k != "coarse_kinds"}
    assert rest == {k: v for k, v in coarse.data.items() if k != "coarse_kinds"}
    assert clicks_only.to_dict() | {"data": None} == coarse.to_dict() | {"data": None}
    longer = load_config(f"{path}:offline_long3x")  # the default's run, three times as long
    assert longer.total_steps == 3 * long.total_steps
    assert longer.to_dict() | {"total_steps": 0} == long.to_dict() | {"total_steps": 0}
    longer_coarse = load_config(f"{path}:offline_long3x_coarse_clicks")  # ... + coarse clicks
    assert longer_coarse.data.to_dict() == clicks_only.data.to_dict()
    assert longer_coarse.to_dict() | {"data": None} == longer.to_dict() | {"data": None}
    leak_clicks = load_config(f"{path}:offline_long_leak_clicks")  # leaks for clicks only
    assert tuple(leak_clicks.data.leak_kinds) == (0,) and tuple(long.data.leak_kinds) == (
        0, 1, 2, 3, 4,
    )  # fmt: skip
    assert leak_clicks.to_dict() | {"data": None} == long.to_dict() | {"data": None}
    rest = {k: v for k, v in leak_clicks.data.items() if k != "leak_kinds"}
    assert rest == {k: v for k, v in long.data.items() if k != "leak_kinds"}
    wide = load_config(f"{path}:offline_coarse_wide")  # ... with larger over-segmentations
    assert tuple(wide.data.coarse_over) == (0.3, 4.0)
    assert tuple(coarse.data.coarse_over) == (0.3, 1.5)
    rest = {k: v for k, v in wide.data.items() if k != "coarse_over"}
    assert rest == {k: v for k, v in clicks_only.data.items() if k != "coarse_over"}
    assert wide.to_dict() | {"data": None} == clicks_only.to_dict() | {"data": None}
    grow = load_config(f"{path}:offline_long3x_grow")  # the default continued, grown masks
    validate_config(grow)
    assert grow.init_from.endswith("lite_iterative_offline_long3x.digjax")
    assert grow.iterative.grow_prob == 0.5 and tuple(grow.iterative.grow_kinds) == (0,)
    assert longer.iterative.grow_prob == 0.0
    same = {"iterative": None, "init_from": "", "total_steps": 0, "optim": None, "evals": None}
    assert grow.to_dict() | same == longer.to_dict() | same
    assert not grow.evals and longer.evals  # candidates are measured by `dig_jax.evaluate`
    more = load_config(f"{path}:offline_long3x_more")  # ... and continued, nothing changed
    validate_config(more)
    assert more.init_from == grow.init_from and more.optim.lr == grow.optim.lr
    assert more.total_steps == 6000 and more.iterative == longer.iterative
    assert more.to_dict() | {"total_steps": 0} == grow.to_dict() | {
        "total_steps": 0, "iterative": more.iterative.to_dict()
    }  # fmt: skip
    heads = load_config(f"{path}:offline_long3x_multihead")  # the control + context/kind heads
    validate_config(heads)
    assert heads.model.multihead and not more.model.multihead
    assert heads.loss.context_weight == heads.loss.kind_weight == 0.1
    assert more.loss.context_weight == more.loss.kind_weight == 0.0
    assert heads.total_steps == grow.total_steps
    assert heads.model.aux_pool * heads.model.aux_pool * heads.model.aux_reduce == 1024
    same = {"model": None, "loss": None, "total_steps": 0}
    assert heads.to_dict() | same == more.to_dict() | same
    rest = ("multihead", "aux_reduce", "aux_pool", "aux_hidden")
    assert {k: v for k, v in heads.model.items() if k not in rest} == {
        k: v for k, v in more.model.items() if k not in rest
    }


@pytest.mark.parametrize("variant", ["offline_long", "offline_long3x"])
def test_context_long_is_the_defaults_second_fine_tune_on_the_context_network(variant):
    long = load_config(str(ROOT / "experiments" / "lite_iterative.py") + f":{variant}")
    context = load_config(str(ROOT / "experiments" / "lite_context_baseline.py") + f":{variant}")
    validate_config(context)
    assert context.model.input_kind == "context"
    assert context.init_from.endswith("lite_context_real_offline.digjax")
    for key in ("total_steps", "optim.lr", "optim.warmup_steps", "iterative", "data.leak_prob",
                "data.sources", "predict"):  # fmt: skip
        want, got = long, context
        for part in key.split("."):
            want, got = want[part], got[part]
        assert want == got, key


@pytest.mark.parametrize(
    "variant, start, start9k",
    [
        ("offline_real", "lite_context_baseline_offline", "lite_context_baseline_offline9k"),
        ("offline_long3x", "lite_context_real_offline", "lite_context_real9k_offline"),
    ],
)
def test_context_chain_from_the_9000_step_start_differs_only_in_its_start(variant, start, start9k):
    path = str(ROOT / "experiments" / "lite_context_baseline.py")
    short, long = load_config(f"{path}:{variant}"), load_config(f"{path}:{variant}9k")
    assert short.init_from.endswith(f"/{start}.digjax")
    assert long.init_from.endswith(f"/{start9k}.digjax")
    assert long.to_dict() | {"init_from": ""} == short.to_dict() | {"init_from": ""}
    start_config = load_config(f"{path}:offline")  # the start: the default's 9000 steps
    gesture_start = load_config(str(ROOT / "experiments" / "lite_dataaug.py") + ":offline")
    assert start_config.total_steps == gesture_start.total_steps == 9000
    assert start_config.optim == gesture_start.optim and start_config.data.sources == (
        gesture_start.data.sources
    )


def test_loop_trains_on_own_masks_starting_from_an_exported_segmenter(tiny_checkpoint, tmp_path):
    from tiny_models import TINY_MODEL

    from dig_jax.export import load_variables

    config = load_config(str(ROOT / "experiments" / "hrnet_base.py") + ":tiny")
    config.model.update({k: tuple(v) if isinstance(v, list) else v for k, v in TINY_MODEL.items()})
    config.init_from = str(tiny_checkpoint)
    config.iterative.prob = 1.0
    config.loss.obey_weight = 0.5  # the obey term rides along on the model's own masks
    config.optim.lr = 1e-12  # the weights stay where init_from put them
    config.total_steps = 2
    config.export = False
    result = train(config, tmp_path / "run")
    start = jax.tree.leaves(load_variables(tiny_checkpoint)["params"])
    end = jax.tree.leaves(jax.device_get(result.state.params))
    for a, b in zip(start, end, strict=True):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), atol=1e-6)
    rows = [line for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert any('"iterative_passes"' in row for row in rows)
    assert any('"obey_loss"' in row for row in rows)
    config.init_from = str(tmp_path / "missing.digjax")
    with pytest.raises(ValueError, match=r"config\.init_from must be an existing"):
        validate_config(config)
