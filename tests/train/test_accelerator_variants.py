"""The accelerator variants (`gpu`, `tpu`) of every experiment: the paper's recipe sized for
one GPU and an 8-chip slice, valid for their device counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from dig_jax.train.__main__ import load_config
from dig_jax.train.config import (
    ACCELERATORS,
    PAPER_BATCH,
    PAPER_LR,
    PAPER_SAMPLES,
    base_config,
    for_accelerator,
    validate_config,
)

EXPERIMENTS = sorted((Path(__file__).resolve().parents[2] / "experiments").glob("*.py"))


@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: p.stem)
@pytest.mark.parametrize("kind", sorted(ACCELERATORS))
def test_every_experiment_has_valid_accelerator_variants(path: Path, kind: str):
    spec = ACCELERATORS[kind]
    config = load_config(f"{path}:{kind}")
    validate_config(config, spec["devices"])
    assert config.variant == kind
    assert config.batch_size == spec["batch_size"] and config.image_size == spec["image_size"]
    assert config.batch_size % spec["devices"] == 0
    # the paper's sample budget, the learning rate linear in the global batch
    assert config.total_steps * config.batch_size == pytest.approx(PAPER_SAMPLES, abs=128)
    assert config.optim.lr == pytest.approx(PAPER_LR * config.batch_size / PAPER_BATCH)


def test_accelerator_sizing_keeps_the_paper_model_and_rejects_unknown_kinds():
    paper, gpu = base_config("paper"), base_config("gpu")
    assert gpu.model.to_dict() == paper.model.to_dict()
    assert gpu.data.sources == paper.data.sources
    with pytest.raises(ValueError, match="kind must be one of"):
        for_accelerator(base_config("paper"), "ipu")
