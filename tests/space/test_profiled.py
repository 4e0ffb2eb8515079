"""Profiled graphs in the compiled space and the stream model: measured op times per unit or
unit class, units an op cannot run on, co-location groups, measured transfer costs, and
``parallel`` units."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from autoplace.graph import Edge, Op, OpGraph
from autoplace.hardware.load import load_profile
from autoplace.hardware.profile import ProfileError
from autoplace.measure.batch import simulate_batch
from autoplace.measure.simulator import Simulator
from autoplace.space import SearchSpace


def soc(**cpu2):
    """The soc profile, accelerators labelled class "npu", cpu2 changed as asked."""
    p = load_profile("soc")
    units = tuple(dataclasses.replace(u, class_name="npu") if u.name.startswith("acc") else
                  dataclasses.replace(u, **cpu2) if u.name == "cpu2" else u for u in p.units)
    return dataclasses.replace(p, units=units)


def chain(**first) -> OpGraph:
    ops = (Op(name="a", kind="conv2d", flops=2e8, bytes_read=4096, output_bytes=4096,
              external_bytes=4096, **first),
           Op(name="b", kind="elementwise", flops=1e5, bytes_read=4096, output_bytes=4096),
           Op(name="c", kind="elementwise", flops=1e5, bytes_read=4096, output_bytes=4096))
    return OpGraph(name="chain", ops=ops, edges=(Edge(src=0, dst=1, nbytes=4096),
                                                 Edge(src=1, dst=2, nbytes=4096)))


def test_measured_times_replace_the_roofline_by_unit_then_class():
    plain = SearchSpace(chain(), soc())
    space = SearchSpace(chain(latency_us={"npu": 30.0, "accelerator2": 20.0, "cpu2": None}),
                        soc())
    units = [space.units[u] for u in space.c_unit[0, :space.n_choices[0]]]
    dur = dict(zip(units, space.c_dur[0]))
    assert "cpu2" not in units  # measured None: it cannot run there
    assert dur["accelerator1"] == pytest.approx(30e-6)  # the class's time
    assert dur["accelerator2"] == pytest.approx(20e-6)  # its own time wins over the class's
    roofline = {space.units[u]: d for u, d in zip(plain.c_unit[0], plain.c_dur[0])}
    assert dur["cpu1"] == roofline["cpu1"]  # not measured: the roofline
    np.testing.assert_array_equal(space.c_dur[1:], plain.c_dur[1:])


def test_a_latency_naming_no_unit_or_class_is_an_error_naming_it():
    with pytest.raises(ProfileError, match=r"op 'a': latency_us names 'gpu'.*profile soc"):
        SearchSpace(chain(latency_us={"gpu": 5.0}), soc())


def test_identical_units_measured_differently_are_different_classes():
    """Twin accelerators (each with its own SRAM and DMA engine) are one class while the
    graph measures them alike (by class or not at all), two once it names one of them."""
    base = soc()
    acc1 = base.unit("accelerator1")
    twins = dataclasses.replace(base, units=tuple(
        dataclasses.replace(acc1, name="accelerator2") if u.name == "accelerator2" else u
        for u in base.units))
    pair = [twins.unit_index[n] for n in ("accelerator1", "accelerator2")]
    classes = [SearchSpace(chain(**kw), twins).unit_class[pair]
               for kw in ({}, {"latency_us": {"npu": 30.0}},
                          {"latency_us": {"accelerator2": 10.0}})]
    assert [c[0] == c[1] for c in classes] == [True, True, False]


def test_a_co_location_group_moves_with_its_leader():
    ops = chain().ops
    grouped = OpGraph(name="g", ops=tuple(dataclasses.replace(op, group="g") if op.name != "c"
                                          else op for op in ops), edges=chain().edges)
    space = SearchSpace(grouped, soc())
    assert space.colocated[0].tolist() == [1] and space.colocated[1].tolist() == [0]
    acc1 = space.profile.unit_index["accelerator1"]
    a_on_acc1 = space.choice_of(0, "accelerator1", "sram1")
    b_on_cpu = space.choice_of(1, "cpu1", "dram")
    choice = np.array([[a_on_acc1, b_on_cpu, 0]])
    mode = np.zeros((1, 2), dtype=np.int64)
    moved, _ = space.canonical(choice, mode)
    assert space.c_unit[1, moved[0, 1]] == acc1  # b follows a onto accelerator1
    assert space.c_scope[1, moved[0, 1]] == space.profile.scope_index["dram"]  # its scope kept
    b_elsewhere = space.choice_of(1, "cpu2", "sram2")  # cpu2's scope: not accelerator1's
    again, _ = space.canonical(np.array([[a_on_acc1, b_elsewhere, 0]]), mode)
    assert space.c_scope[1, again[0, 1]] == space.profile.scope_index["sram1"]  # a's scope
    assert space.keys(*space.canonical(choice, mode)) == space.keys(moved, _)
    free = SearchSpace(chain(), soc())
    assert space.log10_size == pytest.approx(free.log10_size - np.log10(free.n_choices[1])
                                             - np.log10(len(free.edge_modes[0])) + np.log10(
                                                 len(space.edge_modes[0])), abs=1e-9)


def test_a_measured_transfer_replaces_the_copy_time_in_both_paths():
    graph = chain()
    timed = dataclasses.replace(graph, edges=(dataclasses.replace(graph.edges[0],
                                                                  transfer_us=123.0),
                                              graph.edges[1]))
    plain, space = SearchSpace(graph, soc()), SearchSpace(timed, soc())
    spec = {"ops": {"a": {"unit": "accelerator1", "scope": "sram1"}, "b": "cpu1", "c": "cpu1"},
            "copies": {"a->b": "sync"}}
    p = space.from_user(spec)
    ref, old = Simulator(space).simulate(p), Simulator(plain).simulate(plain.from_user(spec))
    route = plain.route("sram1", "dram", "sync")
    modelled = sum(h.seconds(4096) for h in route)
    assert ref.latency_s - old.latency_s == pytest.approx(123e-6 - modelled, rel=1e-9)
    choice, mode = space.encode([p])
    assert simulate_batch(space, choice, mode).latency[0] == pytest.approx(ref.latency_s,
                                                                           rel=1e-12)


def test_a_parallel_unit_runs_independent_ops_at_once():
    ops = tuple(Op(name=n, kind="elementwise", latency_us={"cpu1": 100.0}) for n in "xyz")
    graph = OpGraph(name="fan", ops=ops, edges=(Edge(src=0, dst=2, nbytes=0),
                                                Edge(src=1, dst=2, nbytes=0)))
    stream = soc()
    parallel = dataclasses.replace(stream, units=tuple(
        dataclasses.replace(u, execution="parallel") if u.name == "cpu1" else u
        for u in stream.units))
    for profile, expected in ((stream, 300e-6), (parallel, 200e-6)):
        space = SearchSpace(graph, profile)
        p = space.from_user({})
        assert Simulator(space).simulate(p).latency_s == pytest.approx(expected)
        choice, mode = space.encode([p])
        assert simulate_batch(space, choice, mode).latency[0] == pytest.approx(expected)
