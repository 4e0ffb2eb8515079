"""The stage model's dynamic program against brute force and against chains worked by hand;
the baselines and the bound around it."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from autoplace.graph import Edge, Op, OpGraph
from autoplace.hardware.profile import Unit
from autoplace.pipeline import (
    MeshMachine,
    PipelinePlan,
    Stage,
    StageCosts,
    best_pipeline,
    evaluate,
    fewest_pes,
    least_period,
    throughput_bound,
)
from autoplace.pipeline.dp import TOLERANCE
from autoplace.pipeline.equal_flops import equal_flops, stage_counts

MIB = 1 << 20


def machine(rows=1, cols=4, *, memory=64 * MIB, link_bps=1e9, launch=0.0, max_split=4):
    """PEs with one 1 GFLOP/s unit (any kind), ``memory`` each, 1 GB/s neighbour links."""
    unit = Unit(name="core", target={"kind": "llvm"}, accepts=frozenset({"*"}),
                gflops={"default": 1.0}, launch_overhead_s=launch)
    return MeshMachine(name="test", rows=rows, cols=cols, units=(unit,), memory_bytes=memory,
                       memory_bps=1e15, link_bps=link_bps, link_s=0.0, uplink_bps=link_bps,
                       uplink_s=0.0, max_split=max_split)


def chain(mflops, *, kind="elementwise", weights=0, nbytes=1000, skip=False) -> OpGraph:
    """A chain of ops of ``mflops`` MFLOP each (1 ms per MFLOP on one core); ``skip``: an
    extra edge from the first op to the last (a tensor forwarded through the middle)."""
    ops = tuple(Op(name=f"o{i}", kind=kind, flops=f * 1e6,
                   bytes_read=(nbytes if i else 0) + weights,
                   output_bytes=nbytes, external_bytes=weights, weight_bytes=weights)
                for i, f in enumerate(mflops))
    edges = [Edge(src=i, dst=i + 1, nbytes=nbytes) for i in range(len(ops) - 1)]
    if skip and len(ops) > 2:
        edges.append(Edge(src=0, dst=len(ops) - 1, nbytes=nbytes))
    return OpGraph(name="chain", ops=ops, edges=tuple(edges))


def brute_force(costs: StageCosts, budget: int, *, streamed: bool = False) -> float:
    """The least period of the slowest stage over every split into stages and every PE
    count per stage (``streamed``: every op's weights streamed from the shared memory)."""
    n, best = costs.n, math.inf
    for r in range(n):
        for cuts in itertools.combinations(range(1, n), r):
            bounds = (0, *cuts, n)
            spans = list(zip(bounds, bounds[1:]))
            for ks in itertools.product(range(1, costs.K + 1), repeat=len(spans)):
                if sum(ks) > budget:
                    continue
                plan = PipelinePlan(stages=tuple(
                    Stage(i, j, k, streamed=costs.streaming(i, j) if streamed else None)
                    for (i, j), k in zip(spans, ks)))
                f = evaluate(plan, costs)
                if f.fits:
                    best = min(best, max(f.stage_period_s))
    return best


@pytest.mark.parametrize("seed", range(6))
def test_the_least_period_is_the_brute_force_optimum(seed):
    rng = np.random.default_rng(seed)
    kind = ("elementwise", "conv2d")[seed % 2]  # without and with input rotation
    graph = chain(rng.uniform(0.5, 4.0, size=5).round(2), kind=kind,
                  nbytes=int(rng.integers(1, 4)) * 400_000, skip=seed >= 3,
                  weights=int(rng.integers(0, 3)) * MIB)
    costs = StageCosts(graph, machine(memory=4 * MIB, launch=2e-5, link_bps=2e9))
    assert_least_periods_are_optimal(costs, (1, 2, 3, 5, 8))


def assert_least_periods_are_optimal(costs: StageCosts, budgets, *,
                                     streamed: bool = False) -> None:
    """:func:`least_period` of each budget is :func:`brute_force`'s, or None if none fits."""
    for budget in budgets:
        want = brute_force(costs, budget, streamed=streamed)
        plan = least_period(costs, budget, streamed=streamed)
        if math.isinf(want):
            assert plan is None
            continue
        got = evaluate(plan, costs)
        assert got.fits and plan.pes <= budget
        assert want <= max(got.stage_period_s) <= want * (1 + TOLERANCE)


def test_fewest_pes_holds_every_stage_within_the_period():
    costs = StageCosts(chain([1, 2, 3, 4]), machine())  # 1, 2, 3, 4 ms on one PE
    plan = fewest_pes(costs, 3.4e-3)
    assert plan.pes == 3  # all four ops on three PEs: 10 / 3 ms; two PEs need 5 ms
    assert max(evaluate(plan, costs).stage_period_s) <= 3.4e-3
    # within 3.3 ms three PEs no longer do: 10 / 3 > 3.3; [o0 o1] alone takes 3 ms and
    # [o2 o3] on two PEs 3.5
    assert fewest_pes(costs, 3.3e-3).pes == 4
    assert fewest_pes(costs, 0.9e-3) is None  # o3 split four ways still takes 1 ms


def test_weights_too_big_for_one_pe_are_split_over_several():
    # three ops of 3 MiB of weights each, PEs of 4 MiB: one op per PE at most, or the
    # weights split over a stage's PEs; every op's 2 ms of work spread over the PEs
    costs = StageCosts(chain([2, 2, 2], weights=3 * MIB), machine(memory=4 * MIB))
    assert least_period(costs, 2) is None  # 9 MiB of weights
    plan = least_period(costs, 3)
    assert evaluate(plan, costs).period_s == pytest.approx(2e-3, rel=1e-12)
    assert all(m <= 4 * MIB for m in evaluate(plan, costs).stage_memory)
    best = best_pipeline(costs, 6)  # 6 ms of work on 6 PEs: at best 1000 per second
    assert evaluate(best, costs).throughput == pytest.approx(1000, rel=1e-9)
    assert best.pes * best.replicas == 6


def test_a_cut_pays_for_what_crosses_it_forwarded_tensors_too():
    # o0 -> o1 -> o2 and o0 -> o2: a cut after o1 carries o1's output and o0's
    graph = chain([1, 1, 1], nbytes=500_000, skip=True)
    costs = StageCosts(graph, machine(link_bps=1e9))
    assert costs.cut.tolist() == [0, 1_000_000, 1_000_000, 0]
    figures = costs.stage(0, 2, 1)
    assert figures["comm"] == pytest.approx(1e-3, rel=1e-12)  # 1 MB at 1 GB/s
    assert figures["compute"] == pytest.approx(2e-3, rel=1e-12)


def test_a_conv_rotates_its_input_slices_an_elementwise_op_does_not():
    conv = StageCosts(chain([4, 4], kind="conv2d", nbytes=1_000_000), machine(link_bps=1e9))
    ew = StageCosts(chain([4, 4], kind="elementwise", nbytes=1_000_000), machine(link_bps=1e9))
    # on 4 PEs the second op reads 3/4 of its 1 MB input from the others; both write
    # their 1 MB result to shared memory (1 ms over the uplink)
    assert conv.stage(0, 2, 4)["comm"] == pytest.approx(0.75e-3 + 1e-3, rel=1e-12)
    assert ew.stage(0, 2, 4)["comm"] == pytest.approx(1e-3, rel=1e-12)
    assert conv.stage(0, 2, 4)["compute"] == pytest.approx(2e-3, rel=1e-12)


def test_the_best_pipeline_beats_equal_flops_and_stays_under_the_bound():
    rng = np.random.default_rng(7)
    costs = StageCosts(chain(rng.uniform(0.2, 5.0, size=12).round(2), kind="conv2d",
                             weights=MIB, nbytes=200_000),
                       machine(rows=4, cols=8, memory=3 * MIB, launch=1e-5, max_split=8))
    best, naive = best_pipeline(costs), equal_flops(costs)
    thr = evaluate(best, costs).throughput
    assert evaluate(naive, costs).throughput <= thr <= throughput_bound(costs, 32)
    assert best.pes * best.replicas <= 32
    # no budget does better: the least period of each, replicated
    for m in range(1, 33):
        plan = least_period(costs, m)
        if plan is not None:
            assert (32 // m) / evaluate(plan, costs).period_s <= thr * (1 + 1e-9)


def test_stage_counts_and_plans_are_validated():
    assert stage_counts(10) == [1, 2, 3, 4, 6, 8, 10]
    with pytest.raises(ValueError, match="not contiguous"):
        PipelinePlan(stages=(Stage(0, 2, 1), Stage(3, 4, 1)))
    with pytest.raises(ValueError, match="first stage starts at op 0"):
        PipelinePlan(stages=(Stage(1, 2, 1),))
    with pytest.raises(ValueError, match="covers ops"):
        evaluate(PipelinePlan(stages=(Stage(0, 2, 1),)), StageCosts(chain([1, 1, 1]),
                                                                     machine()))


def test_ops_that_take_no_time_still_plan():
    # no FLOPs, no launch overhead, memory at 1e15 B/s: every op's slice takes 0 s, so the
    # slowest op bounds nothing; only the graph's output over the uplink costs (1 us)
    costs = StageCosts(chain([0, 0, 0]), machine(launch=0.0, link_bps=1e9))
    plan = least_period(costs, 3)
    assert evaluate(plan, costs).period_s == pytest.approx(1e-6, rel=1e-6)
    best = best_pipeline(costs)
    assert (best.pes, best.replicas) == (1, 4)  # one PE each: four copies
