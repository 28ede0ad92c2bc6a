"""Read and write DIG-release JSON: one row per image, parallel per-sample lists, COCO RLE masks.

Row fields (as in the DIG release): `img_id`, `size` [H, W], and per sample `obj_id`,
`syn_gt` (valid local-GT pixels), `syn_gt_void` (void pixels; GT = valid + 255 * void),
`syn_annotations` (the rasterised gesture), `has_prior`, `corr_id` (-1 for creation),
`gesture` (0 click ... 4 rectangle), `mode` (1 add, 0 remove; "add"/"remove"/"sub" are read too);
`prior` maps str(obj_id) to that object's previous segmentation. Multi-region samples:
`has_mul`, `mul_obj_id`, `mul_gesture`, `mul_gt` (no void), `mul_annot`, `mul_prior`.
dig_jax adds two optional fields: `file_name` (the image file in `image_dir`) and `obj_gt`
(str(obj_id) -> the whole region, the global GT); without `obj_gt` the global GT is read as
the valid local GT.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
from pycocotools import mask as mask_utils

from dig_jax.data.regions import VOID
from dig_jax.data.samples import Sample, make_sample
from dig_jax.data.sources.record import read_image
from dig_jax.gestures.types import Context

_IMAGE_SUFFIXES = (".jpg", ".png", ".jpeg", ".JPG", ".bmp")
_MODES = {"add": 1, "remove": 0, "sub": 0, "1": 1, "0": 0}


def encode_rle(mask: np.ndarray) -> dict:
    """{0,1}/bool[H, W] -> JSON-ready COCO RLE {"size": [H, W], "counts": str}."""
    mask = np.asfortranarray((np.asarray(mask) > 0).astype(np.uint8))
    rle = mask_utils.encode(mask)
    return {"size": [int(s) for s in rle["size"]], "counts": rle["counts"].decode("ascii")}


def decode_rle(rle: dict) -> np.ndarray:
    """COCO RLE (str or bytes counts) -> uint8[H, W] {0,1}."""
    counts = rle["counts"]
    if isinstance(counts, list):
        rle = mask_utils.frPyObjects(rle, *rle["size"])
    elif isinstance(counts, str):
        rle = {"size": rle["size"], "counts": counts.encode("ascii")}
    return np.ascontiguousarray(mask_utils.decode(rle), dtype=np.uint8)


class DigRowWriter:
    """Collects the samples of one image into a DIG JSON row."""

    def __init__(self, img_id: str, size: tuple[int, int], file_name: str | None = None):
        self.row: dict[str, Any] = {"img_id": str(img_id), "size": [int(size[0]), int(size[1])]}
        if file_name:
            self.row["file_name"] = file_name
        for key in ("obj_id", "syn_gt", "syn_gt_void", "syn_annotations", "has_prior",
                    "corr_id", "gesture", "mode", "has_mul", "mul_obj_id", "mul_gesture",
                    "mul_gt", "mul_annot", "mul_prior"):  # fmt: skip
            self.row[key] = []
        self.row["prior"] = {}
        self.row["obj_gt"] = {}

    def __len__(self) -> int:
        return len(self.row["obj_id"])

    def set_object(self, obj_id: int, region: np.ndarray, prior: np.ndarray | None = None) -> None:
        """Record an object's global GT and (optionally) its previous segmentation."""
        self.row["obj_gt"][str(int(obj_id))] = encode_rle(region)
        if prior is not None:
            self.row["prior"][str(int(obj_id))] = encode_rle(prior)

    def add_sample(
        self,
        *,
        obj_id: int,
        target: np.ndarray,
        annotation: np.ndarray,
        gesture: int,
        mode: int,
        has_prior: bool,
        corr_id: int = -1,
        multi: dict | None = None,
    ) -> None:
        """Append a sample; `target` uint8 {0,1,255}; `multi` = dict(obj_id, gesture, gt,
        annotation, prior) for its multi-region variant."""
        target = np.asarray(target)
        if has_prior and str(int(obj_id)) not in self.row["prior"]:
            raise ValueError(f"has_prior: object {obj_id} has no prior set (call set_object)")
        r = self.row
        r["obj_id"].append(int(obj_id))
        r["syn_gt"].append(encode_rle(target == 1))
        r["syn_gt_void"].append(encode_rle(target == VOID))
        r["syn_annotations"].append(encode_rle(annotation))
        r["has_prior"].append(bool(has_prior))
        r["corr_id"].append(int(corr_id))
        r["gesture"].append(int(gesture))
        r["mode"].append(int(mode))
        r["has_mul"].append(multi is not None)
        m = multi or {}
        r["mul_obj_id"].append(int(m.get("obj_id", -1)))
        r["mul_gesture"].append(int(m.get("gesture", -1)))
        for key, name in (("mul_gt", "gt"), ("mul_annot", "annotation"), ("mul_prior", "prior")):
            r[key].append(encode_rle(m[name]) if multi is not None else None)


