"""Clothing Co-Parsing (CCP, `bearpaw/clothing-co-parsing`): photos of people with a clothing
label map: `<root>/photos/NNNN.jpg` and `<root>/annotations/pixel-level/NNNN.mat` (MATLAB file,
key `groundtruth`, uint8[H, W], 0 = background, 1..58 = the classes of `label_list.mat`).

Regions and parts: the person (every labelled pixel) is one region, and each class present
(a garment, skin, hair) is a region of its own inside it. Their 8-connected components become
parts as for every other source (`dig_jax.data.regions`); the photos have no void.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import scipy.io

from dig_jax.data.sources.record import Record

PERSON_ID = 1000  # instance id of the whole person; a class's instance id is its label
LABEL_KEY = "groundtruth"


def read_label_mat(path: str | Path, key: str = LABEL_KEY) -> np.ndarray:
    """The integer label map under `key` of a MATLAB .mat file, [H, W]; ValueError naming the
    file when it is missing, unreadable, lacks the key or holds no 2-D integer array."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"label file not found: {path}")
    try:
        data = scipy.io.loadmat(str(path), variable_names=[key])
    except Exception as err:  # scipy raises ValueError, TypeError, OSError... on bad files
        raise ValueError(f"cannot read label file: {path} ({type(err).__name__})") from None
    if key not in data:
        raise ValueError(f"label file {path} has no {key!r} array")
    labels = np.asarray(data[key])
    if labels.ndim != 2 or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"label file {path}: {key!r} must be an integer [H, W] array, "
                         f"got {labels.dtype}{list(labels.shape)}")  # fmt: skip
    return labels


@dataclasses.dataclass(frozen=True)
class PersonAndClassMasks:
    """Picklable loader: (instances, void, ids): the person (labels > 0, id `PERSON_ID`) and
    one instance per class present (id = its label)."""

    path: str

    def __call__(self) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
        labels = read_label_mat(self.path)
        classes = np.unique(labels)
        classes = classes[classes > 0]
        if classes.size == 0:
            raise ValueError(f"label file {self.path}: no labelled pixel")
        person = (labels > 0)[None]
        parts = labels[None] == classes[:, None, None]
        instances = np.concatenate([person, parts]).astype(np.uint8)
        ids = (PERSON_ID, *(int(c) for c in classes))
        return instances, np.zeros(labels.shape, np.uint8), ids


def clothing_co_parsing(root: str | Path, *, name: str = "clothing_co_parsing") -> list[Record]:
    """Records of the CCP photos that have a pixel-level annotation, sorted by number.

    Raises ValueError when `root` lacks `photos/` or `annotations/pixel-level/`; an
    annotation without its photo is left out of the list (its record would fail to load).
    """
    root = Path(root)
    photos, labels = root / "photos", root / "annotations" / "pixel-level"
    if not photos.is_dir() or not labels.is_dir():
        raise ValueError(f"root: {root} lacks photos/ or annotations/pixel-level/ (CCP layout)")
    records = []
    for mat in sorted(labels.glob("*.mat")):
        photo = photos / f"{mat.stem}.jpg"
        if not photo.is_file():
            continue
        records.append(
            Record(
                source=name,
                image_id=mat.stem,
                image=photo,
                masks=PersonAndClassMasks(str(mat)),
                describe=f"{photo} + {mat}",
            )
        )
    return records
