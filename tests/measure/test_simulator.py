"""Simulator results recomputed by hand (the formulas are in docs/simulator.md)."""

from __future__ import annotations

import dataclasses

import pytest
from factories import chain_graph, fork_graph, tiny_profile

from autoplace.measure import ErrorKind
from autoplace.measure.simulator import Simulator
from autoplace.space import SearchSpace


def run(graph, profile, spec, **kw):
    space = SearchSpace(graph, profile)
    return Simulator(space, timeline=True).simulate(space.from_user(spec))


def test_chain_on_one_unit_adds_op_times():
    # X: max(1e6/1e9, 1000/1e9 + 1000/1e9) = 1 ms; Y: 2 ms; Z: 1 ms, back to back on cpu.
    r = run(chain_graph(), tiny_profile(), {"X": "cpu", "Y": "cpu", "Z": "cpu"})
    assert r.ok
    assert r.latency_s == pytest.approx(4e-3)
    assert r.unit_busy_s == pytest.approx({"cpu": 4e-3})  # idle units are left out
    assert r.energy_j == pytest.approx(4e-3 * 1.0)
    # X's output lives until Y ends (3 ms), Y's until Z ends: two at once while Y runs. Z's
    # output is the graph's result, held in dram (the default scope) all run, like X's input.
    assert r.peak_bytes == {"dram": 1000 + 1000 + 2000}
    assert r.copy_bytes == {"sync": 0, "async": 0}


def test_chain_through_accelerator_scope_copies_by_dma():
    spec = {"X": "cpu", "Y": {"unit": "acc", "scope": "sram"}, "Z": "cpu"}
    r = run(chain_graph(), tiny_profile(), spec)
    # X 0..1 ms; copy 1 us + 1000 B / 1 GB/s = 2 us; Y = 1 us overhead + 2e6/1e10 = 201 us;
    # copy back 2 us; Z 1 ms.
    assert r.latency_s == pytest.approx(1e-3 + 2e-6 + 201e-6 + 2e-6 + 1e-3)
    assert r.copy_bytes == {"sync": 0, "async": 2000}
    lanes = [(e.kind, e.name, e.resource) for e in r.timeline]
    assert lanes == [("op", "X", "cpu"), ("copy", "X->Y", "dma0"), ("op", "Y", "acc"),
                     ("copy", "Y->Z", "dma0"), ("op", "Z", "cpu")]
    assert r.peak_bytes == {"dram": 1000 + 2000, "sram": 2000}  # graph input + outputs
    assert r.energy_j == pytest.approx(2e-3 * 1.0 + 201e-6 * 2.0)


@pytest.mark.parametrize("mode, expected_ms", [("sync", 6.004), ("async", 6.000)])
def test_fork_join_sync_copies_hold_the_host(mode, expected_ms):
    # S on cpu 0..1 ms. L on acc in sram (401 us) needs S->L and L->J copies (2 us each).
    # async: R runs on cpu 1..5 ms while dma0 copies; J 5..6 ms.
    # sync: the cpu performs both copies, so R starts at 1.002 and J at 5.004 ms.
    spec = {"ops": {"S": "cpu", "L": {"unit": "acc", "scope": "sram"}, "R": "cpu", "J": "cpu"},
            "copies": {"S->L": mode, "L->J": mode}}
    r = run(fork_graph(), tiny_profile(), spec)
    assert r.latency_s == pytest.approx(expected_ms * 1e-3)
    assert r.copy_bytes[mode] == 2000
    host_busy = 6e-3 + (4e-6 if mode == "sync" else 0.0)
    assert r.unit_busy_s["cpu"] == pytest.approx(host_busy)
    copy_lanes = {e.resource for e in r.timeline if e.kind == "copy"}
    assert copy_lanes == ({"cpu"} if mode == "sync" else {"dma0"})


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_handover_delays_work_after_another_resource_only(mode):
    # handover: cpu 10 us, acc 20 us, the DMA engine none. X 0-1000 us on cpu. sync: X->Y
    # on cpu right after X (1000-1002), Y waits for cpu: 1022-1223; Y->Z on cpu waits for
    # acc: 1233-1235, Z right after it: 1235-2235. async: X->Y on dma0 1000-1002, Y 1022-1223,
    # Y->Z on dma0 1223-1225, Z waits for dma0: 1235-2235.
    profile = tiny_profile()
    units = tuple(dataclasses.replace(u, handover_s={"cpu": 10e-6, "acc": 20e-6}[u.name])
                  for u in profile.units)
    profile = dataclasses.replace(profile, units=units)
    spec = {"ops": {"X": "cpu", "Y": {"unit": "acc", "scope": "sram"}, "Z": "cpu"},
            "copies": {"X->Y": mode, "Y->Z": mode}}
    r = run(chain_graph(), profile, spec)
    starts = [(e.name, round(e.start * 1e6, 6)) for e in r.timeline]
    assert starts == [("X", 0), ("X->Y", 1000), ("Y", 1022),
                      ("Y->Z", 1233 if mode == "sync" else 1223), ("Z", 1235)]
    assert r.latency_s == pytest.approx(2235e-6)
    space = SearchSpace(chain_graph(), profile)
    assert Simulator(space).measure([space.from_user(spec)])[0].latency_s == \
        pytest.approx(2235e-6)


