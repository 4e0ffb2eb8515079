"""What a user would do by hand: cut the network into stages of equal FLOPs.

For ``s`` stages (1, 2, 3, 4, 6, 8, ... up to the number of ops), the ops are cut where the
running FLOP count passes each ``1/s`` of the total; each stage gets the fewest PEs that hold
it (its weights, buffers and working set: :meth:`StageCosts.unsplit_memory`), and the
pipeline is replicated over the mesh. The best of these by throughput is the baseline.
"""

from __future__ import annotations

import math

import numpy as np

from autoplace.pipeline.costs import StageCosts
from autoplace.pipeline.plan import PipelinePlan, Stage, evaluate


def stage_counts(n: int) -> list[int]:
    """1, 2, 3, 4, 6, 8, 12, 16, ... (each power of two and one and a half times it), to
    ``n``."""
    out, p = set(), 1
    while p <= n:
        out.update(x for x in (p, p + p // 2) if x <= n)
        p *= 2
    return sorted(out | {n})


def equal_flops(costs: StageCosts, pes: int | None = None) -> PipelinePlan | None:
    """The best equal-FLOP pipeline (module docstring) on ``pes`` PEs (default: the mesh);
    None if none fits."""
    pes = costs.machine.size if pes is None else pes
    best, best_thr = None, 0.0
    for s in stage_counts(costs.n):
        plan = _split(costs, s)
        if plan is None or plan.pes > pes:
            continue
        plan = PipelinePlan(stages=plan.stages, replicas=pes // plan.pes)
        thr = evaluate(plan, costs).throughput
        if thr > best_thr:
            best, best_thr = plan, thr
    return best


def _split(costs: StageCosts, s: int) -> PipelinePlan | None:
    """``s`` stages of about equal FLOPs, each on the fewest PEs that hold it."""
    flops = np.cumsum([op.flops for op in costs.graph.ops])
    total = flops[-1] if len(flops) and flops[-1] > 0 else 1.0
    cuts = np.searchsorted(flops, total * np.arange(1, s) / s, side="left") + 1
    bounds = sorted({0, costs.n, *(int(c) for c in cuts if 0 < c < costs.n)})
    stages = []
    for i, j in zip(bounds, bounds[1:]):
        k = max(1, math.ceil(costs.unsplit_memory(i, j) / costs.machine.memory_bytes))
        if k > costs.K:
            return None
        stages.append(Stage(i, j, k))
    return PipelinePlan(stages=tuple(stages))
