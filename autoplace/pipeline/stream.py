"""A pipeline's stream simulated event by event: the check on its analytic period.

Each inference passes every stage in order: the stage's DMA engines receive its input (the
tensors crossing the cut before it, and the weights it streams from the shared memory), its
PEs' units compute its ops in order (consecutive
ops on one unit as one piece of work), its DMA engines then do the rest of its
communication (rotations, the cut after it, graph inputs and outputs). A stage's DMA
engines and its PEs (each of their units, when they overlap) are resources, and so is the
shared memory, which moves each stage's graph inputs, outputs and streamed weights (for
every copy: a copy's turn takes ``replicas`` times its own bytes), each working on
whichever inference is ready (:func:`autoplace.measure.stream.run_stream`), so that with
overlapping units a stage's core can run one inference's norm while its accelerator runs the
next one's conv. ``tests/pipeline/test_pipeline_stream.py`` shows that with enough
inferences in flight the measured period is the plan's analytic one (its slowest stage's
``max(compute, communication)``, compute the busiest resource's), and with one in flight the
latency. With two per stage (what double buffers hold), a tightly balanced plan (every stage
near the period) runs up to 13% slower than the analytic period: the stages wait for each
other; with overlapping units, whose ops alternate within a stage, the dynamic program's
plans run up to a third slower (``experiments/results/bench_pipeline.md``).
"""

from __future__ import annotations

import numpy as np

from autoplace.measure.stream import Work, middle_period, run_stream
from autoplace.pipeline.costs import StageCosts
from autoplace.pipeline.plan import PipelinePlan


def pipeline_items(plan: PipelinePlan, costs: StageCosts) -> list[Work]:
    """One inference's work: per stage, its incoming transfer, its ops (a piece per run of
    consecutive ops on one unit), the rest of its communication, each after the one
    before."""
    items: list[Work] = []
    names = _resource_names(costs)
    for n, (s, f) in enumerate(zip(plan.stages, costs.plan_stages(plan))):
        before = (len(items) - 1,) if items else ()
        shared = costs.stage_shared_seconds(s, plan.replicas, plan.spilled_at(n))
        if shared > 0:  # the shared memory's turn for this copy, beside the stage's DMA
            items.append(Work("shared", shared, before))
        items.append(Work(f"stage{n}.dma", f["incoming"], before))
        for resource, seconds in _runs(s, costs):
            items.append(Work(f"stage{n}.{names[resource]}", seconds, (len(items) - 1,)))
        items.append(Work(f"stage{n}.dma", f["comm"] - f["incoming"], (len(items) - 1,)))
    return items


def _runs(stage, costs: StageCosts) -> list[tuple[int, float]]:
    """``(resource, seconds)`` of each run of consecutive ops of ``stage`` on one resource
    (a unit when a PE's units overlap, else the PE)."""
    ops = np.arange(stage.start, stage.end)
    units = costs.op_units(stage)
    secs = costs.unit_secs[units, np.asarray(stage.ways()) - 1, ops]
    resource = costs.resources(units)
    starts = np.flatnonzero(np.r_[True, resource[1:] != resource[:-1]])
    sums = np.add.reduceat(secs, starts)
    return [(int(resource[a]), float(t)) for a, t in zip(starts, sums)]


def _resource_names(costs: StageCosts) -> list[str]:
    """A stage's compute resources: its PEs' units when they overlap, else ``pes``."""
    return [u.name for u in costs.machine.units] if costs.overlap else ["pes"]


def lanes(plan: PipelinePlan, costs: StageCosts) -> list[str]:
    """The stream's resources in pipeline order: the shared memory (if it limits what the
    copies move), then per stage its PEs (or their units) and its DMA engines."""
    names = _resource_names(costs)
    shared = ["shared"] if costs.shared_seconds(plan) > 0 else []
    return shared + [f"stage{n}.{what}" for n in range(len(plan.stages))
                     for what in (*names, "dma")]


def stream_inferences(plan: PipelinePlan) -> int:
    """Inferences streamed to measure ``plan``: 16 per stage (at least 64), so that the
    middle half of the stream runs with the double buffers full."""
    return max(64, 16 * len(plan.stages))


def _finish(plan: PipelinePlan, costs: StageCosts, inferences: int | None,
            window: int | None, record: list | None = None) -> np.ndarray:
    """The sorted finish times of a stream through one copy of ``plan`` (default: the
    measured stream, :func:`stream_inferences`, two inferences in flight per stage)."""
    inferences = stream_inferences(plan) if inferences is None else inferences
    window = 2 * len(plan.stages) if window is None else window
    return np.sort(run_stream(pipeline_items(plan, costs), inferences, window, record=record))


def streamed_period(plan: PipelinePlan, costs: StageCosts, analytic_s: float) -> float:
    """THE period of ``plan``: seconds per inference of one copy in the measured stream,
    never below ``analytic_s`` (a finite stream's window errs by up to 1.1%). What a plan's
    record holds (over every copy: divided by the copies), what ``pipeline`` prints and
    the period picture shows: one computation."""
    return _clamped(_finish(plan, costs, None, None), analytic_s)


def _clamped(finish: np.ndarray, analytic_s: float) -> float:
    return max(middle_period(finish), analytic_s)


def steady_window(plan: PipelinePlan, costs: StageCosts, analytic_s: float, *,
                  periods: int = 1) -> tuple[float, float, list[tuple]]:
    """``periods`` periods of the measured stream in steady state: ``(start, period,
    work)``, the period :func:`streamed_period`'s (of the same stream), work
    ``(resource, start, end, inference, item)`` of everything that runs in
    ``[start, start + periods * period)`` (clipped to it), for a Gantt chart. A stream runs
    in bursts (a stage may work on two inferences back to back, then wait): one period
    alone can miss a stage's compute; a picture shows several."""
    ran: list[tuple] = []
    finish = _finish(plan, costs, None, None, record=ran)
    period = _clamped(finish, analytic_s)
    start = float(finish[len(finish) // 2 - periods // 2])
    end = start + periods * period
    return start, period, [(r, max(a, start), min(b, end), i, j) for r, a, b, i, j in ran
                           if a < end and b > start and b > a]


def pipeline_period(plan: PipelinePlan, costs: StageCosts, *, inferences: int = 240,
                    window: int | None = None) -> float:
    """The time per inference of a stream of ``inferences`` through one copy of the
    pipeline (at most ``window`` in flight; default two per stage: double buffers)."""
    if inferences < 4:
        raise ValueError(f"inferences must be >= 4 to measure a period, got {inferences}")
    return middle_period(_finish(plan, costs, inferences, window))
