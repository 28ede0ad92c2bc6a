"""Read and write DIG-release JSON: one row per image, parallel per-sample lists, COCO RLE masks.

Row fields (as in the DIG release): `img_id`, `size` [H, W], and per sample `obj_id`,
`syn_gt` (valid local-GT pixels), `syn_gt_void` (void pixels; GT = valid + 255 * void),
`syn_annotations` (the rasterised gesture), `has_prior`, `corr_id` (-1 for creation),
`gesture` (0 click ... 4 rectangle), `mode` (1 add, 0 remove; "add"/"remove"/"sub" are read too);
`prior` maps str(obj_id) to that object's previous segmentation. Multi-region samples:
`has_mul`, `mul_obj_id`, `mul_gesture`, `mul_gt` (valid local-GT pixels), `mul_annot`,
`mul_prior` (the other region, correct). dig_jax adds optional fields: `file_name` (the
image file in `image_dir`), `obj_gt` (str(obj_id) -> the whole region, the global GT),
`mul_gt_void` (the multi-region target's void pixels, like `syn_gt_void`; absent or None: no
void) and `void` (the photo's own void pixels, e.g. GrabCut's band, one RLE per row).

Ground truth as the DIG paper scores it (`DigEntry.load`):
- local GT: creation — `syn_gt` (the targeted part; multi-region: `mul_gt`, the part and the
  other region); refinement — the prior with the targeted error component corrected and every
  other error as it was: `syn_gt`, and the prior's value on the untargeted-error void pixels
  (`syn_gt_void` minus the photo's own void).
- global GT: the whole region, `obj_gt` (multi-region: joined with `mul_prior`), else the
  source annotations: `<gt_dir>/<img_id>.png`, an instance map whose pixel value is `obj_id`
  (COCO+LVIS as DIG ships it). Without either the global GT is unknown: the sample gets
  `has_region` False and an empty `region`, and the scorer refuses RICE_global on it.
- the photo's own void: the `void` field; else, when the region is known, the void pixels
  that are neither other parts of the region (creation) nor errors of the prior (refinement);
  else none in refinement (every `syn_gt_void` pixel is an untargeted error, as in DIG's
  COCO-based release) and all of `syn_gt_void` in creation.

Bad items do not abort: a row without `img_id` or an `obj_id` list is reported and left out
(`scan_dig_json` returns the problems, `dig_json` logs them); every other missing or malformed
field, and a mask whose size differs from the image, is a ValueError naming the file, the row
and the field when that sample is loaded (the pipeline reports and skips it).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from pycocotools import mask as mask_utils

from dig_jax.data.priors import refinement_local
from dig_jax.data.regions import VOID
from dig_jax.data.samples import Sample, make_sample
from dig_jax.data.sources.record import read_image, read_json
from dig_jax.data.sources.rle import check_size, decode_rle
from dig_jax.gestures.types import Context, GestureKind

log = logging.getLogger(__name__)
_IMAGE_SUFFIXES = (".jpg", ".png", ".jpeg", ".JPG", ".bmp")
_MODES = {"add": 1, "remove": 0, "sub": 0, "1": 1, "0": 0}


def encode_rle(mask: np.ndarray) -> dict:
    """{0,1}/bool[H, W] -> JSON-ready COCO RLE {"size": [H, W], "counts": str}."""
    mask = np.asfortranarray((np.asarray(mask) > 0).astype(np.uint8))
    rle = mask_utils.encode(mask)
    return {"size": [int(s) for s in rle["size"]], "counts": rle["counts"].decode("ascii")}


class DigRowWriter:
    """Collects the samples of one image into a DIG JSON row."""

    def __init__(self, img_id: str, size: tuple[int, int], file_name: str | None = None):
        self.row: dict[str, Any] = {"img_id": str(img_id), "size": [int(size[0]), int(size[1])]}
        if file_name:
            self.row["file_name"] = file_name
        for key in ("obj_id", "syn_gt", "syn_gt_void", "syn_annotations", "has_prior",
                    "corr_id", "gesture", "mode", "has_mul", "mul_obj_id", "mul_gesture",
                    "mul_gt", "mul_gt_void", "mul_annot", "mul_prior"):  # fmt: skip
            self.row[key] = []
        self.row["prior"] = {}
        self.row["obj_gt"] = {}

    def set_void(self, void: np.ndarray) -> None:
        """Record the photo's own void pixels ({0,1}/bool[H, W]); nothing for none."""
        if np.any(np.asarray(void) > 0):
            self.row["void"] = encode_rle(void)

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
        annotation, prior) for its multi-region variant, `gt` its local target uint8
        {0,1,255} (written as `mul_gt` + `mul_gt_void`)."""
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
        mul_gt = None if multi is None else np.asarray(m["gt"])
        r["mul_gt"].append(None if multi is None else encode_rle(mul_gt == 1))
        r["mul_gt_void"].append(None if multi is None else encode_rle(mul_gt == VOID))
        for key, name in (("mul_annot", "annotation"), ("mul_prior", "prior")):
            r[key].append(encode_rle(m[name]) if multi is not None else None)


def write_dig_json(path: str | Path, rows: list[dict]) -> None:
    """Write rows (from `DigRowWriter.row`) as a JSON list, like the DIG release files."""
    Path(path).write_text(json.dumps(rows, separators=(",", ":")))


_SAMPLE_FIELDS = ("syn_gt", "syn_gt_void", "syn_annotations", "has_prior", "gesture", "mode")
_MULTI_FIELDS = ("has_mul", "mul_gt", "mul_annot", "mul_prior", "mul_gesture")


@dataclasses.dataclass(frozen=True, eq=False)
class DigEntry:
    """One sample of a DIG JSON file (picklable); `multi` selects its multi-region variant;
    `json_path` names the file in error messages; `gt_path` is the source annotations'
    instance map (may be "" or absent)."""

    row: dict
    index: int
    image_path: str
    multi: bool = False
    json_path: str = ""
    gt_path: str = ""

    @property
    def is_creation(self) -> bool:
        """True when the sample creates (no previous mask); False for a refinement."""
        return not self.multi and not bool(self._field("has_prior"))

    @property
    def has_multi(self) -> bool:
        """True when the row holds a multi-region variant of this sample (`multi=True`)."""
        return bool(self.row.get("has_mul", [False] * (self.index + 1))[self.index])

    def multi_variant(self) -> DigEntry:
        """This sample's multi-region variant (DIG's dataAug)."""
        return dataclasses.replace(self, multi=True)

    @property
    def name(self) -> str:
        """File, row and sample index, for error messages."""
        return f"{self.json_path or self.image_path} row {self.row.get('img_id')!r} #{self.index}"

    def _field(self, key: str) -> Any:
        """Per-sample value `row[key][index]`; ValueError naming the field if missing."""
        column = self.row.get(key)
        if not isinstance(column, list) or len(column) <= self.index:
            raise ValueError(f"{self.name}: field {key!r} missing or shorter than obj_id")
        return column[self.index]

    def _int(self, key: str) -> int:
        value = self._field(key)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ValueError(f"{self.name}: field {key!r} must be an int, got {value!r:.40}")
        return int(value)

    def _kind(self, key: str) -> int:
        """A gesture kind code 0..4 (the DIG release's); ValueError naming the field else."""
        value = self._int(key)
        if value not in range(len(GestureKind)):
            raise ValueError(f"{self.name}: field {key!r} must be a gesture kind 0..4, got {value}")
        return value

    def _mask(self, key: str, rle: Any, size: tuple[int, int]) -> np.ndarray:
        """Decoded mask of field `key`; ValueError naming it if malformed or not of `size`."""
        try:
            mask = decode_rle(rle, f"field {key!r}")
        except ValueError as err:
            raise ValueError(f"{self.name}: {err}") from None
        if mask.shape != size:
            raise ValueError(f"{self.name}: {key} size {mask.shape} != image size {size}")
        return mask

    def _target(self, key: str, void_key: str, size: tuple[int, int]) -> np.ndarray:
        """uint8 {0,1,255}: the mask of `key` + 255 * the mask of `void_key` (None: no void)."""
        target = self._mask(key, self._field(key), size)
        void_rle = self._field(void_key) if void_key in self.row else None
        if void_rle is not None:
            target = np.where(self._mask(void_key, void_rle, size) > 0, VOID, target)
        return target.astype(np.uint8)

    def _size(self) -> tuple[int, int]:
        """Checks every field this sample needs, up front; returns the row's (H, W)."""
        try:
            size = check_size(self.row.get("size"), "field 'size'")
        except ValueError as err:
            raise ValueError(f"{self.name}: {err}") from None
        self._int("obj_id")
        if not isinstance(self.row.get("obj_gt") or {}, dict):
            raise ValueError(f"{self.name}: field 'obj_gt' must map str(obj_id) to an RLE")
        for key in _MULTI_FIELDS if self.multi else _SAMPLE_FIELDS:
            self._field(key)
        if self.multi and not self._field("has_mul"):
            raise ValueError(f"{self.name}: multi-region variant requested but has_mul is false")
        if not self.multi and self._field("has_prior"):
            prior = self.row.get("prior")
            if not isinstance(prior, dict) or str(self._int("obj_id")) not in prior:
                raise ValueError(f"{self.name}: has_prior is true but 'prior' lacks the object")
        return size

    def _source_region(self, obj: int, size: tuple[int, int]) -> np.ndarray | None:
        """bool[H, W]: the object's whole region from `obj_gt`, else from the source
        annotations `<gt_path>` (pixel value = obj_id); None when neither exists."""
        obj_gt = self.row.get("obj_gt") or {}
        if str(obj) in obj_gt:
            return self._mask("obj_gt", obj_gt[str(obj)], size) > 0
        if not self.gt_path or not Path(self.gt_path).is_file():
            return None
        labels = cv2.imread(self.gt_path, cv2.IMREAD_UNCHANGED)
        if labels is None or labels.shape[:2] != size:
            got = None if labels is None else labels.shape[:2]
            raise ValueError(f"{self.gt_path}: unreadable or of size {got} != row size {size}")
        return (labels if labels.ndim == 2 else labels[..., 0]) == obj

    def _photo_void(self, size: tuple[int, int]) -> np.ndarray | None:
        """bool[H, W] of the row's `void` field, or None when the row has none."""
        rle = self.row.get("void")
        return None if rle is None else self._mask("void", rle, size) > 0

    def load(self, image: np.ndarray | None = None) -> Sample:
        """The sample dict (image read from `image_path`, or `image` when given: the photo
        already in memory, RGB uint8; distance recomputed; local and global GT as the module
        docstring says); ValueError naming the file, row and field on a missing or malformed
        field or a size mismatch."""
        size = self._size()
        image = read_image(self.image_path) if image is None else image
        if image.shape[:2] != size:
            raise ValueError(f"{self.image_path}: image size {image.shape[:2]} != row size {size}")
        obj = self._int("obj_id")
        region = self._source_region(obj, size)
        void = self._photo_void(size)
        ids = dict(image_id=self.row["img_id"], instance_id=obj)
        if self.multi:
            other = self._mask("mul_prior", self._field("mul_prior"), size)
            target = self._target("mul_gt", "mul_gt_void", size)
            if region is not None:
                region = region | (other > 0)
            return _with_region(make_sample(
                image=image, gesture_map=self._mask("mul_annot", self._field("mul_annot"), size),
                prev_mask=other, target=target, region=_or_empty(region, size),
                kind=self._kind("mul_gesture"), context=Context.ADD,
                void=_creation_void(target, region, void), **ids,
            ), region)  # fmt: skip
        mode = _MODES.get(str(self._field("mode")).lower())
        if mode is None:
            raise ValueError(f"{self.name}: field 'mode' has unknown value {self._field('mode')!r}")
        annotation = self._mask("syn_annotations", self._field("syn_annotations"), size)
        target = self._target("syn_gt", "syn_gt_void", size)
        prior = None
        if self._field("has_prior"):
            prior = self._mask("prior", self.row["prior"][str(obj)], size)
            local, void = refinement_local(target, prior, region, void)
        else:
            local, void = target == 1, _creation_void(target, region, void)
        return _with_region(make_sample(
            image=image, gesture_map=annotation, target=target, prev_mask=prior,
            region=_or_empty(region, size), local=local, void=void,
            kind=self._kind("gesture"), context=mode, **ids,
        ), region)  # fmt: skip


def _or_empty(region: np.ndarray | None, size: tuple[int, int]) -> np.ndarray:
    return np.zeros(size, np.uint8) if region is None else region


def _with_region(sample: Sample, region: np.ndarray | None) -> Sample:
    """The sample, flagged `has_region` False when its global GT is unknown (`region` is then
    empty); samples with a known region keep the contract's keys only."""
    if region is None:
        sample["has_region"] = np.bool_(False)
    return sample


def _creation_void(
    target: np.ndarray, region: np.ndarray | None, void: np.ndarray | None
) -> np.ndarray:
    """bool[H, W]: the photo's own void of a creation target {0,1,255}: `void` when known,
    else its void pixels outside the region (the region's other parts are not void), else
    all of them."""
    if void is not None:
        return void
    marked = target == VOID
    return marked if region is None else marked & ~region


def _image_path(row: dict, image_dir: Path) -> Path:
    if row.get("file_name"):
        return image_dir / row["file_name"]
    for suffix in _IMAGE_SUFFIXES:
        if (image_dir / f"{row['img_id']}{suffix}").is_file():
            return image_dir / f"{row['img_id']}{suffix}"
    return image_dir / f"{row['img_id']}.jpg"


def scan_dig_json(
    path: str | Path,
    image_dir: str | Path,
    *,
    include_multi: bool = True,
    gt_dir: str | Path | None = None,
) -> tuple[list[DigEntry], list[str]]:
    """Like `dig_json` but returns (entries, problems): one line per row left out.

    Raises ValueError only when the file itself is unusable (missing, not JSON, not a list of
    rows or a dict of columns).
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"path: DIG JSON file not found: {path}")
    data = read_json(path, "path")
    if isinstance(data, dict):  # column-oriented: {field: {row_index: value}}
        if not data or not all(isinstance(col, dict) for col in data.values()):
            raise ValueError(f"path: {path} is a dict but not of {{field: {{row: value}}}}")
        bad = next((k for col in data.values() for k in col if not k.isdigit()), None)
        if bad is not None:
            raise ValueError(f"path: {path}: row key {bad!r} is not a row number")
        keys = sorted({k for col in data.values() for k in col}, key=int)
        data = [{field: col[k] for field, col in data.items() if k in col} for k in keys]
    if not isinstance(data, list):
        raise ValueError(f"path: {path} must hold a list of rows, got {type(data).__name__}")
    image_dir = Path(image_dir)
    entries, problems = [], []
    for k, row in enumerate(data):
        if (
            not isinstance(row, dict)
            or "img_id" not in row
            or not isinstance(row.get("obj_id"), list)
        ):
            img_id = row.get("img_id") if isinstance(row, dict) else None
            problems.append(
                f"{path}: row {k} (img_id {img_id!r}) lacks 'img_id' or an 'obj_id' list"
            )
            continue
        image_path = str(_image_path(row, image_dir))
        gt_path = str(Path(gt_dir) / f"{row['img_id']}.png") if gt_dir else ""
        has_mul = row.get("has_mul") if isinstance(row.get("has_mul"), list) else []
        for i in range(len(row["obj_id"])):
            entry = DigEntry(row, i, image_path, json_path=str(path), gt_path=gt_path)
            entries.append(entry)
            if include_multi and i < len(has_mul) and has_mul[i]:
                entries.append(entry.multi_variant())
    return entries, problems


def dig_json(
    path: str | Path,
    image_dir: str | Path,
    *,
    include_multi: bool = True,
    gt_dir: str | Path | None = None,
) -> list[DigEntry]:
    """All samples of a DIG JSON file (a list of rows, or a dict of column lists as written by
    pandas `to_json(orient="columns")`), in file order; multi-region variants follow their
    sample when `include_multi`. `gt_dir`: the source annotations (`<img_id>.png` instance
    maps), the global GT of rows without `obj_gt`. Rows that cannot be enumerated are logged
    and left out; other bad fields surface as ValueError from `DigEntry.load`."""
    entries, problems = scan_dig_json(path, image_dir, include_multi=include_multi, gt_dir=gt_dir)
    for problem in problems:
        log.warning("skipping bad item: %s", problem)
    return entries
