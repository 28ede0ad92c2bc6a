"""The speed work keeps the numerics: logits, loss and gradients of the segmenters (and the
shipped checkpoint's prediction) match references computed with the code before it.

`tests/models/data/speed_reference.npz` was written by `python tests/models/test_speed_numerics.py`
with the models as they were before the speed changes (pointwise convolutions through
`nn.Conv`, no BatchNorm folding); regenerate it only when the numerics are meant to change.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dig_jax.cpu import init_compiler_options
from dig_jax.models.interactive import build_segmenter
from dig_jax.train.config import base_config, with_lite_backbone
from dig_jax.train.losses import total_loss
from dig_jax.train.train import init_state

REFERENCE = Path(__file__).parent / "data" / "speed_reference.npz"
SIDE, BATCH = 64, 2


def _config(name: str):
    config = base_config("demo")
    if name == "lite":
        config = with_lite_backbone(config)
        config.model.pretrained = ""
    return config


def _batch(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    masks = lambda: rng.integers(0, 2, (BATCH, SIDE, SIDE), dtype=np.uint8)
    target = masks()
    target[:, :4] = 255
    return {
        "image": rng.integers(0, 256, (BATCH, SIDE, SIDE, 3), dtype=np.uint8),
        "gesture": masks(), "distance": rng.integers(0, 256, (BATCH, SIDE, SIDE), dtype=np.uint8),
        "prev_mask": masks(), "target": target, "region": masks(),
        "gesture_kind": np.zeros(BATCH, np.int32), "context": np.ones(BATCH, np.int32),
        "has_prev": np.zeros(BATCH, bool),
    }  # fmt: skip


def _variables(model, name: str):
    """Initial variables with non-trivial BatchNorm statistics (so folding them matters)."""
    import optax

    # Jitted with the init options: op by op, the initialisers' dispatch took ~50 s cold.
    init = functools.partial(init_state, model, optax.sgd(0.1), (BATCH, SIDE, SIDE, 6))
    state = jax.jit(init, compiler_options=init_compiler_options() or None)(jax.random.key(1))
    rng = np.random.default_rng(7)
    stats = jax.tree.map(
        lambda v: np.abs(np.asarray(v) + rng.normal(0, 0.2, v.shape).astype(np.float32)),
        state.batch_stats,
    )
    return {"params": state.params, "batch_stats": stats}


def _outputs(name: str) -> dict[str, np.ndarray]:
    """Eval logits, train-mode logits, loss and the gradient's global norm of a demo-size model."""
    from dig_jax.prompts import batch_to_input

    config = _config(name)
    model = build_segmenter(config.model)
    variables = _variables(model, name)
    batch = _batch()
    x = batch_to_input(batch, "gesture")
    # Jitted: op-by-op dispatch of the un-jitted backward pass took minutes on 2 cores.
    eval_logits = jax.jit(lambda v, x: model.apply(v, x, train=False)["mask"])(variables, x)

    def loss_fn(params):
        out, _ = model.apply(
            {"params": params, "batch_stats": variables["batch_stats"]}, x, train=True,
            mutable=["batch_stats"],
        )  # fmt: skip
        return total_loss(out, batch, config.loss)[0], out["mask"]

    grad_fn = jax.jit(jax.value_and_grad(loss_fn, has_aux=True))
    (loss, train_logits), grads = grad_fn(variables["params"])
    leaves = jax.tree.leaves(grads)
    return {
        f"{name}_eval": np.asarray(eval_logits),
        f"{name}_train": np.asarray(train_logits),
        f"{name}_loss": np.asarray(loss),
        # One compiled call: op by op, the per-leaf squares and sums compiled ~120 programs.
        f"{name}_grad_norm": np.asarray(
            jax.jit(lambda gs: jnp.sqrt(sum(jnp.sum(g * g) for g in gs)))(leaves)
        ),
        f"{name}_grad_first": np.asarray(leaves[0]).ravel()[:64],
    }


@functools.lru_cache(maxsize=1)
def _reference() -> dict[str, np.ndarray]:
    return dict(np.load(REFERENCE))


@pytest.mark.slow  # full-size models, compile-bound: `make test` and CI, not the inner loop
@pytest.mark.parametrize("name", ["hrnet", "lite"])
def test_logits_loss_and_gradients_match_reference(name):
    ref, got = _reference(), _outputs(name)
    scale = np.abs(ref[f"{name}_eval"]).max()
    np.testing.assert_allclose(got[f"{name}_eval"], ref[f"{name}_eval"], atol=2e-4 * scale)
    scale = np.abs(ref[f"{name}_train"]).max()
    np.testing.assert_allclose(got[f"{name}_train"], ref[f"{name}_train"], atol=2e-4 * scale)
    np.testing.assert_allclose(got[f"{name}_loss"], ref[f"{name}_loss"], rtol=1e-4)
    np.testing.assert_allclose(got[f"{name}_grad_norm"], ref[f"{name}_grad_norm"], rtol=1e-3)
    scale = np.abs(ref[f"{name}_grad_first"]).max()
    np.testing.assert_allclose(
        got[f"{name}_grad_first"], ref[f"{name}_grad_first"], atol=1e-3 * scale
    )


def _shipped_logits() -> dict[str, np.ndarray]:
    """predict_logits of the shipped HRNet checkpoint on one GrabCut photo and a lasso."""
    from skimage import io

    from dig_jax.export import load_segmenter
    from dig_jax.gestures import GestureKind, rasterize, simulate_creation
    from dig_jax.paths import CHECKPOINT_DIR, data_root

    checkpoint = CHECKPOINT_DIR / "hrnet_dataaug_offline.digjax"
    photo = data_root() / "grabcut" / "images" / "106024.jpg"
    mask_path = data_root() / "grabcut" / "masks" / "106024.bmp"
    if not (checkpoint.is_file() and photo.is_file() and mask_path.is_file()):
        pytest.skip("the shipped HRNet checkpoint or the GrabCut photo is missing")
    image = io.imread(photo)[..., :3]
    mask = io.imread(mask_path)
    mask = (mask[..., 0] if mask.ndim == 3 else mask) == 255
    gesture = simulate_creation(GestureKind.LOOSE_LASSO, mask, np.random.default_rng(0))
    seg = load_segmenter(checkpoint)
    logits = seg.predict_logits(image, rasterize(gesture, mask.shape))
    return {"shipped_logits": logits[::4, ::4].astype(np.float32)}


def test_shipped_checkpoint_prediction_matches_reference():
    ref = _reference()
    if "shipped_logits" not in ref:
        pytest.skip("reference written without the shipped checkpoint")
    got = _shipped_logits()["shipped_logits"]
    want = ref["shipped_logits"]
    np.testing.assert_allclose(got, want, atol=2e-4 * np.abs(want).max())
    assert np.mean((got > 0) != (want > 0)) < 1e-3


def write_reference() -> None:
    values = {**_outputs("hrnet"), **_outputs("lite")}
    try:
        values.update(_shipped_logits())
    except pytest.skip.Exception:
        pass
    REFERENCE.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(REFERENCE, **values)
    print(f"wrote {REFERENCE}: {sorted(values)}")


if __name__ == "__main__":
    jax.config.update("jax_platforms", "cpu")
    sys.exit(write_reference())
