"""Baselines: HEFT on hand-checked graphs, greedy, single units."""

from __future__ import annotations

import pytest
from factories import chain_graph, fork_graph, tiny_profile
from search_factories import conv_chain, sram_only_profile, two_unit_profile

from autoplace.baselines.heft import heft, mean_copy, upward_ranks
from autoplace.baselines.named import baselines, greedy, single_units
from autoplace.graph import Op, OpGraph
from autoplace.measure.simulator import Simulator
from autoplace.space import SearchSpace


def latency(space: SearchSpace, placement) -> float:
    return Simulator(space).simulate(placement).latency_s


def test_heft_splits_a_fork_over_two_units():
    # S 1, L 4, R 4, J 1 MFLOP (tiny bytes): cpu takes 0.4/1.6/1.6/0.4 ms, acc 0.25/1/1/0.25.
    space = SearchSpace(fork_graph(), two_unit_profile())
    ranks = upward_ranks(space)
    # mean op times, no copies (one scope): J 0.325, L = R = 1.3 + 0.325, S = 0.325 + 1.625
    assert ranks == pytest.approx([1.95e-3, 1.625e-3, 1.625e-3, 0.325e-3])
    # order S, L, R, J: S acc [0, .25]; L acc [.25, 1.25]; R: cpu ends 1.85 < acc 2.25;
    # J: both inputs at 1.85, acc (0.25 ms) is free: ends 2.10.
    p = heft(space)
    assert p.ops == {"S": ("acc", "dram"), "L": ("acc", "dram"), "R": ("cpu", "dram"),
                     "J": ("acc", "dram")}
    assert p.copies == {}
    assert latency(space, p) == pytest.approx(2.10e-3)
    assert latency(space, greedy(space)) == pytest.approx(2.50e-3)  # all on acc, in series


def test_heft_plans_copies_and_takes_async_on_a_tie():
    # The worked example of docs/simulator.md: X, Z run only on cpu (conv2d), Y is 10x
    # faster on acc, in sram. X 0..1 ms; the copy in (2 us) is as early by the host or by
    # dma0, so HEFT takes async; Y 1.002..1.203; copy out 2 us; Z 1.205..2.205 ms.
    space = SearchSpace(conv_chain(), sram_only_profile())
    p = heft(space)
    assert p.ops == {"X": ("cpu", "dram"), "Y": ("acc", "sram"), "Z": ("cpu", "dram")}
    assert p.copies == {"X->Y": "async", "Y->Z": "async"}
    assert latency(space, p) == pytest.approx(2.205e-3)


def test_mean_copy_averages_over_choice_pairs():
    # choices of each end: cpu@dram, acc@dram, acc@sram -> 4 of 9 pairs cross (2 us each)
    space = SearchSpace(chain_graph(), tiny_profile())
    assert mean_copy(space, 0) == pytest.approx(4 * 2e-6 / 9)


def test_heft_keeps_small_scopes_within_capacity():
    # sram holds 1500 bytes: Y's staged input and its output (1000 each) do not fit, so Y
    # stays on cpu (2 ms) although acc would finish earlier; the result is feasible.
    space = SearchSpace(conv_chain(), sram_only_profile(sram_mib=1500 / (1 << 20)))
    p = heft(space)
    assert p.ops["Y"] == ("cpu", "dram")
    result = Simulator(space).simulate(p)
    assert result.ok and result.latency_s == pytest.approx(4e-3)


def test_heft_places_every_bundled_model_feasibly():
    from autoplace.hardware.load import load_profile
    from autoplace.models import load_graph

    for model in ("squeezenet", "seed_te"):
        for hw in ("soc", "biglittle", "mesh"):
            space = SearchSpace(load_graph(model), load_profile(hw))
            p = heft(space)
            assert space.check(p) is None
            result = Simulator(space).simulate(p)
            assert result.ok, (model, hw, result.detail)


def test_greedy_and_single_units():
    space = SearchSpace(chain_graph(), tiny_profile())
    assert set(greedy(space).ops.values()) == {("acc", "dram")}
    conv = OpGraph(name="g", ops=(Op(name="c", kind="conv2d", flops=1e6, bytes_read=1,
                                     output_bytes=1),), edges=())
    conv_space = SearchSpace(conv, tiny_profile())
    assert [n for n, _ in single_units(conv_space)] == ["single:cpu"]  # acc rejects conv2d
    assert [n for n, _ in baselines(space)] == ["single:cpu", "single:acc", "greedy"]


