"""Weights held in a PE or streamed from the shared memory: a stage's figures worked by hand,
the shared memory's bandwidth as a resource of every copy, the dynamic program against brute
force with every weight streamed, the search mixing the two, and the choice through the log,
the manifest, a worker's claim and the profile."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from mesh_search import line_of, search
from test_dp import MIB, assert_least_periods_are_optimal, chain, machine

from autoplace.hardware.load import load_profile
from autoplace.hardware.profile import ProfileError
from autoplace.models import load_graph
from autoplace.pipeline import (
    MeshMachine,
    PipelinePlan,
    Stage,
    StageCosts,
    best_pipeline,
    best_pipelines,
    evaluate,
    fewest_pes,
    throughput_bound,
)
from autoplace.pipeline.log import trial_fields
from autoplace.pipeline.manifest import ManifestError, read_manifest, write_manifest
from autoplace.pipeline.moves import PlanMoves
from autoplace.pipeline.plan_space import plan_of, plan_text
from autoplace.pipeline.stream import pipeline_period
from autoplace.pipeline.stream_measurer import measure


def four_ops(memory=5 * MIB, total_bps=math.inf) -> StageCosts:
    """Four elementwise ops of 1 ms and 2 MiB of weights each, PEs of ``memory``, uplinks of
    1 GB/s that move ``total_bps`` together."""
    mesh = dataclasses.replace(machine(memory=memory), uplink_total_bps=total_bps)
    return StageCosts(chain([1, 1, 1, 1], weights=2 * MIB), mesh)


def test_a_streamed_op_holds_its_slice_while_it_runs_and_streams_it_each_inference():
    costs = four_ops()
    held, streamed = Stage(0, 4, 1), Stage(0, 4, 1, streamed=(0, 1, 2, 3))
    a, b = costs.of(held), costs.of(streamed)
    # 8 MiB held; streamed, one op's 2 MiB slice in its working set and the next one's
    # arriving: 4 MiB less, and now within the PE's 5 MiB
    assert b["memory"] - a["memory"] == pytest.approx(-4 * MIB, abs=1e-6)
    assert not a["fits"] and b["fits"]
    # each inference the PE's DMA engine takes 4 x 2 MiB in at 1 GB/s before it computes
    assert b["comm"] - a["comm"] == pytest.approx(8 * MIB / 1e9, rel=1e-12)
    assert b["incoming"] - a["incoming"] == pytest.approx(8 * MIB / 1e9, rel=1e-12)
    assert b["compute"] == a["compute"] == pytest.approx(4e-3)
    # on two PEs each streams half of each op's weights
    two = costs.of(dataclasses.replace(streamed, pes=2))
    assert two["comm"] - costs.of(Stage(0, 4, 2))["comm"] == pytest.approx(4 * MIB / 1e9)
    with pytest.raises(ValueError, match="streamed"):
        Stage(0, 4, 1, streamed=(4,))
    with pytest.raises(ValueError, match="must be ops of the stage, ascending"):
        Stage(0, 4, 1, streamed=(2, 1))


def test_an_op_without_weights_has_none_to_stream():
    costs = StageCosts(chain([1, 1]), machine())
    with pytest.raises(ValueError, match="op 'o1' has no weights to stream"):
        costs.of(Stage(0, 2, 1, streamed=(1,)))
    assert costs.streaming(0, 2) is None


def test_every_copy_shares_the_shared_memory_and_a_stream_feels_it():
    costs = four_ops(memory=64 * MIB, total_bps=1e9)
    plan = PipelinePlan(stages=(Stage(0, 2, 1, streamed=(0, 1)), Stage(2, 4, 1)), replicas=2)
    f = evaluate(plan, costs)
    moved = costs.S_io[-1] + 4 * MIB  # the graph's input and output, two ops' weights
    assert f.shared_period_s == pytest.approx(2 * moved / 1e9, rel=1e-12)
    assert f.period_s == max(f.shared_period_s, *f.stage_period_s) == f.shared_period_s
    assert f.throughput == pytest.approx(2 / f.shared_period_s)
    # the shared memory is a resource of the stream: a copy's turn takes both copies' bytes
    assert pipeline_period(plan, costs, inferences=400, window=400) == pytest.approx(
        f.period_s, rel=0.01)
    assert measure(plan, costs)[1] >= f.period_s
    # no plan of 4 PEs moves less through it than the inputs, outputs and unheld weights
    assert throughput_bound(costs, 4) <= 1e9 / costs.S_io[-1]
    tight = four_ops(memory=MIB, total_bps=1e9)  # 8 MiB of weights, 4 MiB held at most
    assert throughput_bound(tight, 4) == pytest.approx(1e9 / (tight.S_io[-1] + 4 * MIB))


@pytest.mark.parametrize("seed", range(4))
def test_the_least_period_streaming_every_weight_is_the_brute_force_optimum(seed):
    """Streamed slices shrink as a stage's PEs grow while its rotations grow: the program
    tries more PEs than the least that compute in time (here with 20 us per streamed slice)."""
    rng = np.random.default_rng(seed)
    graph = chain(rng.uniform(0.5, 4.0, size=5).round(2), kind=("elementwise", "conv2d")[seed % 2],
                  nbytes=int(rng.integers(1, 4)) * 400_000, skip=seed >= 2,
                  weights=int(rng.integers(1, 4)) * MIB)
    mesh = dataclasses.replace(machine(memory=4 * MIB, launch=2e-5, link_bps=2e9),
                               uplink_bps=4e9, uplink_s=2e-5)
    costs = StageCosts(graph, mesh)
    assert_least_periods_are_optimal(costs, (1, 2, 3, 5, 8), streamed=True)
    plan = fewest_pes(costs, math.inf, streamed=True)
    assert all(s.streamed == costs.streaming(s.start, s.end) for s in plan.stages)


@pytest.fixture(scope="module")
def resnet50_16():
    """resnet50 on the bundled mesh: 16 PEs of 2 MiB, 98 MiB of weights."""
    return StageCosts(load_graph("resnet50"), MeshMachine.of(load_profile("mesh")))


def test_a_network_bigger_than_the_mesh_streams_its_weights(resnet50_16):
    costs = resnet50_16
    assert fewest_pes(costs, math.inf).pes == 67  # held, its weights need 67 PEs
    plans = best_pipelines(costs, 16)
    assert len(plans) == 1 and plans[0] == best_pipeline(costs)
    f = evaluate(plans[0], costs)
    assert f.fits and plans[0].pes * plans[0].replicas <= 16
    assert all(s.streamed for s in plans[0].stages)
    assert f.throughput <= throughput_bound(costs, 16)


def test_the_search_holds_back_the_weights_that_fit(resnet50_16):
    """From the DP's plan, which streams every weight, the search holds some back in the
    PEs' memory (and splits ops fewer ways to make room): fewer bytes stream, faster
    (by 1.7% on the folded graph, 60 ops; 2% and more on the 145 it had before)."""
    costs = resnet50_16
    start = best_pipeline(costs)
    best, trials = search(costs, 200, pes=16)
    dp = next(t for t in trials if t.plan == start)
    assert best.throughput > 1.01 * dp.throughput
    count = [sum(len(s.streamed or ()) for s in p.stages) for p in (start, best.plan)]
    assert 0 < count[1] < count[0]
    assert {t.move for t in trials} >= {"weights"}


def test_where_weights_are_goes_through_the_log_the_manifest_and_a_claim(tmp_path):
    costs = four_ops()
    mesh = dataclasses.replace(costs.machine, rows=2, cols=2)
    costs = StageCosts(costs.graph, mesh)
    plan = PipelinePlan(stages=(Stage(0, 2, 1, streamed=(1,)), Stage(2, 4, 1)), replicas=2)
    line = line_of(costs, plan)
    assert line["pipeline"]["stages"][0] == [0, 2, 1, None, None, [1]]
    assert plan_of(trial_fields(line)) == plan
    write_manifest(tmp_path / "m.json", plan, costs)
    d = json.loads((tmp_path / "m.json").read_text())
    assert [op["weights"] for op in d["stages"][0]["ops"]] == ["local", "shared"]
    assert [c["op"] for c in d["stages"][0]["copies"] if c["kind"] == "stream_weights"] == ["o1"]
    assert read_manifest(tmp_path / "m.json", costs) == plan
    d["stages"][0]["ops"][0]["weights"] = "dram"
    (tmp_path / "bad.json").write_text(json.dumps(d))
    with pytest.raises(ManifestError, match="bad.json: .*weights are 'dram'"):
        read_manifest(tmp_path / "bad.json", costs)
    # workers claim plans by their text: where weights are, and units, tell plans apart
    held = PipelinePlan(stages=(Stage(0, 2, 1), Stage(2, 4, 1)), replicas=2)
    assert plan_text(plan) != plan_text(held) and "~1" in plan_text(plan)
    assert plan_text(PipelinePlan(stages=(Stage(0, 4, 1, units=("core",) * 4),))) \
        != plan_text(PipelinePlan(stages=(Stage(0, 4, 1),)))


def test_a_mesh_profile_says_what_its_uplinks_move_together(tmp_path):
    mesh = load_profile("mesh")
    assert MeshMachine.of(mesh).uplink_total_bps == pytest.approx(25.6e9)
    text = mesh.source and open(mesh.source).read()
    (tmp_path / "free.toml").write_text(text.replace("total_gbps = 25.6\n", ""))
    free = load_profile(str(tmp_path / "free.toml"))
    assert math.isinf(MeshMachine.of(free).uplink_total_bps) and free.hash != mesh.hash
    (tmp_path / "bad.toml").write_text(text.replace("total_gbps = 25.6", "total_gbps = -1"))
    with pytest.raises(ProfileError, match=r"bad.toml: mesh.uplink.total_gbps: must be > 0"):
        load_profile(str(tmp_path / "bad.toml"))


def test_the_weights_move_is_drawn_only_from_plans_that_stream(resnet50_16):
    """Where streaming every weight does not beat holding them all (squeezenet on 8 x 8 PEs:
    the DP gives one plan, holding every weight), the search never draws the weights move;
    from the DP's plans of resnet50 on the bundled 16 PEs, which stream, it does."""
    mesh = dataclasses.replace(MeshMachine.of(load_profile("mesh")), rows=8, cols=8)
    costs = StageCosts(load_graph("squeezenet"), mesh)
    (start,) = best_pipelines(costs)
    assert not any(s.streamed for s in start.stages)
    rng = np.random.default_rng(0)
    assert "weights" not in PlanMoves(costs, 64, rng).worth_drawing([start])
    _, trials = search(costs, 60, pes=64)
    assert "weights" not in {t.move for t in trials}
    starts = best_pipelines(resnet50_16, 16)
    assert "weights" in PlanMoves(resnet50_16, 16, rng).worth_drawing(starts)


def test_the_weights_move_streams_only_where_memory_sets_a_stages_pes():
    """With memory to spare (4 ops of 2 MiB, PEs of 64 MiB), a stage on two PEs fits on one
    as it is: the weights move does not stream weights to give a PE up (the shrink move
    does that without the traffic), it only holds the streamed op's weights again. On PEs
    of 5 MiB, where the stage does not fit on one PE, it streams to give that PE up."""
    for memory, fewer in ((64 * MIB, False), (5 * MIB, True)):
        costs = four_ops(memory=memory)
        start = PipelinePlan(stages=(Stage(0, 4, 2, streamed=(3,)),), replicas=2)
        _, trials = search(costs, 20, pes=4, ranking="none", moves=("weights",),
                           starts=[start])
        pes = {t.plan.stages[0].pes for t in trials}
        assert pes == ({1, 2} if fewer else {2}), memory
        assert any(t.plan.stages[0].streamed is None for t in trials)
