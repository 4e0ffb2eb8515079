"""The energy of one inference (docs/simulator.md, "Energy"): the worked example by hand,
weights streamed against resident, both simulators alike, bad energy keys in one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from factories import chain_graph

from autoplace.hardware.load import load_profile
from autoplace.hardware.profile import ProfileError
from autoplace.hardware.write import to_toml
from autoplace.measure.batch import simulate_batch
from autoplace.measure.simulator import Simulator
from autoplace.models import load_graph
from autoplace.space import Placement, SearchSpace

PJ = 1e-12

#: the worked example's profile (docs/simulator.md, "Energy")
WORKED = """
name = "worked"
host = "cpu"
default_scope = "dram"
[units.cpu]
target = { kind = "llvm" }
accepts = ["*"]
power_w = 1.0
idle_w = 0.1
[units.cpu.gflops]
default = 1.0
[units.acc]
target = { kind = "llvm" }
accepts = ["elementwise"]
idle_w = 0.05
pj_per_flop = { default = 2.0 }
[units.acc.gflops]
default = 10.0
[scopes.dram]
capacity_mib = 1024
bandwidth_gbps = 1.0
access = ["cpu", "acc"]
read_pj_per_byte = 100.0
write_pj_per_byte = 120.0
[scopes.sram]
capacity_mib = 1
bandwidth_gbps = 10.0
access = ["acc"]
read_pj_per_byte = 10.0
write_pj_per_byte = 12.0
[[copies]]
src = "dram"
dst = "sram"
bandwidth_gbps = 1.0
latency_us = 1.0
bidirectional = true
pj_per_byte = 5.0
"""


def profile_of(tmp_path: Path, text: str, name: str = "p.toml"):
    (tmp_path / name).write_text(text)
    return load_profile(tmp_path / name)


def test_the_worked_example_by_hand(tmp_path):
    """X (cpu, dram) -> Y (acc, sram) -> Z (cpu, dram), 1,000 bytes per tensor (X reads
    1,000 bytes of graph input); the busy and idle terms from the simulator's times."""
    space = SearchSpace(chain_graph(), profile_of(tmp_path, WORKED))
    placement = Placement(ops={"X": ("cpu", "dram"), "Y": ("acc", "sram"),
                               "Z": ("cpu", "dram")}, copies={"X->Y": "sync", "Y->Z": "sync"})
    result = Simulator(space).simulate(placement)
    lat, busy = result.latency_s, result.unit_busy_s
    cpu = 1.0 * busy["cpu"] + 0.1 * (lat - busy["cpu"])  # power x busy, idle x the rest
    acc = 2.0 * PJ * 2e6 + 0.05 * (lat - busy["acc"])  # Y's 2 MFLOP at 2 pJ each
    memory = 1000 * PJ * (100 + 120      # X reads the input from dram, writes dram
                          + 10 + 12      # Y reads X's output from sram, writes sram
                          + 100 + 120)   # Z reads Y's output from dram, writes dram
    copies = 1000 * PJ * ((100 + 5 + 12)    # X -> Y: read dram, the path, write sram
                          + (10 + 5 + 120))  # Y -> Z: read sram, the path, write dram
    assert result.energy_j == pytest.approx(cpu + acc + memory + copies, rel=1e-12)
    choice, mode = space.encode([placement])
    assert simulate_batch(space, choice, mode).energy[0] == pytest.approx(result.energy_j,
                                                                          rel=1e-12)


def soc_with_energy(tmp_path: Path, power: bool):
    """soc with DRAM at 100/120 pJ per byte read/written, the SRAMs at 10/12, 5 pJ per byte
    on every copy path; its units' active and idle power, or none (``power``)."""
    text = Path(load_profile("soc").source).read_text()
    text = text.replace("access = [", "read_pj_per_byte = 10.0\nwrite_pj_per_byte = 12.0\n"
                        "access = [")
    text = text.replace("capacity_mib = 2048\n", "capacity_mib = 2048\nread_pj_per_byte = "
                        "100.0\nwrite_pj_per_byte = 120.0\n")
    text = text.replace("read_pj_per_byte = 10.0\nwrite_pj_per_byte = 12.0\naccess = "
                        '["cpu1", "cpu2", "accelerator1", "accelerator2"]',
                        'access = ["cpu1", "cpu2", "accelerator1", "accelerator2"]')
    text = text.replace("[[copies]]", "[[copies]]\npj_per_byte = 5.0")
    text = text.replace("power_w = ", "idle_w = 0.1\npower_w = ") if power else \
        "\n".join(x for x in text.splitlines() if not x.startswith("power_w"))
    return profile_of(tmp_path, text, f"soc_energy_{power}.toml")