def test_no_handover_for_work_whose_inputs_came_while_its_unit_was_busy():
    # S on cpu 0-1 ms; L on acc waits for S: 1.02-1.421 ms; R on cpu 1-5 ms. J on cpu reads
    # L, which ended while cpu ran R: J starts when R ends, though cpu's hand-over (4 ms)
    # is longer than the gap; the hand-over is for a resource that waited
    profile = tiny_profile()
    units = tuple(dataclasses.replace(u, handover_s={"cpu": 4e-3, "acc": 20e-6}[u.name])
                  for u in profile.units)
    profile = dataclasses.replace(profile, units=units)
    spec = {"S": "cpu", "L": "acc", "R": "cpu", "J": "cpu"}
    r = run(fork_graph(), profile, spec)
    assert {e.name: round(e.start * 1e6, 6) for e in r.timeline} == \
        {"S": 0, "L": 1020, "R": 1000, "J": 5000}
    space = SearchSpace(fork_graph(), profile)
    assert Simulator(space).measure([space.from_user(spec)])[0].latency_s == \
        pytest.approx(6e-3)


def test_parallel_branches_overlap_on_two_units():
    # L on acc (dram: 1 us + max(400 us, 2000 B / 1 GB/s)) overlaps R on cpu (4 ms).
    spec = {"S": "cpu", "L": "acc", "R": "cpu", "J": "cpu"}
    r = run(fork_graph(), tiny_profile(), spec)
    assert r.latency_s == pytest.approx(1e-3 + 4e-3 + 1e-3)
    ops = {e.name: (e.start, e.end) for e in r.timeline}
    assert ops["L"] == pytest.approx((1e-3, 1e-3 + 401e-6))
    assert ops["R"] == pytest.approx((1e-3, 5e-3))


def test_capacity_overflow_is_infeasible_with_scope_and_overshoot():
    profile = tiny_profile(sram_mib=1500 / (1 << 20))  # 1500 bytes of sram
    spec = {"X": {"unit": "acc", "scope": "sram"}, "Y": {"unit": "acc", "scope": "sram"},
            "Z": "cpu"}
    r = run(chain_graph(), profile, spec)
    assert r.error is ErrorKind.OUT_OF_MEMORY
    assert "'sram'" in r.detail and "by 500 bytes" in r.detail
    assert r.peak_bytes["sram"] == 2000  # metrics are kept for infeasible placements


def test_graph_output_lives_until_the_end_and_frees_are_reused():
    # With all ops in sram (capacity 2000): X freed when Y ends, reused by Z's output.
    profile = tiny_profile(sram_mib=2000 / (1 << 20))
    spec = {k: {"unit": "acc", "scope": "sram"} for k in "XYZ"}
    r = run(chain_graph(), profile, spec)
    assert r.ok and r.peak_bytes["sram"] == 2000


def test_invalid_placement_is_a_value_not_an_exception():
    graph, profile = chain_graph(), tiny_profile()
    space = SearchSpace(graph, profile)
    good = space.from_user({"X": "cpu"})
    bad = type(good)(ops={**good.ops, "X": ("acc", "nowhere")}, copies={})
    r = Simulator(SearchSpace(graph, profile)).simulate(bad)
    assert r.error is ErrorKind.INVALID and "nowhere" in r.detail


def test_no_route_is_reported_as_no_copy_path():
    profile = tiny_profile(modes=("sync",))
    profile = type(profile)(**{**profile.__dict__, "copies": profile.copies[:1]})  # dram->sram
    graph = chain_graph()
    space = SearchSpace(graph, profile)
    p = space.decode([2, 2, 0], [0, 0])  # X, Y in sram; Z on cpu in dram: sram->dram has no path
    r = Simulator(space).simulate(p)
    assert r.error is ErrorKind.NO_COPY_PATH and "'sram' to 'dram'" in r.detail


@pytest.mark.parametrize("model,hw", [("squeezenet", "soc"), ("resnet50", "mesh"),
                                      ("inception_v1", "biglittle")])
def test_measure_encoded_equals_measure_on_random_placements(model, hw):
    import numpy as np

    from autoplace.hardware.load import load_profile
    from autoplace.models import load_graph

    space = SearchSpace(load_graph(model), load_profile(hw))
    choice, mode = space.random_genomes(64, np.random.default_rng(3))
    mode = space.normalize(choice, mode)
    placements = [space.decode(c, m) for c, m in zip(choice, mode)]
    sim = Simulator(space)
    got = sim.measure_encoded(choice, mode, placements)
    assert got == sim.measure(placements)
    assert {r.error for r in got} - {None}  # the sample has failures too
