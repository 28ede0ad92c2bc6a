"""Segment one photo from one gesture with an exported segmenter, at the photo's own size.

dig-jax predict --image photo.jpg --gesture stroke.png --out mask.png
dig-jax predict --image photo.jpg --points "120,80 180,95 210,160" --prev-mask mask.png \
    --out mask.png --force                       # refine, replacing the mask it read

The gesture is either a mask file (any nonzero pixel is marked; e.g. a stroke painted in an
image editor) or points in photo pixels (x,y pairs; one point is a click, several an open
stroke, with `--closed` a lasso), drawn with the radius-5 brush of `dig_jax.gestures`. The
model is never told which gesture it is or whether to add or remove. Writes the mask (0 / 255
PNG) and, with `--overlay`, the photo with the mask in blue and the gesture in red. A photo
with an EXIF orientation (a phone's) is turned upright first, as viewers show it: points,
gesture and previous mask are in that upright photo's pixels, and so is the mask written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from dig_jax.cli_args import add_checkpoint, print_written


def parse_points(text: str) -> np.ndarray:
    """'x,y x,y ...' (spaces or ';' between pairs) -> float32[N, 2]; ValueError naming the
    problem."""
    pairs = [p for p in text.replace(";", " ").split() if p]
    if not pairs:
        raise ValueError("--points is empty: give x,y pairs in photo pixels, e.g. '120,80'")
    try:
        pts = np.array([[float(v) for v in p.split(",")] for p in pairs], np.float64)
    except ValueError:
        raise ValueError(f"--points must be x,y pairs of numbers, got {text!r}") from None
    if pts.ndim != 2 or pts.shape[1] != 2:
        raise ValueError(f"--points must be x,y pairs (two numbers each), got {text!r}")
    if not np.isfinite(pts).all():
        raise ValueError("--points holds a NaN or infinite coordinate")
    return pts.astype(np.float32)


def gesture_from_points(pts: np.ndarray, shape: tuple[int, int], closed: bool) -> np.ndarray:
    """Points [N, 2] (x, y) -> gesture map uint8[H, W] {0,1} (`dig_jax.gestures.stroke_map`)."""
    from dig_jax.gestures import stroke_map

    return stroke_map(pts, shape, closed=closed)


def read_mask_file(path: Path, shape: tuple[int, int], what: str) -> np.ndarray:
    """A mask image -> uint8[H, W] {0,1} (any nonzero pixel set); ValueError naming the file
    when it is unreadable or not the photo's size."""
    from dig_jax.data.sources.record import read_gray

    mask = read_gray(path)
    if mask.shape != tuple(shape):
        raise ValueError(
            f"{what} {path} is {mask.shape[1]}×{mask.shape[0]} px, "
            f"the photo is {shape[1]}×{shape[0]}"
        )
    return (mask != 0).astype(np.uint8)


def overlay(image: np.ndarray, mask: np.ndarray, gesture: np.ndarray) -> np.ndarray:
    """RGB uint8[H, W, 3]: the photo, the mask tinted blue, the gesture painted red."""
    out = image.astype(np.float32)
    blue = np.array([40, 110, 255], np.float32)
    out[mask > 0] = 0.55 * out[mask > 0] + 0.45 * blue
    out[gesture > 0] = (230, 30, 30)
    return out.round().astype(np.uint8)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_checkpoint(parser)
    parser.add_argument("--image", type=Path, required=True, help="the photo (any size)")
    given = parser.add_mutually_exclusive_group(required=True)
    given.add_argument("--gesture", type=Path, help="gesture mask file (nonzero = marked)")
    given.add_argument("--points", help="gesture points 'x,y x,y ...' in photo pixels")
    parser.add_argument("--closed", action="store_true", help="--points form a closed lasso")
    parser.add_argument("--prev-mask", type=Path, default=None, help="mask to refine")
    parser.add_argument(
        "--out", type=Path, default=None, help="mask PNG (default results/predict/STEM_mask.png)"
    )
    parser.add_argument("--overlay", type=Path, default=None, help="also write an overlay PNG")
    parser.add_argument(
        "--force", action="store_true", help="replace --out / --overlay files that exist"
    )
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> list[Path]:
    import cv2

    import dig_jax
    from dig_jax.data.sources.record import read_photo
    from dig_jax.paths import shipped_checkpoint

    out = args.out or Path("results/predict") / f"{args.image.stem}_mask.png"
    for path in (out, args.overlay):
        if path is not None and path.exists() and (path.is_dir() or not args.force):
            what = "a folder" if path.is_dir() else "a file (--force replaces it)"
            raise ValueError(f"{path} exists and is {what}")
    image = read_photo(args.image)
    shape = image.shape[:2]
    if args.gesture is not None:
        gesture = read_mask_file(args.gesture, shape, "gesture")
        if not gesture.any():
            raise ValueError(f"gesture {args.gesture} marks no pixel")
    else:
        gesture = gesture_from_points(parse_points(args.points), shape, args.closed)
    prev = None if args.prev_mask is None else read_mask_file(args.prev_mask, shape, "prev mask")
    checkpoint = args.checkpoint or shipped_checkpoint("gesture")
    if checkpoint is None:
        raise ValueError("no shipped checkpoint in checkpoints/: pass --checkpoint FILE.digjax")
    seg = dig_jax.load_segmenter(checkpoint)
    mask = seg.predict(image, gesture, prev)
    written = []
    for path, picture in ((out, mask * 255), (args.overlay, None)):
        if path is None:
            continue
        if picture is None:
            picture = overlay(image, mask, gesture)[..., ::-1]
        path.parent.mkdir(parents=True, exist_ok=True)
        if not cv2.imwrite(str(path), np.ascontiguousarray(picture).astype(np.uint8)):
            raise ValueError(f"cannot write {path} (is its extension an image format?)")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        written = run(args)
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print_written(written)
    return 0


if __name__ == "__main__":
    sys.exit(main())
