"""Gesture kinds, contexts and the immutable `Gesture` record (codes as in the DIG release)."""

from __future__ import annotations

import dataclasses
import enum

import numpy as np

BRUSH_RADIUS = 5  # px, disc brush used by every rasteriser


class GestureKind(enum.IntEnum):
    CLICK = 0
    SCRIBBLE = 1
    LOOSE_LASSO = 2
    TIGHT_LASSO = 3
    RECTANGLE = 4


class Context(enum.IntEnum):
    REMOVE = 0
    ADD = 1


@dataclasses.dataclass(frozen=True, eq=False)
class Gesture:
    """A gesture: `kind`, ordered `points` float32[N, 2] as (x, y) = (column, row), `closed`.

    Clicks have one point; rectangles and lassos are closed polylines; scribbles are open.
    """

    kind: GestureKind
    points: np.ndarray
    closed: bool

    def __post_init__(self) -> None:
        pts = np.asarray(self.points, dtype=np.float32)
        if pts.ndim != 2 or pts.shape[1] != 2 or pts.shape[0] == 0:
            raise ValueError(f"Gesture.points must be float32[N>=1, 2], got shape {pts.shape}")
        if not np.all(np.isfinite(pts)):
            raise ValueError("Gesture.points contains NaN or inf")
        kind = self.kind
        if isinstance(kind, (bool, np.bool_)) or not isinstance(kind, (int, np.integer)):
            raise ValueError(f"Gesture.kind must be a GestureKind code 0-4, got {kind!r}")
        if int(kind) not in GestureKind._value2member_map_:
            raise ValueError(f"Gesture.kind must be a GestureKind code 0-4, got {kind!r}")
        closed = self.closed
        if not isinstance(closed, (bool, np.bool_, int, np.integer)) or closed not in (0, 1):
            raise ValueError(f"Gesture.closed must be a bool, got {closed!r}")
        pts = pts.copy()
        pts.setflags(write=False)
        object.__setattr__(self, "kind", GestureKind(int(kind)))
        object.__setattr__(self, "points", pts)
        object.__setattr__(self, "closed", bool(self.closed))

    @classmethod
    def _trusted(cls, kind: GestureKind, points: np.ndarray, closed: bool) -> Gesture:
        """The gesture of fresh, finite float32[N >= 1, 2] `points` that the caller made and
        gives away (made read-only here, not copied or checked): the simulators' constructor,
        whose points are new arrays clipped to the image. `kind` a GestureKind, `closed` a
        bool. Spares `__post_init__`'s checks and copy, ~8 µs a gesture."""
        gesture = object.__new__(cls)
        points.setflags(write=False)
        object.__setattr__(gesture, "kind", kind)
        object.__setattr__(gesture, "points", points)
        object.__setattr__(gesture, "closed", closed)
        return gesture

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Gesture):
            return NotImplemented
        return (
            self.kind == other.kind
            and self.closed == other.closed
            and np.array_equal(self.points, other.points)
        )

    def __hash__(self) -> int:
        return hash((int(self.kind), self.closed, self.points.tobytes()))
