"""What a tuning job minimises: one inference's latency, or the period of a stream; and the
other figures of a result a front of records weighs them against (energy, peak memory).

Both are seconds per inference and both are in every simulated record (``latency_s``,
``period_s``), as is the energy (``energy_j``: the ``energy`` objective minimises joules);
the objective says which one the search ranks by, which one the study is told and which
record is the best, and :meth:`Objective.bounded` keeps a job within a user's limits.
``throughput`` minimises the period (docs/simulator.md, "Throughput"): inferences per second
in steady state are ``1 / period_s``.

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
    from autoplace.measure.limits import Limits
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
    #: what its printed figure is, where that is not its name (a throughput's: the period)
    figure: str | None = None

    def value(self, result: MeasureResult) -> float | None:
        """The result's figure; None where it failed or has none."""
        return getattr(result, self.field) if result.ok else None

    @property
    def target(self) -> str:
        """What its figure is (a cost model of it predicts that: the same within limits)."""
        return self.name

    @property
    def heading(self) -> str:
        """A column of its printed figures: what they are and their unit."""
        return f"{self.figure or self.name} {self.unit}"

    @property
    def best_text(self) -> str:
        """How the record best by it is marked ("least latency", "most throughput")."""
        return f"least {self.name}" if self.figure is None else f"most {self.name}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class Objective(Criterion, ABC):
    """A figure per inference to minimise (seconds, or joules), from a result or a batch of
    simulated rows."""

    #: whether :meth:`simulated` and :meth:`feasible` need a batch simulated per unit and
    #: scope (``simulate_batch(per_unit=True)``: energy, peaks), not its latency and fit
    per_unit: bool = False
    #: the bounds the job keeps to (:meth:`bounded`); None: none
    limits: Limits | None = None

    @abstractmethod
    def simulated(self, out: BatchOutput) -> np.ndarray:
        """Per row, the simulator's figure (seconds, or joules), whether or not it fits."""

    @abstractmethod
    def feasible(self, space: SearchSpace, out: BatchOutput) -> np.ndarray:
        """Per row, whether the value is one the placement can reach (it fits)."""

    def held(self, out: BatchOutput) -> np.ndarray:
        """Per row and scope, the bytes the placement holds at its peak (``out`` simulated
        per unit), as :meth:`feasible` checks them against the capacities."""
        return out.peak

    def excess(self, space: SearchSpace, out: BatchOutput) -> np.ndarray:
        """Per row, how far it is beyond the job's limits (:meth:`Limits.excess
        <autoplace.measure.limits.Limits.excess>`; 0 for every row of a job without)."""
        return np.zeros(len(out.latency))

    def batch(self, space: SearchSpace, out: BatchOutput) -> np.ndarray:
        """Per row, the simulator's figure; infinite where infeasible."""
        return np.where(self.feasible(space, out), self.simulated(out), np.inf)

    def bounded(self, limits: Limits) -> Objective:
        """This objective, within ``limits``: a result beyond them has no value (it is not
        the best; the study is told a failure), a simulated row beyond them is not
        feasible (never proposed). Itself without limits."""
        return Bounded(self, limits) if limits else self

    @property
    def criteria(self) -> tuple[Criterion, ...]:
        """The figures the job's study is told, one direction each (several:
        :class:`Objectives`)."""
        return (self,)

    def values(self, result: MeasureResult) -> list[float] | None:
        """:meth:`value`, per criterion (what the study is told); None where it has none."""
        value = self.value(result)
        return None if value is None else [value]


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

    name, field, figure = "throughput", "period_s", "period"

    def simulated(self, out: BatchOutput) -> np.ndarray:
        return out.period

    def feasible(self, space: SearchSpace, out: BatchOutput) -> np.ndarray:
        from autoplace.measure.batch import streams

        return streams(space, out)

    def held(self, out: BatchOutput) -> np.ndarray:
        from autoplace.measure.batch import streaming_peak

        return streaming_peak(out)


class Energy(Objective):
    """Joules per inference (``energy_j``, as the profile's energy figures price it:
    docs/simulator.md, "Energy"; 0 where it gives none)."""

    name, field, unit, per_unit = "energy", "energy_j", "mJ", True

    def simulated(self, out: BatchOutput) -> np.ndarray:
        if out.energy is None:
            raise ValueError("the energy objective needs a batch simulated per unit")
        return out.energy

    def feasible(self, space: SearchSpace, out: BatchOutput) -> np.ndarray:
        from autoplace.measure.batch import fitting

        return fitting(space, out)


class Bounded(Objective):
    """An objective within :class:`~autoplace.measure.limits.Limits` (see
    :meth:`Objective.bounded`); named after both, so that a study or checkpoint of the
    objective alone, or within other limits, is not taken for it."""

    def __init__(self, inner: Objective, limits: Limits):
        self.inner, self.limits = inner, limits
        self.name, self.field = f"{inner.name} {limits.text()}", inner.field
        self.unit, self.scale = inner.unit, inner.scale
        self.per_unit = inner.per_unit or limits.per_unit

    @property
    def target(self) -> str:
        return self.inner.target

    def value(self, result: MeasureResult) -> float | None:
        return self.inner.value(result) if self.limits.admits(result) else None

    def simulated(self, out: BatchOutput) -> np.ndarray:
        return self.inner.simulated(out)

    def feasible(self, space: SearchSpace, out: BatchOutput) -> np.ndarray:
        return self.inner.feasible(space, out) & self.limits.within(space, out)

    def held(self, out: BatchOutput) -> np.ndarray:
        return self.inner.held(out)

    def excess(self, space: SearchSpace, out: BatchOutput) -> np.ndarray:
        return self.limits.excess(space, out)


