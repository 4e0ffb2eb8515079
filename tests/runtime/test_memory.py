"""Buffers in their scopes: pools sized as the simulator counts, reuse made safe by waits."""

from __future__ import annotations

import pytest
from factories import chain_graph, fork_graph, op, tiny_profile

from autoplace.graph import Edge, OpGraph
from autoplace.measure.simulator import Simulator
from autoplace.runtime.memory import Arena, PoolError, PoolPlan, Request, ancestors
from autoplace.space import SearchSpace
from autoplace.space.schedule import Timing, schedule_of


def plan_of(graph, profile, spec, capacity=None) -> tuple[PoolPlan, Timing]:
    """The pool plan of every op output of ``spec``'s placement (1000 bytes each)."""
    space = SearchSpace(graph, profile)
    placement = space.from_user(spec)
    timing = Simulator(space).timing(placement)
    plan = PoolPlan(timing, capacity)
    order = sorted(range(len(timing.schedule.work)), key=lambda i: (timing.start[i], i))
    readers = {}
    for dst, sources in enumerate(timing.schedule.reads):
        for s in sources:
            readers.setdefault(s, []).append(timing.schedule.op_work[dst])
    for i in order:
        w = timing.schedule.work[i]
        plan.place(Request(scope=w.dst, nbytes=1000, writer=i, readers=readers.get(i, [])))
    return plan, timing


def test_a_chain_on_one_unit_reuses_storage_without_waits():
    plan, _ = plan_of(chain_graph(), tiny_profile(), {})
    # X's output is free once Y has read it: Z's output takes its place
    assert plan.bytes_by_scope == {"dram": 2 * 1024}  # two live at a time, 64-byte aligned
    assert plan.waits == set()  # the unit runs them in order: nothing to wait for


def test_a_buffer_freed_on_one_unit_is_taken_on_another_with_a_wait():
    """A -> B on cpu (done at 2 ms); D -> C on acc (C starts at 10 ms), independent of
    A and B: C's output takes A's buffer, freed long before in the simulated timing, and the
    runtime must then make C wait for A and B (nothing else orders them)."""
    graph = OpGraph(name="late", ops=(op("A", 1e6, 1000, 1000, ext=1000),
                                      op("B", 1e6, 1000, 1000),
                                      op("D", 1e8, 1000, 1000, ext=1000),
                                      op("C", 1e6, 1000, 1000)),
                    edges=(Edge(src=0, dst=1, nbytes=1000), Edge(src=2, dst=3, nbytes=1000)))
    plan, timing = plan_of(graph, tiny_profile(), {"D": "acc", "C": "acc"})
    at = {graph.ops[w.op].name: i for i, w in enumerate(timing.schedule.work)}
    assert plan.waits == {(at["A"], at["C"]), (at["B"], at["C"])}
    assert plan.bytes_by_scope == {"dram": 3 * 1024}  # four outputs, three buffers


def late_graph() -> OpGraph:
    return OpGraph(name="late", ops=(op("A", 1e6, 1000, 1000, ext=1000),
                                     op("B", 1e6, 1000, 1000),
                                     op("D", 1e8, 1000, 1000, ext=1000),
                                     op("C", 1e6, 1000, 1000)),
                   edges=(Edge(src=0, dst=1, nbytes=1000), Edge(src=2, dst=3, nbytes=1000)))


@pytest.mark.parametrize(("capacity", "waits", "buffers"), [
    (4 * 1024, False, 4),  # room for C's own buffer: no wait for the other unit's work
    (3 * 1024, True, 3),  # no room: C takes A's buffer, and waits for A and B
])
def test_a_writer_takes_new_space_rather_than_wait_while_its_scope_has_room(
        capacity, waits, buffers):
    graph = late_graph()
    plan, timing = plan_of(graph, tiny_profile(), {"D": "acc", "C": "acc"},
                           capacity={"dram": capacity, "sram": 1 << 20})
    at = {graph.ops[w.op].name: i for i, w in enumerate(timing.schedule.work)}
    assert plan.waits == ({(at["A"], at["C"]), (at["B"], at["C"])} if waits else set())
    assert plan.bytes_by_scope == {"dram": buffers * 1024}
    plan.check({"dram": capacity, "sram": 1 << 20})  # within the capacity either way


def test_ancestors_follow_reads_and_each_resources_order():
    space = SearchSpace(fork_graph(), tiny_profile())
    s = schedule_of(space, space.from_user({"R": "acc"}))
    anc = ancestors(s)
    names = [space.graph.ops[w.op].name for w in s.work]
    at = {n: i for i, n in enumerate(names)}
    assert anc[at["R"]] == 1 << at["S"]  # R reads S; nothing else runs on acc before it
    assert anc[at["L"]] == 1 << at["S"]
    assert anc[at["J"]] == (1 << at["S"]) | (1 << at["L"]) | (1 << at["R"])


def test_an_arena_gives_the_best_fitting_free_space_and_its_last_users():
    arena = Arena()
    a, _ = arena.allocate(4096, frozenset({1}))
    b, _ = arena.allocate(64, frozenset({2}))
    c, _ = arena.allocate(1024, frozenset({3}))
    arena.release(lambda users: users <= {1, 3})  # a and c are done, b is live
    offset, earlier = arena.allocate(1000, frozenset({4}))
    assert (offset, earlier) == (c, frozenset({3}))  # the smaller hole, and whom it waits for
    assert arena.nbytes == 4096 + 64 + 1024


def test_a_scope_over_capacity_is_refused_by_name():
    plan, _ = plan_of(chain_graph(), tiny_profile(), {})
    with pytest.raises(PoolError, match="scope 'dram': the runtime's buffers need"):
        plan.check({"dram": 1500, "sram": 1 << 20})
