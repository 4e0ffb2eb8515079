"""The ``Measurer`` contract shared by the simulator, local and RPC measurement."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from autoplace.space import Placement
from autoplace.space.problem import ErrorKind, Problem


@dataclass(frozen=True, kw_only=True)
class Event:
    """One interval of a timeline: an op on a unit, or a copy hop on a unit or DMA engine."""

    kind: str  # "op" or "copy"
    name: str  # op name, or edge name for a copy
    resource: str  # unit name or DMA engine name
    start: float
    end: float
    mode: str = ""  # copy mode for copies
    src: str = ""  # scope copied from (copies) / read (ops)
    dst: str = ""  # scope copied to / written


@dataclass(frozen=True, kw_only=True)
class MeasureResult:
    """A measured (or simulated) candidate. ``error`` is None when it is valid.

    An infeasible placement (``OUT_OF_MEMORY``) keeps its metrics so a user can see how far
    over it is; other failures carry only ``error`` and ``detail``.
    """

    latency_s: float | None = None
    error: ErrorKind | None = None
    detail: str = ""
    unit_busy_s: Mapping[str, float] = field(default_factory=dict)
    copy_bytes: Mapping[str, int] = field(default_factory=dict)
    peak_bytes: Mapping[str, int] = field(default_factory=dict)
    energy_j: float | None = None
    #: the steady-state time per inference of a stream of inputs (1 / throughput), where
    #: the measurer models one and the placement's double-buffered stream fits
    period_s: float | None = None
    timeline: tuple[Event, ...] = ()

    def __post_init__(self) -> None:
        if self.error is None and (self.latency_s is None or not self.latency_s >= 0):
            raise ValueError(f"a valid result needs latency_s >= 0, got {self.latency_s!r}")
        numbers = [("latency_s", self.latency_s), ("energy_j", self.energy_j),
                   ("period_s", self.period_s),
                   *((f"unit_busy_s[{k}]", v) for k, v in self.unit_busy_s.items())]
        for name, value in numbers:
            if value is not None and not math.isfinite(value):
                raise ValueError(f"{name} must be finite, got {value!r}")

    @property
    def ok(self) -> bool:
        return self.error is None

    @classmethod
    def failure(cls, error: ErrorKind, detail: str) -> MeasureResult:
        return cls(error=error, detail=detail)

    @classmethod
    def refused(cls, problem: Problem) -> MeasureResult:
        """The failure of a placement refused before measuring (``SearchSpace.check``)."""
        return cls(error=problem.kind, detail=problem.detail)

    def to_dict(self) -> dict:
        """JSON-ready form (without the timeline)."""
        return {
            "latency_s": self.latency_s,
            "error": self.error.value if self.error else None,
            "detail": self.detail,
            "unit_busy_s": dict(self.unit_busy_s),
            "copy_bytes": dict(self.copy_bytes),
            "peak_bytes": dict(self.peak_bytes),
            "energy_j": self.energy_j,
            **({} if self.period_s is None else {"period_s": self.period_s}),
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> MeasureResult:
        return cls(
            latency_s=d.get("latency_s"),
            error=ErrorKind(d["error"]) if d.get("error") else None,
            detail=d.get("detail", ""),
            unit_busy_s=d.get("unit_busy_s", {}),
            copy_bytes=d.get("copy_bytes", {}),
            peak_bytes=d.get("peak_bytes", {}),
            energy_j=d.get("energy_j"),
            period_s=d.get("period_s"),
        )


class MeasurementStopped(RuntimeError):
    """The measurer cannot go on (e.g. no RPC server is left) in the middle of a batch.

    ``partial`` holds what it got before stopping: one entry per placement of the batch,
    a result, or None for a candidate never measured. The search logs the results, then
    stops with this error's message (which says how to go on).
    """

    def __init__(self, message: str, partial: Sequence[MeasureResult | None] = ()):
        super().__init__(message)
        self.partial = list(partial)


class Measurer(ABC):
    """Measures placements of one graph on one profile.

    ``measure`` returns one result per placement, in order; a failing candidate is a
    result with an ``error``, never an exception. Exceptions mean misuse, or
    :class:`MeasurementStopped` when the measurer cannot go on at all.
    """

    #: Short name written to the tuning log ("simulator", "local", "rpc").
    name: str = "measurer"
    #: measuring costs no more than the simulator's prediction (the simulator itself): the
    #: search then ranks moves by the simulator, not by a cost model learned from it
    free: bool = False

    @abstractmethod
    def measure(self, placements: Sequence[Placement]) -> list[MeasureResult]:
        """Measure each placement; same order and length as the input."""

    def measure_encoded(self, choice, mode, placements: Sequence[Placement]
                        ) -> list[MeasureResult]:
        """Measure candidates given both ways: genome rows of this measurer's space (copy
        modes repaired by ``space.normalize``) and the placements they decode to, as the
        tuning loop has them. By default :meth:`measure` of the placements; a measurer
        that works on arrays (the simulator) skips encoding them again."""
        return self.measure(placements)

    def set_incumbent(self, value_s: float | None) -> None:  # noqa: B027 - optional hook
        """The least seconds per inference (of the job's objective) measured so far, told
        before each batch of a job of one objective (None: none yet; a job of several is
        judged on a front, never by one figure): a measurer may report a candidate whose bound
        shows it cannot beat it without measuring it in full (the stream measurer of mesh
        plans does). Default: ignored."""

    def close(self) -> None:  # noqa: B027 - optional hook, not abstract
        """Release workers, sessions or files (default: nothing)."""