class PeakMemory(Objective):
    """Bytes held at the peak of an inference, summed over the memory scopes
    (``peak_bytes``: activations, weights and the graph's inputs and outputs); an objective
    only beside others (``--objective latency,peak_memory``)."""

    name, field, unit, scale, per_unit = "peak_memory", "peak_bytes", "MiB", 1 / 2**20, True

    def value(self, result: MeasureResult) -> float | None:
        return float(sum(result.peak_bytes.values())) if result.ok and result.peak_bytes \
            else None

    def simulated(self, out: BatchOutput) -> np.ndarray:
        if out.peak is None:
            raise ValueError("the peak_memory objective needs a batch simulated per unit")
        return np.floor(out.peak).sum(axis=1)  # (whole bytes per scope, as a result's)

    def feasible(self, space: SearchSpace, out: BatchOutput) -> np.ndarray:
        from autoplace.measure.batch import fitting

        return fitting(space, out)


class Objectives(Objective):
    """Several objectives searched at once (``--objective latency,energy``): the job's
    result is their front (:mod:`autoplace.records.front`). Where one figure is asked for
    (the loop's best so far, descent from it, a cost model's target), it is the first
    objective's; :meth:`values` gives them all (what the study is told). Within ``limits``
    each member is :class:`Bounded` (a result beyond them has no values)."""

    def __init__(self, members: tuple[Objective, ...], limits: Limits | None = None):
        self.plain = members
        self.members = tuple(m.bounded(limits) for m in members) if limits else members
        self.limits = limits
        names = ",".join(m.name for m in members)
        self.name = f"{names} {limits.text()}" if limits else names
        self.field, self.unit, self.scale = members[0].field, members[0].unit, members[0].scale
        self.per_unit = any(m.per_unit for m in self.members)

    @property
    def target(self) -> str:
        return self.plain[0].target

    @property
    def criteria(self) -> tuple[Objective, ...]:
        return self.plain

    def value(self, result: MeasureResult) -> float | None:
        values = self.values(result)
        return None if values is None else values[0]

    def values(self, result: MeasureResult) -> list[float] | None:
        values = [m.value(result) for m in self.members]
        return None if any(v is None for v in values) else values

    def simulated(self, out: BatchOutput) -> np.ndarray:
        return self.members[0].simulated(out)

    def figures(self, out: BatchOutput) -> np.ndarray:
        """``[rows, objectives]``: each row's simulated figure of each objective."""
        return np.column_stack([m.simulated(out) for m in self.members])

    def feasible(self, space: SearchSpace, out: BatchOutput) -> np.ndarray:
        ok = self.members[0].feasible(space, out)
        for m in self.members[1:]:
            ok = ok & m.feasible(space, out)
        return ok

    def held(self, out: BatchOutput) -> np.ndarray:
        return self.members[0].held(out)

    def excess(self, space: SearchSpace, out: BatchOutput) -> np.ndarray:
        return self.limits.excess(space, out) if self.limits else super().excess(space, out)

    def bounded(self, limits: Limits) -> Objective:
        return Objectives(self.plain, limits) if limits else self


LATENCY, THROUGHPUT = Latency(), Throughput()
ENERGY, PEAK_MEMORY = Energy(), PeakMemory()
#: the objectives by ``--objective`` name
OBJECTIVES: dict[str, Objective] = {o.name: o for o in (LATENCY, THROUGHPUT, ENERGY)}
#: what a front of records can be made of, by name
CRITERIA: dict[str, Criterion] = {c.name: c for c in (LATENCY, THROUGHPUT, ENERGY,
                                                      PEAK_MEMORY)}


#: what a job can search for beside others (``--objective latency,energy,peak_memory``)
PER_OP: dict[str, Objective] = {o.name: o for o in (LATENCY, ENERGY, PEAK_MEMORY)}
#: the objectives of a front of a mesh's pipeline plans (``--objective throughput,energy``)
PLAN_FRONT = (THROUGHPUT.name, ENERGY.name)


def objective_named(name: str) -> Objective:
    """The objective ``name`` names: one of :data:`OBJECTIVES`, two or three of
    :data:`PER_OP` separated by commas, or :data:`PLAN_FRONT`'s two (:class:`Objectives`);
    ValueError in one line naming the choices otherwise."""
    if "," not in name:
        try:
            return OBJECTIVES[name]
        except KeyError:
            raise ValueError(f"objective must be one of {tuple(OBJECTIVES)} or several of "
                             f"{','.join(PER_OP)}, got {name!r}") from None
    names = [n.strip() for n in name.split(",")]
    if THROUGHPUT.name in names:
        if sorted(names) != sorted(PLAN_FRONT):
            raise ValueError(f"objective {name!r}: throughput (a stream's period) is searched "
                             f"alone, or beside energy (once each) over a mesh's pipeline "
                             f"plans: {','.join(PLAN_FRONT)}")
        return Objectives(tuple(CRITERIA[n] for n in names))
    bad = [n for n in names if n not in PER_OP]
    if bad or len(set(names)) != len(names):
        why = f"no objective {bad[0]!r}" if bad else "an objective named twice"
        raise ValueError(f"objective {name!r}: {why}; give two or three of "
                         f"{','.join(PER_OP)}, each once")
    return Objectives(tuple(PER_OP[n] for n in names))
