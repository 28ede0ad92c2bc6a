"""Records/s per worker of the Beam DIG build (`dig_jax.data.beam_build`) on a synthetic set.

    python benchmarks/beam_build.py [--images 24 --height 480 --width 640 --instances 9]
        [--workers 2] [--kinds 0,1,2,3,4] [--quick]

Writes a COCO-format set to a temporary folder (COCO-sized photos, `--instances` polygons
each, a third of them poles across the photo, drawn in turn so that later ones occlude earlier
ones: the annotations are the visible parts, some split in two, as in COCO) and builds it with
the DirectRunner in multi-process mode. Prints the build's summary and the rate from the
workers' CPU time (a worker's rate on a core of its own) and from the wall time. Needs
apache-beam (the `dev` extra); without it, says so and exits 0. `--quick`: 4 photos of 240x320.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np


def synthetic_coco(root: Path, n: int, height: int, width: int, instances: int) -> Path:
    """`root/instances.json` + `root/images/*.jpg`: `n` photos with visible-part polygons."""
    rng = np.random.default_rng(0)
    (root / "images").mkdir(parents=True, exist_ok=True)
    infos, anns = [], []
    for image_id in range(1, n + 1):
        yy, xx = np.mgrid[:height, :width]
        photo = np.stack([xx * 200 // width, yy * 200 // height, (xx + yy) % 97], -1)
        owner = np.zeros((height, width), np.int32)
        for k in range(1, instances + 1):
            shape = np.zeros((height, width), np.uint8)
            if k % 3 == 0:  # a pole across the photo: it cuts what it passes in front of
                x = int(rng.uniform(0.2, 0.8) * width)
                shape[:, x : x + max(4, width // 40)] = 1
            else:
                centre = rng.uniform((0.1 * width, 0.1 * height), (0.9 * width, 0.9 * height))
                radius = rng.uniform(0.05, 0.3) * min(height, width)
                angles = np.sort(rng.uniform(0, 2 * np.pi, rng.integers(5, 12)))
                r = radius * rng.uniform(0.6, 1.0, angles.size)
                xy = np.stack([centre[0] + r * np.cos(angles), centre[1] + r * np.sin(angles)], -1)
                cv2.fillPoly(shape, [xy.round().astype(np.int32)], 1)
            owner[shape > 0] = k
            photo[shape > 0] = rng.integers(30, 230, 3)
        for k in range(1, instances + 1):
            visible = (owner == k).astype(np.uint8)
            contours, _ = cv2.findContours(visible, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
            polygons = [c.reshape(-1).astype(float).tolist() for c in contours if len(c) >= 3]
            if polygons:
                anns.append(dict(id=image_id * 100 + k, image_id=image_id, iscrowd=0,
                                 category_id=1, area=float(visible.sum()),
                                 segmentation=polygons))  # fmt: skip
        noisy = np.clip(photo + rng.integers(-12, 12, photo.shape), 0, 255).astype(np.uint8)
        name = f"{image_id:06d}.jpg"
        cv2.imwrite(str(root / "images" / name), noisy[..., ::-1])
        infos.append(dict(id=image_id, height=height, width=width, file_name=name))
    path = root / "instances.json"
    path.write_text(json.dumps(dict(images=infos, annotations=anns, categories=[{"id": 1}])))
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=24)
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--instances", type=int, default=9)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--kinds", default="0,1,2,3,4")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.images, args.height, args.width = 4, 240, 320
    try:
        import apache_beam  # noqa: F401
    except ImportError:
        print("skipped: apache-beam is not installed (pip install -e '.[dev]')")
        return 0
    from dig_jax.data import beam_build

    root = str(Path(beam_build.__file__).resolve().parents[2])  # the workers import this dig_jax
    os.environ["PYTHONPATH"] = os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])
    with tempfile.TemporaryDirectory() as tmp:
        coco = synthetic_coco(Path(tmp) / "coco", args.images, args.height, args.width,
                              args.instances)  # fmt: skip
        print(f"{args.images} synthetic photos of {args.width}x{args.height}, "
              f"{args.instances} polygons each, {args.workers} workers")  # fmt: skip
        start = time.perf_counter()
        code = beam_build.main([
            "--coco-json", str(coco), "--images", str(Path(tmp) / "coco/images"),
            "--out", str(Path(tmp) / "out"), "--kinds", args.kinds,
            "--runner", "DirectRunner", "--direct_num_workers", str(args.workers),
            "--direct_running_mode", "multi_processing",
        ])  # fmt: skip
        wall = time.perf_counter() - start
        files = [f for f in (Path(tmp) / "out").rglob("*") if f.is_file()]
        size = sum(f.stat().st_size for f in files)
    print(f"dataset: {size / 2**20:.1f} MiB, {size / 2**20 / args.images:.2f} MiB per photo")
    print(
        f"whole command: {wall:.1f} s wall, {args.images / wall / args.workers:.3f} "
        "records/s per worker from the wall time (start-up and writing included)"
    )
    return code


if __name__ == "__main__":
    sys.exit(main())
