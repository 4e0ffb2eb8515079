"""A pipeline's stream simulated event by event: the check on its analytic period.

Each inference passes every stage in order: the stage's DMA engines receive its input (the
tensors crossing the cut before it), its PEs compute, its DMA engines then do the rest of
its communication (rotations, the cut after it, graph inputs and outputs); a stage's PEs and
its DMA engines are two resources, each working on whichever inference is ready
(:func:`autoplace.measure.stream.run_stream`). ``tests/pipeline/test_stream.py`` shows
that with enough inferences in flight the measured period is the plan's analytic one (its
slowest stage's ``max(compute, communication)``), and with one in flight the latency. With
two per stage (what double buffers hold), a tightly balanced plan (every stage near the
period) runs up to 13% slower than the analytic period: the stages wait for each other.
"""

from __future__ import annotations

import numpy as np

from autoplace.measure.stream import Work, middle_period, run_stream
from autoplace.pipeline.costs import StageCosts
from autoplace.pipeline.plan import PipelinePlan


def pipeline_items(plan: PipelinePlan, costs: StageCosts) -> list[Work]:
    """One inference's work: per stage, its incoming transfer, its compute, the rest of its
    communication, each after the one before."""
    items: list[Work] = []
    for n, s in enumerate(plan.stages):
        f = costs.of(s)
        after = (len(items) - 1,) if items else ()
        items.append(Work(f"stage{n}.dma", f["incoming"], after))
        items.append(Work(f"stage{n}.pes", f["compute"], (len(items) - 1,)))
        items.append(Work(f"stage{n}.dma", f["comm"] - f["incoming"], (len(items) - 1,)))
    return items


def steady_window(plan: PipelinePlan, costs: StageCosts, *, inferences: int = 64,
                  window: int | None = None) -> tuple[float, float, list[tuple]]:
    """One period of the stream in steady state: ``(start, period, work)``, where work is
    ``(resource, start, end, inference, item)`` of everything that runs in
    ``[start, start + period)`` (clipped to it), for a Gantt chart."""
    window = 2 * len(plan.stages) if window is None else window
    ran: list[tuple] = []
    finish = np.sort(run_stream(pipeline_items(plan, costs), inferences, window, record=ran))
    period = middle_period(finish)
    start = float(finish[inferences // 2])
    end = start + period
    return start, period, [(r, max(a, start), min(b, end), i, j) for r, a, b, i, j in ran
                           if a < end and b > start and b > a]


def pipeline_period(plan: PipelinePlan, costs: StageCosts, *, inferences: int = 240,
                    window: int | None = None) -> float:
    """The time per inference of a stream of ``inferences`` through one copy of the
    pipeline (at most ``window`` in flight; default two per stage: double buffers)."""
    if inferences < 4:
        raise ValueError(f"inferences must be >= 4 to measure a period, got {inferences}")
    window = 2 * len(plan.stages) if window is None else window
    return middle_period(run_stream(pipeline_items(plan, costs), inferences, window))
