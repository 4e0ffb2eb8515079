"""Weights and graph inputs in the memory model: the worked example of docs/simulator.md.

Chain X -> Y -> Z on the tiny profile; Y (on acc, in sram) has 1,000,000 bytes of weights.
Resident, they are read from sram at 10 GB/s and occupy it for the whole run; streamed, they
are read from dram at 1 GB/s each run and occupy dram.
"""

from __future__ import annotations

import dataclasses

import pytest
from factories import chain_graph, tiny_profile

from autoplace.graph import OpGraph
from autoplace.hardware.load import load_profile
from autoplace.measure.base import ErrorKind
from autoplace.measure.simulator import Simulator
from autoplace.space import PlacementError, SearchSpace

W = 1_000_000


def weighty_chain() -> OpGraph:
    g = chain_graph()
    y = g.ops[1]
    y = dataclasses.replace(y, bytes_read=y.bytes_read + W, external_bytes=W, weight_bytes=W)
    return dataclasses.replace(g, ops=(g.ops[0], y, g.ops[2]))


def simulate(graph, profile, weights: str | None):
    space = SearchSpace(graph, profile)
    y = {"unit": "acc", "scope": "sram", **({"weights": weights} if weights else {})}
    spec = {"X": "cpu", "Y": y, "Z": "cpu"}
    placement = space.from_user(spec)
    sim = Simulator(space)
    return placement, sim.simulate(placement), sim.measure([placement])[0]


def test_resident_weights_are_read_fast_and_held_in_the_op_scope():
    p, r, batched = simulate(weighty_chain(), tiny_profile(), "resident")
    assert p.weights == {"Y": "resident"}
    # Y: 1 us + max(2e6 / 1e10, (1000 + 1000 + 1e6) / 1e10) = 201 us, as without weights
    assert r.latency_s == pytest.approx(1e-3 + 2e-6 + 201e-6 + 2e-6 + 1e-3)
    # sram: the weights all run long, plus X's copy and Y's output; dram: X's graph input and
    # Z's output (the result) all run long, plus X's output, then Y's copy (never both)
    assert r.peak_bytes == {"sram": W + 2000, "dram": 1000 + 1000 + 1000}
    assert batched == r


def test_streamed_weights_are_read_from_dram_each_run():
    p, r, batched = simulate(weighty_chain(), tiny_profile(), "streamed")
    assert p.weights == {}
    # Y: 1 us + max(200 us, 2000 / 1e10 + 1e6 / 1e9) = 1001.2 us
    assert r.latency_s == pytest.approx(1e-3 + 2e-6 + 1001.2e-6 + 2e-6 + 1e-3)
    assert r.peak_bytes == {"sram": 2000, "dram": W + 1000 + 1000 + 1000}
    assert batched == r


def test_feasible_without_weights_infeasible_with_them():
    small = tiny_profile(sram_mib=0.5)  # 524,288 bytes of sram
    _, plain, _ = simulate(chain_graph(), small, None)
    assert plain.ok
    _, r, batched = simulate(weighty_chain(), small, "resident")
    assert r.error is ErrorKind.OUT_OF_MEMORY and batched == r
    assert r.detail == ("scope 'sram' peak 0.96 MiB exceeds capacity 0.50 MiB by 477712 "
                        "bytes (weights 1000000 B, graph inputs and outputs 0 B, "
                        "activations 2000 B)")
    _, streamed, _ = simulate(weighty_chain(), small, "streamed")
    assert streamed.ok  # the same placement with its weights streamed fits


def test_a_unit_says_where_its_weights_may_live():
    prof = tiny_profile()
    cpu, acc = prof.units
    analog = dataclasses.replace(prof, units=(cpu, dataclasses.replace(
        acc, weights=frozenset({"resident"}))))
    space = SearchSpace(weighty_chain(), analog)
    assert [c for c in space.op_choices[1] if c[0] == "acc"] == [
        ("acc", "dram", "resident"), ("acc", "sram", "resident")]
    assert space.from_user({"Y": {"unit": "acc", "scope": "sram"}}).weights == {"Y": "resident"}
    with pytest.raises(PlacementError, match="cannot keep its weights streamed"):
        space.from_user({"Y": {"unit": "acc", "scope": "sram", "weights": "streamed"}})
    with pytest.raises(PlacementError, match="has no weights"):
        space.from_user({"X": {"unit": "cpu", "weights": "resident"}})
    both = SearchSpace(weighty_chain(), prof)
    assert [c for c in both.op_choices[1] if c[0] == "acc"] == [
        ("acc", "dram", "streamed"), ("acc", "sram", "streamed"), ("acc", "sram", "resident")]


def test_weights_in_a_profile_file(tmp_path):
    src = load_profile("soc").source
    body = open(src).read().replace('accepts = ["conv2d", "matmul", "pool", "elementwise", '
                                    '"injective"]', 'accepts = ["conv2d", "matmul", "pool", '
                                    '"elementwise", "injective"]\nweights = ["resident"]', 1)
    path = tmp_path / "analog.toml"
    path.write_text(body)
    prof = load_profile(path)
    assert prof.unit("accelerator1").weights == {"resident"}
    assert prof.unit("accelerator2").weights == {"resident", "streamed"}
    assert prof.hash != load_profile("soc").hash


def test_graph_outputs_are_held_in_the_default_scope():
    """Z, the graph output: written in dram it is the result buffer held all run (counted
    once); computed in sram it also lives there until the end, beside the result buffer."""
    space = SearchSpace(chain_graph(), tiny_profile())
    sim = Simulator(space)
    in_dram = space.from_user({"X": "cpu", "Y": "cpu", "Z": "cpu"})
    in_sram = space.from_user({"X": "cpu", "Y": "cpu", "Z": {"unit": "acc", "scope": "sram"}})
    assert sim.held(in_dram) == sim.held(in_sram) == {"dram": 1000 + 1000}  # X's input, Z's
    a, b = sim.simulate(in_dram), sim.simulate(in_sram)
    assert a.peak_bytes == {"dram": 2000 + 2000}  # X's and Y's outputs while Y runs
    # sram: Y's copy in and Z's output (the activation until the makespan)
    assert b.peak_bytes["sram"] == 1000 + 1000
    assert sim.measure([in_dram, in_sram]) == [a, b]
