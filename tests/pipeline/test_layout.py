"""Stages on the grid (snake order) and the mesh as the planner reads it from a profile."""

from __future__ import annotations

import pytest

from autoplace.hardware.load import load_profile
from autoplace.hardware.profile import ProfileError
from autoplace.pipeline import MeshMachine, PipelinePlan, Stage
from autoplace.pipeline.layout import layout, snake


def neighbours(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return abs(a[0] - b[0]) + abs(a[1] - b[1]) == 1


@pytest.mark.parametrize("rows, cols", [(1, 5), (4, 4), (3, 7), (96, 76)])
def test_the_snake_visits_every_pe_once_through_neighbours(rows, cols):
    order = snake(rows, cols)
    assert len(set(order)) == rows * cols
    assert all(neighbours(a, b) for a, b in zip(order, order[1:]))


def test_stages_are_lines_of_neighbours_and_consecutive_stages_touch():
    plan = PipelinePlan(stages=(Stage(0, 2, 3), Stage(2, 5, 5), Stage(5, 6, 2)), replicas=3)
    placed = layout(plan, 5, 6)
    assert [len(s) for s in placed[0]] == [3, 5, 2]
    pes = [pe for replica in placed for stage in replica for pe in stage]
    assert len(pes) == len(set(pes)) == 30  # every PE of the 5 x 6 grid, once
    for replica in placed:
        line = [pe for stage in replica for pe in stage]
        assert all(neighbours(a, b) for a, b in zip(line, line[1:]))
    assert placed[1][0][0] == (1, 1)  # the second copy goes on from the 11th PE (row 1 runs back)
    with pytest.raises(ValueError, match="needs 40 PEs"):
        layout(PipelinePlan(stages=plan.stages, replicas=4), 5, 6)


def test_the_mesh_profile_as_the_planner_sees_it():
    m = MeshMachine.of(load_profile("mesh"))
    assert (m.rows, m.cols, m.size) == (4, 4, 16)
    assert [u.name for u in m.units] == ["arm", "npu"]
    assert m.memory_bytes == 2 << 20 and m.memory_bps == 16e9
    assert (m.link_bps, m.link_s) == (4e9, 0.5e-6)
    assert (m.uplink_bps, m.uplink_s) == (2e9, 2e-6)
    with pytest.raises(ProfileError, match="has no \\[mesh\\]"):
        MeshMachine.of(load_profile("soc"))


def test_the_grid_maps_say_each_pes_stage_and_busy_share():
    import dataclasses

    from test_dp import chain, machine

    from autoplace.pipeline import StageCosts, evaluate
    from autoplace.pipeline.layout import grid_maps

    costs = StageCosts(chain([1, 3, 2, 2]), dataclasses.replace(machine(rows=2, cols=4)))
    plan = PipelinePlan(stages=(Stage(0, 2, 1), Stage(2, 4, 2)), replicas=2)
    stage, busy = grid_maps(plan, costs)
    # snake: row 0 left to right (copy 0: stage 0, 1, 1; copy 1 starts), row 1 back
    assert stage.tolist() == [[0, 1, 1, 0], [-1, -1, 1, 1]]
    period = evaluate(plan, costs).period_s  # stage 0's 4 ms; stage 1 computes 2 of them
    assert busy[0, 0] == pytest.approx(costs.stage(0, 2, 1)["compute"] / period)
    assert busy[0, 1] == pytest.approx(0.5, rel=1e-3) and busy[1, 0] == -1