def write_dig_json(path: str | Path, rows: list[dict]) -> None:
    """Write rows (from `DigRowWriter.row`) as a JSON list, like the DIG release files."""
    Path(path).write_text(json.dumps(rows, separators=(",", ":")))


@dataclasses.dataclass(frozen=True, eq=False)
class DigEntry:
    """One sample of a DIG JSON file (picklable); `multi` selects its multi-region variant."""

    row: dict
    index: int
    image_path: str
    multi: bool = False

    def load(self) -> Sample:
        """The sample dict (image read from `image_path`, distance recomputed)."""
        r, i = self.row, self.index
        image = read_image(self.image_path)
        h, w = r["size"]
        if image.shape[:2] != (h, w):
            raise ValueError(
                f"{self.image_path}: image size {image.shape[:2]} != row size {(h, w)}"
            )
        obj = r["obj_id"][i]
        if self.multi:
            gt = decode_rle(r["mul_gt"][i])
            return make_sample(
                image=image, gesture_map=decode_rle(r["mul_annot"][i]),
                prev_mask=decode_rle(r["mul_prior"][i]), target=gt, region=gt,
                kind=r["mul_gesture"][i], context=Context.ADD, image_id=r["img_id"],
                instance_id=obj,
            )  # fmt: skip
        target = decode_rle(r["syn_gt"][i]) + VOID * decode_rle(r["syn_gt_void"][i])
        target = target.astype(np.uint8)
        prev = decode_rle(r["prior"][str(obj)]) if r["has_prior"][i] else None
        obj_gt = r.get("obj_gt", {}).get(str(obj))
        region = decode_rle(obj_gt) if obj_gt else (target == 1)
        return make_sample(
            image=image, gesture_map=decode_rle(r["syn_annotations"][i]), prev_mask=prev,
            target=target, region=region, kind=r["gesture"][i],
            context=_MODES[str(r["mode"][i]).lower()], image_id=r["img_id"], instance_id=obj,
        )  # fmt: skip


def _image_path(row: dict, image_dir: Path) -> Path:
    if row.get("file_name"):
        return image_dir / row["file_name"]
    for suffix in _IMAGE_SUFFIXES:
        if (image_dir / f"{row['img_id']}{suffix}").is_file():
            return image_dir / f"{row['img_id']}{suffix}"
    return image_dir / f"{row['img_id']}.jpg"


def dig_json(
    path: str | Path, image_dir: str | Path, *, include_multi: bool = True
) -> list[DigEntry]:
    """All samples of a DIG JSON file (a list of rows, or a dict of column lists as written by
    pandas `to_json(orient="columns")`), in file order; multi-region variants follow their
    sample when `include_multi`."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"path: DIG JSON file not found: {path}")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"path: {path} is not valid JSON ({err})") from None
    if isinstance(data, dict):  # column-oriented: {field: {row_index: value}}
        keys = sorted(next(iter(data.values())), key=int)
        data = [{field: col[k] for field, col in data.items()} for k in keys]
    image_dir = Path(image_dir)
    entries = []
    for row in data:
        missing = {"img_id", "size", "obj_id", "syn_gt", "syn_gt_void", "syn_annotations"} - set(
            row
        )
        if missing:
            raise ValueError(f"path: row {row.get('img_id')} of {path} lacks {sorted(missing)}")
        image_path = str(_image_path(row, image_dir))
        for i in range(len(row["obj_id"])):
            entries.append(DigEntry(row, i, image_path))
            if include_multi and row.get("has_mul") and row["has_mul"][i]:
                entries.append(DigEntry(row, i, image_path, multi=True))
    return entries
