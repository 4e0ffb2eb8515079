"""A cut's tensors through the shared memory instead of the link between its stages (a
plan's ``spilled``): the figures worked by hand, the search trading a PE for it where memory
binds, and the choice through the log, the manifest and a worker's claim."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from mesh_search import line_of, search
from test_dp import MIB, chain, machine

from autoplace.hardware.load import load_profile
from autoplace.models import load_graph
from autoplace.pipeline import (
    MeshMachine,
    PipelinePlan,
    Stage,
    StageCosts,
    best_pipeline,
    evaluate,
)
from autoplace.pipeline.log import trial_fields
from autoplace.pipeline.manifest import ManifestError, read_manifest, write_manifest
from autoplace.pipeline.moves import PlanMoves
from autoplace.pipeline.plan_space import plan_of, plan_text

CUT = 1 * MIB


def three_convs(memory=8 * MIB, total_bps=math.inf, weights=0, uplink_bps=0.5e9,
                uplink_s=2e-6) -> StageCosts:
    """Three convs of 1 ms whose cuts are 1 MiB on 2 x 4 PEs of ``memory``; links of 1 GB/s,
    uplinks of ``uplink_bps`` and ``uplink_s`` that move ``total_bps`` together."""
    mesh = dataclasses.replace(machine(rows=2, cols=4, memory=memory), uplink_bps=uplink_bps,
                               uplink_s=uplink_s, uplink_total_bps=total_bps)
    return StageCosts(chain([1, 1, 1], kind="conv2d", nbytes=CUT, weights=weights), mesh)


def two_stages(spilled=None, replicas=1) -> PipelinePlan:
    return PipelinePlan(stages=(Stage(0, 1, 1), Stage(1, 3, 1)), replicas=replicas,
                        spilled=spilled)


def test_a_spilled_cut_is_held_once_and_moves_over_both_uplinks():
    costs = three_convs()
    link, shared = costs.plan_stages(two_stages()), costs.plan_stages(two_stages((1,)))
    for before, after in zip(link, shared):  # each side holds one inference's, not two
        assert after["memory"] - before["memory"] == pytest.approx(-CUT)
        assert after["compute"] == before["compute"]
    # the producer writes the cut over its uplink, the consumer reads it over its own
    assert shared[0]["comm"] - link[0]["comm"] == pytest.approx(CUT / 0.5e9 + 2e-6 - CUT / 1e9)
    assert shared[1]["incoming"] - link[1]["incoming"] == pytest.approx(
        CUT / 0.5e9 + 2e-6 - CUT / 1e9)
    with pytest.raises(ValueError, match="must be cuts of the plan"):
        two_stages((2,))


def test_the_shared_memory_moves_a_spilled_cut_twice_for_every_copy():
    costs = three_convs(total_bps=4e9)
    base = costs.shared_seconds(two_stages(replicas=3))
    spilled = costs.shared_seconds(two_stages((1,), replicas=3))
    assert spilled - base == pytest.approx(3 * 2 * CUT / 4e9)  # written, then read
    assert evaluate(two_stages((1,), replicas=3), costs).shared_period_s == \
        pytest.approx(spilled)


def test_the_search_spills_a_cut_to_give_a_pe_up_where_memory_binds():
    """PEs of 6 MiB, uplinks as fast as the links: the middle conv needs 7.5 MiB on one PE
    (its weights, both cuts double-buffered, its working set), so it takes two; with both
    its cuts through the shared memory it holds 5.5 MiB and fits on one. From a plan that
    spills none, the search spills both and gives up the PE that frees: 4 PEs a copy
    instead of 5, two copies on the 8 PEs instead of one; without the move it cannot. On
    the bundled mesh, whose uplinks are half as fast as its links, a spill never pays from
    the DP's plan of squeezenet on 8 x 8 PEs, and the move is not drawn."""
    costs = three_convs(memory=6 * MIB, weights=MIB // 2, uplink_bps=1e9, uplink_s=0.0)
    assert not costs.of(Stage(1, 2, 1))["fits"]
    assert costs.of(Stage(1, 2, 1), (True, True))["memory"] == pytest.approx(5.5 * MIB)
    start = PipelinePlan(stages=(Stage(0, 1, 1), Stage(1, 2, 2), Stage(2, 3, 2)))
    moves = ("shrink", "pe", "grow")  # (merging stages would do better here: not drawn)
    without, _ = search(costs, 40, pes=8, ranking="none", moves=moves, starts=[start])
    best, trials = search(costs, 40, pes=8, ranking="none", moves=("spill", *moves),
                          starts=[start])
    assert best.plan.spilled == (1, 2) and best.plan.replicas == 2
    assert best.throughput > 1.9 * trials[0].throughput
    assert without.plan.replicas == 1 and best.throughput > 1.9 * without.throughput
    mesh = dataclasses.replace(MeshMachine.of(load_profile("mesh")), rows=8, cols=8)
    squeezenet = StageCosts(load_graph("squeezenet"), mesh)
    moves = PlanMoves(squeezenet, 64, np.random.default_rng(0))
    assert "spill" in moves.moves
    assert "spill" not in moves.worth_drawing([best_pipeline(squeezenet)])


def test_where_cuts_pass_goes_through_the_log_the_manifest_and_a_claim(tmp_path):
    costs = three_convs()
    plan = two_stages((1,), replicas=2)
    line = line_of(costs, plan)
    assert line["pipeline"]["spilled"] == [1]
    assert plan_of(trial_fields(line)) == plan
    held = line_of(costs, two_stages())
    assert "spilled" not in held["pipeline"]  # lines of plans without one are as before
    path = tmp_path / "plan.json"
    write_manifest(path, plan, costs)
    assert read_manifest(path, costs) == plan
    text = path.read_text()
    assert '"input_scope": "shared"' in text and '"kind": "to_shared"' in text
    path.write_text(text.replace('"input_scope": "shared"', '"input_scope": "dram"'))
    with pytest.raises(ManifestError, match="input_scope 'dram' is not 'local' or 'shared'"):
        read_manifest(path, costs)
    assert plan_text(plan) != plan_text(two_stages(replicas=2))
    assert plan_text(plan).endswith(" ^1")