def test_streamed_weights_cost_the_default_scopes_reads_resident_ones_their_scopes(tmp_path):
    """The same placement with one op's weights streamed from DRAM instead of resident in
    its SRAM: the difference is their bytes x (DRAM's read energy - the SRAM's), without
    power (the op's time changes too, and with it the busy and idle terms)."""
    profile = soc_with_energy(tmp_path, power=False)
    space = SearchSpace(load_graph("squeezenet"), profile)
    assert profile.scope("dram").read_j_per_byte == 100 * PJ
    op = next(o for o in space.graph.ops if o.weight_bytes and o.kind == "conv2d")
    ops = {o.name: ("cpu1", "dram") for o in space.graph.ops}
    ops[op.name] = ("accelerator1", "sram1")
    k = space.graph.ops.index(op)
    copies = {f"{space.graph.ops[e.src].name}->{space.graph.ops[e.dst].name}": "async"
              for e in space.graph.edges if k in (e.src, e.dst)}
    sim = Simulator(space)
    resident, streamed = (sim.simulate(Placement(ops=ops, copies=copies,
                                                  weights={op.name: w}))
                          for w in ("resident", "streamed"))
    assert resident.ok and streamed.ok
    assert streamed.energy_j - resident.energy_j == pytest.approx(
        op.weight_bytes * (100 - 10) * PJ, rel=1e-9)


def test_both_simulators_give_each_placement_the_same_energy(tmp_path):
    space = SearchSpace(load_graph("squeezenet"), soc_with_energy(tmp_path, power=True))
    choice, mode = space.random_genomes(40, np.random.default_rng(0))
    batch = simulate_batch(space, choice, mode).energy
    one = [Simulator(space).simulate(p).energy_j
           for p in space.decode_rows(choice, mode)]
    assert batch == pytest.approx(one, rel=1e-9)
    assert len(set(np.round(batch, 15))) > 30  # placements differ in energy


def test_energy_keys_write_and_read_back(tmp_path):
    profile = profile_of(tmp_path, WORKED)
    (tmp_path / "back.toml").write_text(to_toml(profile))
    back = load_profile(tmp_path / "back.toml")
    assert back.to_dict() == profile.to_dict() and back.hash == profile.hash
    assert back.unit("acc").j_per_flop == {"default": 2 * PJ}
    other = profile_of(tmp_path, WORKED.replace("pj_per_byte = 5.0", "pj_per_byte = 6.0"),
                       "other.toml")
    assert other.hash != profile.hash  # energy is part of what a log's profile hash covers
    assert load_profile("soc").hash == "5f620e73311da99f"  # a profile without: as before


@pytest.mark.parametrize("old, new, says", [
    ("idle_w = 0.1", "idle_w = -1", "units.cpu.idle_w"),
    ("idle_w = 0.1", "idle_w = nan", "units.cpu.idle_w"),
    ("pj_per_flop = { default = 2.0 }", "pj_per_flop = { default = 2.0, nokind = 1.0 }",
     "units.acc.pj_per_flop.nokind"),
    ("pj_per_flop = { default = 2.0 }", "pj_per_flop = { default = 2.0 }\npower_w = 3.0",
     "units.acc.pj_per_flop"),
    ("read_pj_per_byte = 100.0", "read_pj_per_byte = inf", "scopes.dram.read_pj_per_byte"),
    ("write_pj_per_byte = 12.0", 'write_pj_per_byte = "a lot"',
     "scopes.sram.write_pj_per_byte"),
    ("pj_per_byte = 5.0", "pj_per_byte = -5.0", "pj_per_byte"),
])
def test_bad_energy_keys_are_one_line_naming_the_key(tmp_path, old, new, says):
    with pytest.raises(ProfileError) as err:
        profile_of(tmp_path, WORKED.replace(old, new, 1))
    assert says in str(err.value) and "\n" not in str(err.value)


def test_units_that_differ_only_in_energy_are_not_one_class(tmp_path):
    """Twin units are interchangeable in the search (one is tried for both) only where
    every cost is the same: energy too."""
    from autoplace.space.classes import unit_classes

    acc = WORKED[WORKED.index("[units.acc]"):WORKED.index("[scopes.dram]")]
    twin = WORKED.replace("[scopes.dram]", acc.replace("units.acc", "units.acc2")
                          + "[scopes.dram]").replace('access = ["cpu", "acc"]',
                                                     'access = ["cpu", "acc", "acc2"]')
    same = unit_classes(profile_of(tmp_path, twin, "same.toml"))
    assert same[1] == same[2]
    other = twin.replace("idle_w = 0.05\npj_per_flop = { default = 2.0 }\n[units.acc2.gflops]",
                         "idle_w = 0.07\npj_per_flop = { default = 2.0 }\n[units.acc2.gflops]")
    assert len(set(unit_classes(profile_of(tmp_path, other, "other.toml")).tolist())) == 3