def test_mirror_units_share_one_single_unit_baseline():
    from autoplace.hardware.load import load_profile
    from autoplace.models import load_graph

    prof = load_profile("mesh")  # ctrl + 16 identical PEs (arm takes every op)
    space = SearchSpace(load_graph("squeezenet"), prof)
    assert [n for n, _ in single_units(space)] == ["single:ctrl", "single:pe0.arm"]
    sim = Simulator(space)
    mirrors = [space.uniform(f"pe{k}.arm") for k in (0, 5, 15)]
    assert len({r.latency_s for r in sim.measure(mirrors)}) == 1  # what merging relies on


def test_a_unit_differing_in_one_field_keeps_its_baseline():
    import dataclasses

    prof = tiny_profile()
    cpu, acc = prof.units
    twin = dataclasses.replace(cpu, name="cpu2")
    hotter = dataclasses.replace(cpu, name="cpu3", power_w=cpu.power_w + 1)
    scopes = tuple(dataclasses.replace(s, access=s.access | {"cpu2", "cpu3"})
                   if s.name == "dram" else s for s in prof.scopes)
    prof = dataclasses.replace(prof, units=(cpu, acc, twin, hotter), scopes=scopes)
    names = [n for n, _ in single_units(SearchSpace(chain_graph(), prof))]
    # cpu2 is cpu's twin but cpu is the host (it performs sync copies): a class of its own
    assert names == ["single:cpu", "single:acc", "single:cpu2", "single:cpu3"]
    same = dataclasses.replace(prof, units=(cpu, acc, twin, dataclasses.replace(twin, name="cpu3")))
    assert [n for n, _ in single_units(SearchSpace(chain_graph(), same))] == \
        ["single:cpu", "single:acc", "single:cpu2"]


def _instance(sizes: dict[int, float], edges: list[tuple[int, int]], colors=None,
              unsupported=()):
    from autoplace.frontend.tarnawski import convert

    nodes = [{"id": i, "cpuLatency": 1.0, "fpgaLatency": 0.5, "size": s,
              "supportedOnFpga": i not in unsupported, **({"colorClass": colors[i]}
                                                          if colors and i in colors else {})}
             for i, s in sizes.items()]
    data = {"maxSizePerFPGA": 100.0, "maxFPGAs": 2, "maxCPUs": 1, "nodes": nodes,
            "edges": [{"sourceId": a, "destId": b, "cost": 0.1} for a, b in edges]}
    return SearchSpace(*convert(data, name="fill", source="fill.json"))


def test_fill_packs_ops_in_program_order_onto_interchangeable_units():
    """Capacity 100 per accelerator: 60 fills fpga0, 50 opens fpga1, 30 joins it, 200 fits
    nowhere and 10 may not run on an accelerator: both on the CPU."""
    from autoplace.baselines.named import fill

    space = _instance({0: 60, 1: 50, 2: 30, 3: 200, 4: 10}, [(0, 1), (1, 2), (2, 3), (3, 4)],
                      unsupported=(4,))
    units = {op: u for op, (u, _) in fill(space).ops.items()}
    assert units == {"n0": "fpga0", "n1": "fpga1", "n2": "fpga1", "n3": "cpu", "n4": "cpu"}
    assert ("fill", fill(space)) in baselines(space)


def test_fill_places_a_group_where_its_last_member_runs():
    """Node 5 (45 bytes) shares a group with node 1 (50), its reader: the pair (95) comes
    after node 0 (60) and so opens fpga1; node 2 (30) then fits on no accelerator left."""
    from autoplace.baselines.named import fill

    space = _instance({0: 60, 1: 50, 2: 30, 5: 45}, [(0, 1), (5, 1), (1, 2)],
                      colors={1: 9, 5: 9})
    units = {op: u for op, (u, _) in fill(space).ops.items()}
    assert units == {"n0": "fpga0", "n5": "fpga1", "n1": "fpga1", "n2": "cpu"}
    assert fill(SearchSpace(chain_graph(), tiny_profile())) is None  # no interchangeable units
