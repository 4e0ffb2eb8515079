"""What a tuning job minimises: one inference's latency, or the period of a stream; and the
other figures of a result a front of records weighs them against (energy, peak memory).

Both are seconds per inference and both are in every simulated record (``latency_s``,
``period_s``); the objective says which one the search ranks by, which one the study is
told and which record is the best. ``throughput`` minimises the period (docs/simulator.md,
"Throughput"): inferences per second in steady state are ``1 / period_s``.

A reader of records ranks by an objective without simulating: the batch simulator's kernels
(numba) load only when :meth:`Objective.feasible` first runs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

import numpy as np

from autoplace.measure.base import MeasureResult

if TYPE_CHECKING:
    from autoplace.measure.batch import BatchOutput
    from autoplace.space import SearchSpace


class Criterion:
    """A figure of a result to minimise: what a front of records is made of (latency,
    energy, memory; :mod:`autoplace.records.front`)."""

    #: its name (``--objective``, ``--pick``, ``best --pareto --criteria``)
    name: str
    #: the result field it reads
    field: str
    #: how it is printed: the unit, and the factor from the field's unit to it
    unit: str = "ms"
    scale: float = 1e3

    def value(self, result: MeasureResult) -> float | None:
        """The result's figure; None where it failed or has none."""
        return getattr(result, self.field) if result.ok else None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class Objective(Criterion, ABC):
    """Seconds per inference to minimise, from a result or a batch of simulated rows."""

    @abstractmethod
    def simulated(self, out: BatchOutput) -> np.ndarray:
        """Per row, the simulator's seconds per inference, whether or not the row fits."""

    @abstractmethod
    def feasible(self, space: SearchSpace, out: BatchOutput) -> np.ndarray:
        """Per row, whether the value is one the placement can reach (it fits)."""

    def held(self, out: BatchOutput) -> np.ndarray:
        """Per row and scope, the bytes the placement holds at its peak (``out`` simulated
        per unit), as :meth:`feasible` checks them against the capacities."""
        return out.peak

    def batch(self, space: SearchSpace, out: BatchOutput) -> np.ndarray:
        """Per row, the simulator's seconds per inference; infinite where infeasible."""
        return np.where(self.feasible(space, out), self.simulated(out), np.inf)


class Latency(Objective):
    """One inference's latency (the makespan)."""

    name, field = "latency", "latency_s"

    def simulated(self, out: BatchOutput) -> np.ndarray:
        return out.latency

    def feasible(self, space: SearchSpace, out: BatchOutput) -> np.ndarray:
        from autoplace.measure.batch import fitting

        return fitting(space, out)


class Throughput(Objective):
    """The period of a stream of inputs (1 / inferences per second); a placement whose
    double-buffered stream does not fit has none."""

    name, field = "throughput", "period_s"

    def simulated(self, out: BatchOutput) -> np.ndarray:
        return out.period

    def feasible(self, space: SearchSpace, out: BatchOutput) -> np.ndarray:
        from autoplace.measure.batch import streams

        return streams(space, out)

    def held(self, out: BatchOutput) -> np.ndarray:
        from autoplace.measure.batch import streaming_peak

        return streaming_peak(out)


class Energy(Criterion):
    """Joules per inference (``energy_j``, as the profile's energy figures price it:
    docs/simulator.md, "Energy"; 0 where it gives none)."""

    name, field, unit = "energy", "energy_j", "mJ"


class PeakMemory(Criterion):
    """Bytes held at the peak of an inference, summed over the memory scopes
    (``peak_bytes``: activations, weights and the graph's inputs and outputs)."""

    name, field, unit, scale = "peak_memory", "peak_bytes", "MiB", 1 / 2**20

    def value(self, result: MeasureResult) -> float | None:
        return float(sum(result.peak_bytes.values())) if result.ok and result.peak_bytes \
            else None


LATENCY, THROUGHPUT = Latency(), Throughput()
ENERGY, PEAK_MEMORY = Energy(), PeakMemory()
#: the objectives by ``--objective`` name
OBJECTIVES: dict[str, Objective] = {o.name: o for o in (LATENCY, THROUGHPUT)}
#: what a front of records can be made of, by name
CRITERIA: dict[str, Criterion] = {c.name: c for c in (LATENCY, THROUGHPUT, ENERGY,
                                                      PEAK_MEMORY)}


def objective_named(name: str) -> Objective:
    """The objective called ``name``; ValueError naming the choices otherwise."""
    try:
        return OBJECTIVES[name]
    except KeyError:
        raise ValueError(f"objective must be one of {tuple(OBJECTIVES)}, got {name!r}") from None
