"""Data: regions and parts, previous segmentations, sources, samples and the grain pipeline.

from dig_jax.data import make_dataset
ds = make_dataset(dict(sources=["procedural:2000"], image_size=256, batch_size=8), "train")
"""

from dig_jax.data.pipeline import PipelineConfig, make_dataset, resize_sample, resolve_source
from dig_jax.data.priors import (
    Correction,
    PriorUnreachableError,
    coarse_prior,
    find_corrections,
    refinement_targets,
    synthesize_prior,
)
from dig_jax.data.regions import Region, creation_target, extract_regions
from dig_jax.data.samples import (
    SAMPLE_KEYS,
    creation_sample,
    join_region,
    random_sample,
    refinement_sample,
)
from dig_jax.data.sources import (
    LoadedRecord,
    Record,
    benchmark_folder,
    bsds_regions,
    coco_json,
    dig_json,
    procedural,
)

__all__ = [
    "SAMPLE_KEYS",
    "Correction",
    "LoadedRecord",
    "PipelineConfig",
    "PriorUnreachableError",
    "Record",
    "Region",
    "benchmark_folder",
    "bsds_regions",
    "coarse_prior",
    "coco_json",
    "creation_sample",
    "creation_target",
    "dig_json",
    "extract_regions",
    "find_corrections",
    "join_region",
    "make_dataset",
    "procedural",
    "random_sample",
    "refinement_sample",
    "refinement_targets",
    "resize_sample",
    "resolve_source",
    "synthesize_prior",
]
