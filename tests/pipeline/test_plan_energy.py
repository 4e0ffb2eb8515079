"""The energy of an inference through a pipeline plan (docs/pipeline.md, "Energy"): the
worked example by hand, weights streamed against held, a cut through the shared memory,
the log's records, and nothing to compute where the profile gives no energy terms."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from mesh_search import line_of, mesh_with_energy
from test_dp import chain, machine

from autoplace.graph import Edge, Op, OpGraph
from autoplace.hardware.load import load_profile
from autoplace.models import load_graph
from autoplace.pipeline import MeshMachine, PipelinePlan, Stage, StageCosts, best_pipelines
from autoplace.pipeline.energy import plan_energy
from autoplace.pipeline.stream_measurer import StreamMeasurer

PJ = 1e-12

#: the worked example's mesh (docs/pipeline.md, "Energy"): 1 x 3 PEs of an ARM core
#: (0.5 W busy, 0.1 W idle) and an NPU (2 pJ/FLOP, 0.05 W idle) on a local memory of
#: 1/2 pJ per byte read/written; links 5 pJ/byte, uplinks 20 pJ/byte to a DRAM of 100/120
WORKED = """
name = "worked-mesh"
host = "ctrl"
default_scope = "dram"
[units.ctrl]
target = { kind = "llvm" }
accepts = ["*"]
power_w = 5.0
[units.ctrl.gflops]
default = 1.0
[scopes.dram]
capacity_mib = 1024
bandwidth_gbps = 1.0
access = ["*"]
read_pj_per_byte = 100.0
write_pj_per_byte = 120.0
[mesh]
rows = 1
cols = 3
[mesh.units.arm]
target = { kind = "llvm" }
accepts = ["*"]
power_w = 0.5
idle_w = 0.1
[mesh.units.arm.gflops]
default = 1.0
[mesh.units.npu]
target = { kind = "llvm" }
accepts = ["conv2d"]
idle_w = 0.05
pj_per_flop = { default = 2.0 }
[mesh.units.npu.gflops]
default = 10.0
[mesh.scopes.mem]
capacity_mib = 1
bandwidth_gbps = 1000.0
access = ["*"]
read_pj_per_byte = 1.0
write_pj_per_byte = 2.0
[mesh.link]
bandwidth_gbps = 1.0
modes = ["async"]
pj_per_byte = 5.0
[mesh.uplink]
to = "dram"
bandwidth_gbps = 1.0
modes = ["async"]
pj_per_byte = 20.0
"""


def worked(tmp_path: Path) -> StageCosts:
    """X (elementwise, 1 MFLOP, reads 1,000 bytes of graph input) -> Y (conv2d, 2 MFLOP,
    4,000 bytes of weights, its 1,000-byte output the graph's), each output 1,000 bytes."""
    (tmp_path / "worked.toml").write_text(WORKED)
    x = Op(name="X", kind="elementwise", flops=1e6, bytes_read=1000, output_bytes=1000,
           external_bytes=1000)
    y = Op(name="Y", kind="conv2d", flops=2e6, bytes_read=5000, output_bytes=1000,
           external_bytes=4000, weight_bytes=4000)
    graph = OpGraph(name="xy", ops=(x, y), edges=(Edge(src=0, dst=1, nbytes=1000),))
    return StageCosts(graph, MeshMachine.of(load_profile(tmp_path / "worked.toml")))


def plan(streamed=None, spilled=None) -> PipelinePlan:
    """X on one PE, Y split over two."""
    return PipelinePlan(stages=(Stage(0, 1, 1), Stage(1, 2, 2, streamed=streamed)),
                        spilled=spilled)


def test_the_worked_example_by_hand(tmp_path):
    costs = worked(tmp_path)
    period = 1e-3  # stage 0: X's 1 MFLOP on the ARM core at 1 GFLOP/s
    units = (0.5 * 1e-3          # ARM busy: X, 1 PE x 1 ms
             + 2e6 * 2 * PJ      # NPU busy: Y's 2 MFLOP at 2 pJ (on 2 PEs of 0.1 ms each)
             + 0.1 * (1 * period - 1e-3) + 0.05 * (1 * period)           # stage 0 idle
             + 0.1 * (2 * period) + 0.05 * (2 * period - 2 * 0.1e-3))  # stage 1 idle
    kernels = (1000 * 1 + 1000 * 2       # X reads its input, writes its output
               + 5000 * 1 + 1000 * 2)    # Y reads X's output and its weights, writes
    copies = (1000 * (100 + 20 + 2)      # the graph input: DRAM read, uplink, local write
              + 1000 * (1 + 5 + 2)       # the cut X -> Y over the link
              + 1000 * (1 + 5 + 2)       # Y's rotation: (2 - 1) x its 1,000-byte input
              + 1000 * (1 + 20 + 120))   # the graph output: local read, uplink, DRAM write
    by_hand = units + (kernels + copies) * PJ
    assert by_hand == pytest.approx(844.289e-6, rel=1e-12)  # the docs' figure
    assert plan_energy(plan(), costs, period) == pytest.approx(by_hand, rel=1e-12)
    result = StreamMeasurer(costs).measure([plan()])[0]
    assert result.period_s == pytest.approx(period, rel=1e-9)
    assert result.energy_j == pytest.approx(by_hand, rel=1e-9)


def test_weights_streamed_cost_their_bytes_from_the_shared_memory_each_inference(tmp_path):
    costs = worked(tmp_path)
    held, streamed = (plan_energy(p, costs, 1e-3) for p in (plan(), plan(streamed=(1,))))
    assert streamed - held == pytest.approx(4000 * (100 + 20 + 2) * PJ, rel=1e-9)
    assert streamed - held == pytest.approx(0.488e-6, rel=1e-9)  # the docs' figure


def test_a_cut_through_the_shared_memory_costs_its_write_and_read_there(tmp_path):
    costs = worked(tmp_path)
    over_link, spilled = (plan_energy(p, costs, 1e-3) for p in (plan(), plan(spilled=(1,))))
    assert spilled - over_link == pytest.approx(
        1000 * ((1 + 20 + 120) + (100 + 20 + 2) - (1 + 5 + 2)) * PJ, rel=1e-9)


def test_resnet50s_weights_that_must_stream_cost_more_than_held(tmp_path):
    """On the bundled 4 x 4 mesh resnet50's weights do not fit held (the DP streams them):
    held instead, at the same period, the plan costs their bytes x (DRAM read, uplink,
    SRAM write) less per inference."""
    graph = load_graph("resnet50")
    costs = StageCosts(graph, MeshMachine.of(load_profile(mesh_with_energy(tmp_path))))
    streaming = best_pipelines(costs)[0]
    ops = [o for s in streaming.stages for o in (s.streamed or ())]
    assert len(ops) == sum(op.weight_bytes > 0 for op in graph.ops) == 54  # (every one)
    held = dataclasses.replace(streaming, stages=tuple(
        dataclasses.replace(s, streamed=None) for s in streaming.stages))
    period = 0.02
    more = plan_energy(streaming, costs, period) - plan_energy(held, costs, period)
    assert more == pytest.approx(costs.weights[ops].sum() * (100 + 20 + 2) * PJ, rel=1e-9)
    assert more > 0
    measured = StreamMeasurer(costs).measure([streaming, held])
    assert measured[0].energy_j > 0 and measured[1].energy_j is None  # held: no fit


def test_the_logs_record_carries_the_plans_energy(tmp_path):
    costs = worked(tmp_path)
    line = line_of(costs, plan())
    assert line["result"]["energy_j"] == pytest.approx(844.289e-6, rel=1e-9)


def test_a_mesh_without_energy_terms_costs_nothing():
    costs = StageCosts(chain([1, 2]), machine())
    one = PipelinePlan(stages=(Stage(0, 2, 1),))
    assert plan_energy(one, costs, 3e-3) == 0.0
    assert StreamMeasurer(costs).measure([one])[0].energy_j == 0.0
