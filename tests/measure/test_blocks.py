"""The block model (docs/simulator.md): the compiled kernel against the op-by-op reference,
and hand-computed schedules."""

from __future__ import annotations

import numpy as np
import pytest
from factories import contiguous_genomes

from autoplace.frontend.tarnawski import convert, load_instance
from autoplace.graph import Edge, Op, OpGraph
from autoplace.hardware.profile import CopyPath, Profile, Scope, Unit
from autoplace.measure.batch import simulate_batch
from autoplace.measure.simulator import Simulator
from autoplace.space import SearchSpace


def modelled_profile() -> Profile:
    """Two block units with two scopes each and a parallel host: transfers take their
    routes' modelled time (no measured costs), so the routes matter."""
    any_kind = frozenset({"*"})
    units = (Unit(name="cpu", target={"kind": "llvm"}, accepts=any_kind,
                  gflops={"default": 2.0}, execution="parallel"),
             *(Unit(name=f"acc{i}", target={"kind": "llvm"}, accepts=any_kind,
                    gflops={"default": 20.0 + 10 * i}, execution="block",
                    launch_overhead_s=1e-6) for i in range(2)))
    scopes = (Scope(name="dram", capacity_bytes=1 << 30, bandwidth_bps=1e10,
                    access=frozenset({"cpu", "acc0", "acc1"})),
              *(Scope(name=f"sram{i}", capacity_bytes=1 << 24, bandwidth_bps=5e10,
                      access=frozenset({f"acc{i}"})) for i in range(2)))
    copies = tuple(CopyPath(src=a, dst=b, bandwidth_bps=4e9, latency_s=2e-6,
                            modes=("sync", "async"), engine=f"dma{i}")
                   for i in range(2) for a, b in (("dram", f"sram{i}"), (f"sram{i}", "dram")))
    return Profile(name="blocks", host="cpu", default_scope="dram", units=units, scopes=scopes,
                   copies=copies)


