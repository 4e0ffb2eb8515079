"""Each op on a unit of its PEs, the units of a PE working on different inferences at once:
the stage model's figures worked by hand, the dynamic program still exact for the default
units, the bound below every unit choice, the search's ``unit`` move, the log and manifest
keeping the choice."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from mesh_search import line_of, search
from test_dp import assert_least_periods_are_optimal

from autoplace.graph import Edge, Op, OpGraph
from autoplace.hardware.profile import Unit
from autoplace.measure import MeasureResult
from autoplace.pipeline import (
    MeshMachine,
    PipelinePlan,
    Stage,
    StageCosts,
    best_pipeline,
    evaluate,
    throughput_bound,
)
from autoplace.pipeline.dp import work_bound
from autoplace.pipeline.log import trial_fields
from autoplace.pipeline.manifest import read_manifest, write_manifest
from autoplace.pipeline.moves import PlanMoves
from autoplace.pipeline.plan_space import plan_of, stage_entry
from autoplace.pipeline.stream import pipeline_period

MS = 1e-3


def two_units(rows=1, cols=1, *, memory=1 << 30, launch=0.0, max_split=4,
              overlap=True) -> MeshMachine:
    """PEs of a 1 GFLOP/s core (any op) and a 4 GFLOP/s accelerator (elementwise and
    conv2d ops), which run ops of different inferences at once (``overlap``); 1 GB/s
    links."""
    core = Unit(name="core", target={"kind": "llvm"}, accepts=frozenset({"*"}),
                gflops={"default": 1.0}, launch_overhead_s=launch)
    acc = Unit(name="acc", target={"kind": "llvm"}, accepts=frozenset({"elementwise",
                                                                       "conv2d"}),
               gflops={"default": 4.0}, launch_overhead_s=launch)
    return MeshMachine(name="two", rows=rows, cols=cols, units=(core, acc),
                       memory_bytes=memory, memory_bps=1e15, link_bps=1e9, link_s=0.0,
                       uplink_bps=1e9, uplink_s=0.0, max_split=max_split,
                       units_overlap=overlap)


def graph_of(ops: list[tuple[str, float]], nbytes: int = 1000) -> OpGraph:
    """A chain of ``(kind, MFLOP)`` ops passing ``nbytes`` along."""
    out = tuple(Op(name=f"o{i}", kind=kind, flops=mf * 1e6, bytes_read=nbytes if i else 0,
                   output_bytes=nbytes) for i, (kind, mf) in enumerate(ops))
    edges = tuple(Edge(src=i, dst=i + 1, nbytes=nbytes) for i in range(len(out) - 1))
    return OpGraph(name="units", ops=out, edges=edges)


def trio() -> StageCosts:
    """a: 8 MFLOP elementwise (acc 2 ms, core 8 ms), b: 1 MFLOP elementwise (acc 0.25 ms,
    core 1 ms), c: 1 MFLOP norm (core only, 1 ms), on one PE."""
    return StageCosts(graph_of([("elementwise", 8), ("elementwise", 1), ("norm", 1)]),
                      two_units())


def test_a_stage_computes_at_its_busiest_units_pace_and_a_move_can_balance_it():
    costs = trio()
    assert [costs.machine.units[u].name for u in costs.default_unit[0]] == ["acc", "acc",
                                                                             "core"]
    default = costs.of(Stage(0, 3, 1))
    # the accelerator runs a and b (2.25 ms) while the core runs c of another inference
    assert default["compute"] == pytest.approx(2.25 * MS)
    assert default["work"] == pytest.approx(3.25 * MS)
    assert default["latency"] == pytest.approx(3.25 * MS + 1e-6)  # + c's 1000 B out
    moved = costs.of(Stage(0, 3, 1, units=("acc", "core", "core")))
    assert moved["compute"] == pytest.approx(2 * MS) and moved["work"] == pytest.approx(4 * MS)
    # memory: 1000 B out, double-buffered, and each unit's largest working set: by
    # default acc's b (2000: in + out) and core's c (2000); moved, acc's a (1000)
    assert default["memory"] == pytest.approx(2000 + 2000 + 2000)
    assert moved["memory"] == pytest.approx(2000 + 1000 + 2000)


def test_a_stage_has_one_form_and_names_real_units_that_run_its_ops():
    costs = trio()
    stage = Stage(0, 3, 1)
    assert costs.with_units(stage, costs.default_unit[0]) == stage
    assert costs.with_units(stage, [1, 0, 0]).units == ("acc", "core", "core")
    with pytest.raises(ValueError, match=r"PE unit 'acc' does not run op 'o2' \(kind norm\)"):
        costs.of(Stage(0, 3, 1, units=("acc", "acc", "acc")))
    with pytest.raises(ValueError, match=r"no PE unit 'npu' \(units: core, acc\)"):
        costs.of(Stage(0, 3, 1, units=("npu", "acc", "core")))
    with pytest.raises(ValueError, match="must name a PE unit per op"):
        Stage(0, 3, 1, units=("acc",))


@pytest.mark.parametrize("seed", range(4))
def test_the_least_period_is_the_brute_force_optimum_with_two_units(seed):
    rng = np.random.default_rng(seed)
    kinds = rng.choice(["elementwise", "norm", "conv2d"], size=5)
    graph = graph_of([(str(k), float(f)) for k, f in zip(kinds, rng.uniform(0.5, 4, 5))],
                     nbytes=int(rng.integers(1, 4)) * 300_000)
    costs = StageCosts(graph, two_units(cols=8, memory=2_500_000, launch=2e-5))
    assert_least_periods_are_optimal(costs, (1, 2, 4, 7))


def test_the_bound_is_the_units_balanced_and_no_unit_choice_beats_it():
    costs = trio()
    # moving a quarter ms of the accelerator's work to the core costs it 1 ms: balanced at
    # 2 ms (the plan with b on the core)
    assert work_bound(costs) == pytest.approx(2 * MS, rel=1e-6)
    rng = np.random.default_rng(1)
    kinds = rng.choice(["elementwise", "norm", "conv2d"], size=5)
    graph = graph_of([(str(k), float(f)) for k, f in zip(kinds, rng.uniform(0.5, 4, 5))])
    costs = StageCosts(graph, two_units(cols=3, launch=1e-4, max_split=3))
    runs = [np.flatnonzero(np.isfinite(costs.unit_secs[:, 0, o])) for o in range(costs.n)]
    best = 0.0
    for units in itertools.product(*runs):  # every unit choice, every split, 3 PEs
        for k in (1, 2, 3):
            for ways in itertools.product(range(1, k + 1), repeat=costs.n):
                stage = costs.with_units(Stage(0, costs.n, k, ways), units)
                plan = PipelinePlan(stages=(stage,), replicas=3 // k)
                best = max(best, evaluate(plan, costs).throughput)
    assert best <= throughput_bound(costs, 3) * (1 + 1e-9)


def test_the_search_moves_an_op_to_an_idle_unit_where_the_dp_cannot():
    costs = trio()
    start = best_pipeline(costs)
    assert evaluate(start, costs).throughput == pytest.approx(1 / (2.25 * MS))
    best, _ = search(costs, 20, pes=1, ranking="analytic")
    assert best.plan.stages[0].units == ("acc", "core", "core")
    # streamed, two inferences in flight: the accelerator on one, the core on the other
    assert best.throughput == pytest.approx(throughput_bound(costs, 1), rel=1e-3)
    assert pipeline_period(best.plan, costs, inferences=8, window=1) == pytest.approx(
        evaluate(best.plan, costs).latency_s)


def test_a_plans_units_go_through_its_log_line_and_its_manifest(tmp_path):
    costs = StageCosts(graph_of([("elementwise", 8), ("elementwise", 1), ("norm", 1),
                                 ("conv2d", 2)]), two_units(cols=3))
    plan = PipelinePlan(stages=(Stage(0, 2, 2, units=("acc", "core")),
                                Stage(2, 4, 1, units=("core", "core"))))
    assert stage_entry(plan.stages[0]) == [0, 2, 2, None, ["acc", "core"], None]
    line = line_of(costs, plan, MeasureResult(latency_s=1e-3, period_s=1e-3))
    assert plan_of(trial_fields(line)) == plan
    write_manifest(tmp_path / "m.json", plan, costs)
    assert read_manifest(tmp_path / "m.json", costs) == plan
    stages = json.loads((tmp_path / "m.json").read_text())["stages"]
    assert [op["unit"] for s in stages for op in s["ops"]] == ["acc", "core", "core", "core"]
    stages[1]["ops"][0]["unit"] = "acc"  # a norm on the accelerator
    (tmp_path / "bad.json").write_text(json.dumps({**json.loads(
        (tmp_path / "m.json").read_text()), "stages": stages}))
    with pytest.raises(ValueError, match="PE unit 'acc' does not run op 'o2'"):
        read_manifest(tmp_path / "bad.json", costs)


def test_a_mesh_profile_says_whether_its_pes_units_overlap(tmp_path):
    from autoplace.hardware.load import load_profile
    from autoplace.hardware.profile import ProfileError

    text = (Path(__file__).parents[2] / "hwprofiles" / "mesh.toml").read_text()
    plain = load_profile("mesh")
    (tmp_path / "on.toml").write_text(text.replace("[mesh]\n", "[mesh]\nunits_overlap = true\n"))
    on = load_profile(tmp_path / "on.toml")
    assert not MeshMachine.of(plain).units_overlap and MeshMachine.of(on).units_overlap
    assert on.hash != plain.hash  # another machine: its logs are not mixed with the other's
    (tmp_path / "bad.toml").write_text(text.replace("[mesh]\n", "[mesh]\nunits_overlap = 1\n"))
    with pytest.raises(ProfileError, match=r"bad.toml: mesh.units_overlap: .*a boolean"):
        load_profile(tmp_path / "bad.toml")


def test_a_pe_whose_units_do_not_overlap_runs_one_op_at_a_time():
    graph = trio().graph
    costs = StageCosts(graph, two_units(overlap=False))
    f = costs.of(Stage(0, 3, 1))
    assert f["compute"] == f["work"] == pytest.approx(3.25 * MS)
    assert f["memory"] == pytest.approx(2000 + 2000)  # one working set at a time
    # each op on its fastest unit already: the search draws no unit move
    rng = np.random.default_rng(0)
    assert "unit" not in PlanMoves(costs, 1, rng).moves
    assert "unit" in PlanMoves(trio(), 1, rng).moves
