"""Data sources: one file per format, all yielding `Record`s (or `DigEntry` samples)."""

from dig_jax.data.sources.benchmark_folder import benchmark_folder, scan_benchmark_folder
from dig_jax.data.sources.bsds_regions import bsds_regions
from dig_jax.data.sources.coco_json import coco_json, scan_coco_json
from dig_jax.data.sources.dig_json import (
    DigEntry,
    DigRowWriter,
    dig_json,
    scan_dig_json,
    write_dig_json,
)
from dig_jax.data.sources.procedural import procedural
from dig_jax.data.sources.record import (
    LoadedRecord,
    Record,
    read_image,
    resize_loaded,
    shrink_loaded,
)

__all__ = [
    "DigEntry",
    "DigRowWriter",
    "LoadedRecord",
    "Record",
    "benchmark_folder",
    "bsds_regions",
    "coco_json",
    "dig_json",
    "procedural",
    "read_image",
    "resize_loaded",
    "scan_benchmark_folder",
    "scan_coco_json",
    "scan_dig_json",
    "shrink_loaded",
    "write_dig_json",
]