def _agree(space: SearchSpace, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    choice, mode = contiguous_genomes(space, n, rng)
    choice = np.concatenate([choice, space.random_genomes(n // 4, rng)[0]])
    mode = np.concatenate([mode, space.random_genomes(n // 4, rng)[1]])
    out = simulate_batch(space, choice, mode, finish=True)
    sim = Simulator(space)
    assert 0 < out.not_contiguous.sum() < len(choice) // 2  # both kinds were exercised
    for b, placement in enumerate(space.decode_rows(choice, mode)):
        ref = sim.simulate(placement, timeline=True)
        if out.not_contiguous[b]:
            assert ref.error is not None and "contiguous" in ref.detail + "wait"
            assert np.isinf(out.latency[b])
            continue
        assert out.latency[b] == pytest.approx(ref.latency_s, rel=1e-12, abs=1e-15)
        busy = {space.units[u]: v for u, v in enumerate(out.busy[b]) if v}
        assert busy == pytest.approx(ref.unit_busy_s, rel=1e-12)
        if ref.period_s is not None:  # the slowest block, or the slowest parallel op
            assert out.period[b] == pytest.approx(ref.period_s, rel=1e-12)
        assert dict(zip(("sync", "async"), out.copy_bytes[b])) == ref.copy_bytes
        peaks = {space.scopes[s]: int(v) for s, v in enumerate(out.peak[b]) if v}
        assert peaks == ref.peak_bytes
        ends = {e.name: e.end for e in ref.timeline if e.kind == "op"}
        last = max(ends.values())
        assert out.finish[b].max() == pytest.approx(last, rel=1e-12)


@pytest.mark.parametrize("instance", ["layers-gnmt", "ops-bert_l-3"])
def test_kernel_agrees_with_the_reference_on_random_placements_of_instances(instance):
    _agree(SearchSpace(*load_instance(instance)), 40, 3)


@pytest.mark.parametrize("model", ["squeezenet", "inception_v1"])
def test_kernel_agrees_with_the_reference_with_modelled_transfers(model):
    from autoplace.models import load_graph

    _agree(SearchSpace(load_graph(model), modelled_profile()), 40, 4)


def test_blocks_that_wait_for_each_other_are_invalid():
    """a -> b and c -> d with {a, d} on one accelerator and {b, c} on another: each set is
    contiguous, yet each block waits for the other (their evaluator fails it the same
    way). Split differently, {a, b} and {c, d}, they run side by side."""
    nodes = [{"id": i, "cpuLatency": 9.0, "fpgaLatency": f, "supportedOnFpga": 1}
             for i, f in enumerate([1.0, 2.0, 4.0, 8.0])]  # a, c, b, d
    edges = [{"sourceId": 0, "destId": 2, "cost": 0.5}, {"sourceId": 1, "destId": 3,
                                                         "cost": 0.25}]
    graph, profile = convert({"maxSizePerFPGA": 1.0, "maxFPGAs": 2, "maxCPUs": 1,
                              "nodes": nodes, "edges": edges}, name="x", source="x.json")
    space = SearchSpace(graph, profile)
    on = {"n0": 0, "n3": 0, "n1": 1, "n2": 1}
    placement = space.from_user({f"n{i}": {"unit": f"fpga{on[f'n{i}']}",
                                           "scope": f"mem{on[f'n{i}']}"} for i in range(4)})
    ref = Simulator(space).simulate(placement)
    assert ref.error is not None and "wait for each other" in ref.detail
    choice, mode = space.encode([placement])
    assert simulate_batch(space, choice, mode).not_contiguous[0]
    on = {"n0": 0, "n2": 0, "n1": 1, "n3": 1}
    apart = space.from_user({f"n{i}": {"unit": f"fpga{on[f'n{i}']}",
                                       "scope": f"mem{on[f'n{i}']}"} for i in range(4)})
    ok = Simulator(space).simulate(apart)
    assert ok.latency_s == pytest.approx(max(1.0 + 4.0, 2.0 + 8.0) * 1e-3, rel=1e-12)


def test_a_block_unit_whose_ops_are_not_contiguous_is_invalid():
    """x and z on the accelerator, y between them on the CPU: x's block would have to wait
    for y, which waits for x."""
    nodes = [{"id": i, "cpuLatency": 1.0, "fpgaLatency": 1.0, "supportedOnFpga": 1}
             for i in range(3)]
    edges = [{"sourceId": 0, "destId": 1, "cost": 0.5}, {"sourceId": 1, "destId": 2,
                                                         "cost": 0.5}]
    graph, profile = convert({"maxSizePerFPGA": 1.0, "maxFPGAs": 1, "maxCPUs": 1,
                              "nodes": nodes, "edges": edges}, name="x", source="x.json")
    space = SearchSpace(graph, profile)
    where = {"unit": "fpga0", "scope": "mem0"}
    placement = space.from_user({"n0": where, "n2": where})
    result = Simulator(space).simulate(placement)
    assert result.detail == ("block unit 'fpga0': its ops are not one contiguous block "
                             "('n0' reaches 'n2' through other units)")
    choice, mode = space.encode([placement])
    out = simulate_batch(space, choice, mode)
    assert out.not_contiguous[0] and np.isinf(out.latency[0])


def test_a_block_waits_for_all_its_inputs_and_reads_each_producer_once():
    """x (CPU, 1 ms) and y (CPU, 3 ms) feed a block {p, q} on an accelerator; x feeds both
    p and q (read once, its dearest edge), y feeds q. The block starts when y is done."""
    ops = (Op(name="x", kind="other", latency_us={"cpu": 1000.0}),
           Op(name="y", kind="other", latency_us={"cpu": 3000.0}),
           Op(name="p", kind="other", latency_us={"fpga": 100.0}),
           Op(name="q", kind="other", latency_us={"fpga": 200.0}))
    edges = (Edge(src=0, dst=2, nbytes=0, transfer_us=50.0),
             Edge(src=0, dst=3, nbytes=0, transfer_us=70.0),
             Edge(src=1, dst=3, nbytes=0, transfer_us=10.0),
             Edge(src=2, dst=3, nbytes=0, transfer_us=999.0))  # inside the block: free
    graph = OpGraph(name="fan", ops=ops, edges=edges)
    _, profile = convert({"maxSizePerFPGA": 1.0, "maxFPGAs": 1, "maxCPUs": 1, "nodes": [],
                          "edges": []}, name="p", source="p.json")
    space = SearchSpace(graph, profile)
    placement = space.from_user({"p": {"unit": "fpga0", "scope": "mem0"},
                                 "q": {"unit": "fpga0", "scope": "mem0"}})
    ref = Simulator(space).simulate(placement)
    assert ref.latency_s == pytest.approx((3000 + 70 + 10 + 100 + 200) * 1e-6, rel=1e-12)
    assert ref.unit_busy_s["fpga0"] == pytest.approx((70 + 10 + 100 + 200) * 1e-6)
    assert ref.unit_busy_s["cpu"] == pytest.approx(4000e-6)  # parallel: x and y overlap
