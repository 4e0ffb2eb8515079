"""Plans measured by their streams: the :class:`~autoplace.measure.base.Measurer` of a plan
space (:mod:`autoplace.pipeline.plan_space`).

A plan is measured by simulating a stream of inferences through it
(:func:`autoplace.pipeline.stream.streamed_period`): its result's ``period_s`` is the
seconds per inference over every copy (1 / throughput: the throughput objective's value),
its ``latency_s`` one inference's analytic latency through one copy, its ``energy_j`` the
joules per inference at the streamed period (:func:`autoplace.pipeline.energy.plan_energy`,
0 without the profile's energy terms); a plan that does not
fit its PEs' memory is an ``out_of_memory`` failure that keeps its latency. A stream is
never faster than the analytic period (the busiest resource's work per inference), so once
the job has told it its best (:meth:`StreamMeasurer.set_incumbent`: a job for throughput
alone does, one for throughput and energy does not), a plan whose analytic throughput is
not above the best streamed one is not streamed (it is *bounded*: a result without a
period, or energy). With ``limits`` (a job's ``--max-latency``, ``--max-energy``) only a plan
that keeps them is a best that bounds others.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from autoplace.measure.base import Measurer, MeasureResult
from autoplace.measure.limits import Limits
from autoplace.pipeline.costs import StageCosts
from autoplace.pipeline.energy import plan_energy
from autoplace.pipeline.plan import PipelinePlan, PlanFigures, evaluate
from autoplace.pipeline.stream import streamed_period
from autoplace.space.problem import ErrorKind

#: relative difference of throughputs below which they are the same (sums in another order)
TIE = 1e-9


def measure(plan: PipelinePlan, costs: StageCosts, *,
            above: float | None = None) -> tuple[str, float | None, float, float | None]:
    """``(status, stream period, analytic period, throughput)`` of ``plan`` (one copy's
    periods; the throughput over every copy). A plan whose analytic throughput is not
    ``above`` is not streamed (``bounded``), and a stream measured faster than the analytic
    period (the error of a finite stream's window, up to 1.1%) counts as the analytic
    period."""
    return _measured(plan, costs, evaluate(plan, costs), above)


def _measured(plan: PipelinePlan, costs: StageCosts, f: PlanFigures,
              above: float | None) -> tuple[str, float | None, float, float | None]:
    if not f.fits:
        return "no-fit", None, f.period_s, None
    if above is not None and f.throughput <= above:
        return "bounded", None, f.period_s, None
    period = streamed_period(plan, costs, f.period_s)
    return "ok", period, f.period_s, plan.replicas / period if period > 0 else math.inf


class StreamMeasurer(Measurer):
    """Measures plans of ``costs`` by their streams (module docstring); ``limits``: the
    job's bounds on a plan's latency and energy, if any."""

    name = "stream"
    free = True  # a simulation: nothing to learn its cost from

    def __init__(self, costs: StageCosts, limits: Limits | None = None):
        self.costs, self.limits = costs, limits or Limits()
        self.best: float | None = None  # the highest throughput known to the job
        self.bounding = False  # whether plans that cannot beat it are bounded (once told)

    def set_incumbent(self, value_s: float | None) -> None:
        """The job's best seconds per inference (None: none yet): from then on, plans that
        cannot beat the best known are bounded."""
        self.bounding = True
        if value_s is not None and value_s > 0:
            self._beaten(1.0 / value_s)

    def _beaten(self, throughput: float) -> None:
        if self.best is None or throughput > self.best:
            self.best = throughput

    def measure(self, placements: Sequence[PipelinePlan]) -> list[MeasureResult]:
        return [self._one(plan) for plan in placements]

    def _one(self, plan: PipelinePlan) -> MeasureResult:
        # a plan whose bound ties the best's (but for rounding) cannot beat it either
        above = self.best * (1 + TIE) if self.bounding and self.best is not None else None
        f = evaluate(plan, self.costs)
        status, period, _, throughput = _measured(plan, self.costs, f, above)
        latency = f.latency_s if math.isfinite(f.latency_s) else None
        if status == "no-fit":
            worst = max(range(len(f.stage_memory)), key=f.stage_memory.__getitem__)
            return MeasureResult(error=ErrorKind.OUT_OF_MEMORY, latency_s=latency, detail=(
                f"stage {worst} needs {f.stage_memory[worst]:,.0f} bytes per PE; a PE's "
                f"local scope holds {self.costs.machine.memory_bytes:,}"))
        if status == "bounded":
            return MeasureResult(latency_s=latency)
        period_s, energy_j = plan_figures(plan, self.costs, period)
        result = MeasureResult(latency_s=latency, period_s=period_s, energy_j=energy_j)
        if self.limits.admits(result):  # (one beyond the limits bounds no other)
            self._beaten(throughput)
        return result


def plan_figures(plan: PipelinePlan, costs: StageCosts,
                 copy_period_s: float) -> tuple[float, float]:
    """``(seconds per inference over every copy, joules per inference)`` of ``plan`` when
    one copy runs an inference every ``copy_period_s``: a measured plan's ``period_s`` and
    ``energy_j`` at its streamed period, its bound at the analytic one."""
    return copy_period_s / plan.replicas, plan_energy(plan, costs, copy_period_s)
