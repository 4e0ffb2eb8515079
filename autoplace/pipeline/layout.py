"""Where a pipeline's stages sit on the grid: contiguous ranges of a snake order (SET, ISCA
2023), so a stage's PEs form a line of neighbours and consecutive stages touch; the
replicas of the pipeline follow one another along the same order."""

from __future__ import annotations

import numpy as np

from autoplace.pipeline.costs import StageCosts
from autoplace.pipeline.plan import PipelinePlan, evaluate


def snake(rows: int, cols: int) -> list[tuple[int, int]]:
    """``(row, col)`` of every PE in snake order: row 0 left to right, row 1 right to left,
    and so on; consecutive PEs are neighbours."""
    return [(r, c if r % 2 == 0 else cols - 1 - c) for r in range(rows) for c in range(cols)]


def layout(plan: PipelinePlan, rows: int, cols: int) -> list[list[list[tuple[int, int]]]]:
    """``[replica][stage]``: the ``(row, col)`` of each PE of each stage of each replica;
    ValueError if the plan needs more PEs than the grid has."""
    need = plan.pes * plan.replicas
    if need > rows * cols:
        raise ValueError(f"the plan needs {need} PEs ({plan.replicas} x {plan.pes}); the grid "
                         f"has {rows} x {cols} = {rows * cols}")
    order, at, out = snake(rows, cols), 0, []
    for _ in range(plan.replicas):
        stages = []
        for stage in plan.stages:
            stages.append(order[at:at + stage.pes])
            at += stage.pes
        out.append(stages)
    return out


def grid_maps(plan: PipelinePlan, costs: StageCosts) -> tuple[np.ndarray, np.ndarray]:
    """``(stage, busy)``, each ``[rows, cols]``: the stage index of every PE (-1: unused)
    and the share of a period its busiest unit computes (-1: unused)."""
    m = costs.machine
    figures, stages = evaluate(plan, costs), costs.plan_stages(plan)
    stage, busy = np.full((m.rows, m.cols), -1), np.full((m.rows, m.cols), -1.0)
    for replica in layout(plan, m.rows, m.cols):
        for s, pes in enumerate(replica):
            share = stages[s]["compute"] / figures.period_s
            for r, c in pes:
                stage[r, c], busy[r, c] = s, share
    return stage, busy
