"""A pipeline's analytic period against a stream of inferences simulated event by event."""

from __future__ import annotations

import dataclasses

import pytest
from test_dp import MIB, chain, machine
from test_units import graph_of, two_units

from autoplace.hardware.load import load_profile
from autoplace.models import load_graph
from autoplace.pipeline import MeshMachine, PipelinePlan, Stage, StageCosts, best_pipeline, evaluate
from autoplace.pipeline.stream import pipeline_period


def _cases():
    """(name, plan, costs): compute-bound and communication-bound stages, one stage, a
    PE's two units on different inferences, and the dynamic program's plans of two
    bundled models (on the core and the NPU of the bundled mesh's PEs)."""
    compute = StageCosts(chain([1, 3, 2, 2]), machine(link_bps=1e9))
    yield "compute-bound", PipelinePlan(stages=(Stage(0, 2, 1), Stage(2, 4, 1))), compute
    comm = StageCosts(chain([0.2, 0.3, 0.2], kind="conv2d", nbytes=2_000_000),
                      machine(link_bps=1e9))  # a 2 MB cut takes 2 ms, more than any op
    yield "communication-bound", PipelinePlan(stages=(Stage(0, 1, 1), Stage(1, 2, 2),
                                                      Stage(2, 3, 1))), comm
    spilling = StageCosts(comm.graph, dataclasses.replace(
        machine(link_bps=1e9), uplink_bps=0.5e9, uplink_s=1e-6, uplink_total_bps=1.5e9))
    yield "a cut through the shared memory", PipelinePlan(
        stages=(Stage(0, 1, 1), Stage(1, 2, 2), Stage(2, 3, 1)), spilled=(1,)), spilling
    yield "one stage", PipelinePlan(stages=(Stage(0, 4, 3),)), compute
    weighty = StageCosts(chain([2, 1, 4, 1, 3], weights=MIB, kind="conv2d", nbytes=300_000),
                         machine(rows=2, cols=4, memory=3 * MIB, launch=1e-5))
    yield "weights split", best_pipeline(weighty), weighty
    units = StageCosts(graph_of([("elementwise", 8), ("elementwise", 1), ("norm", 1),
                                 ("conv2d", 3), ("norm", 2), ("elementwise", 1)]),
                       two_units(cols=4))
    yield "two units", PipelinePlan(stages=(Stage(0, 3, 1, units=("acc", "core", "core")),
                                            Stage(3, 6, 2))), units
    mesh = dataclasses.replace(MeshMachine.of(load_profile("mesh")), rows=8, cols=8)
    for model in ("squeezenet", "inception_v1"):
        costs = StageCosts(load_graph(model), mesh)
        yield model, best_pipeline(costs), costs


CASES = list(_cases())


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_a_stream_through_the_pipeline_runs_at_its_period(case):
    _, plan, costs = case
    figures = evaluate(plan, costs)
    # with as many inferences in flight as it takes, the slowest stage sets the pace (a
    # stage's units and DMA engines each serve several pieces of an inference, so the
    # stream takes some hundred inferences to settle)
    assert pipeline_period(plan, costs, inferences=1000, window=1000) == pytest.approx(
        figures.period_s, rel=0.01)
    # two per stage (double buffers) reach it on a slack pipeline, and fall short by up
    # to an eighth on the dynamic program's tightly balanced ones, never beat it
    two_each = pipeline_period(plan, costs)
    assert figures.period_s * (1 - 1e-9) <= two_each <= figures.period_s * 1.15
    # one inference at a time: each goes through every stage alone
    assert pipeline_period(plan, costs, inferences=8, window=1) == pytest.approx(
        figures.latency_s, rel=1e-9)
