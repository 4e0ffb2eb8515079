"""What is wrong with a candidate, as a value: an :class:`ErrorKind` for code to branch on,
and a detail for people. The space returns one (:meth:`SearchSpace.check`); measurers put
them in their results (:class:`~autoplace.measure.base.MeasureResult`)."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class ErrorKind(enum.Enum):
    """Why a candidate has no valid latency."""

    INVALID = "invalid"  # does not fit the graph and profile
    NO_COPY_PATH = "no_copy_path"  # two scopes with no route for the copy mode
    OUT_OF_MEMORY = "out_of_memory"  # peak live bytes exceed a scope's capacity
    BUILD = "build"
    RUN = "run"
    TIMEOUT = "timeout"
    CONNECTION = "connection"


@dataclass(frozen=True, kw_only=True)
class Problem:
    """Why a placement cannot be run: its ``kind`` and a one-line ``detail`` naming the op,
    edge or unit (the text is for people; code branches on the kind)."""

    kind: ErrorKind
    detail: str

    def __post_init__(self) -> None:
        if not isinstance(self.kind, ErrorKind):
            raise TypeError(f"kind must be an ErrorKind, got {self.kind!r}")

    def __str__(self) -> str:
        return self.detail
