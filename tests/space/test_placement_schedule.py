"""The schedule of a placement: program order per resource, and units that share a CPU.

fork_graph (S -> L, R -> J; S and J take 1 ms, L and R 4 ms on a 1 GFLOP/s unit) on three
units of one memory: ``left`` pinned to CPU 0, ``right`` to CPU 1, ``both`` to CPUs 0 and 1.
"""

from __future__ import annotations

import numpy as np
import pytest
from factories import fork_graph, tiny_profile

from autoplace.hardware.profile import Profile, Scope, Unit
from autoplace.measure.batch import simulate_batch
from autoplace.measure.simulator import Simulator
from autoplace.space import SearchSpace
from autoplace.space.schedule import schedule_of, with_regions


def pinned_profile(handover_ms: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> Profile:
    """``handover_ms``: of ``both``, ``left`` and ``right``."""
    def unit(name: str, cpus: tuple[int, ...], handover: float) -> Unit:
        return Unit(name=name, target={"kind": "llvm", "num-cores": len(cpus)},
                    accepts=frozenset({"*"}), gflops={"default": 1.0}, cpus=cpus,
                    handover_s=handover * 1e-3)

    units = tuple(unit(name, cpus, h) for (name, cpus), h in
                  zip((("both", (0, 1)), ("left", (0,)), ("right", (1,))), handover_ms))
    dram = Scope(name="dram", capacity_bytes=1 << 30, bandwidth_bps=1e12,
                 access=frozenset({"*"}))
    return Profile(name="pinned", host="both", default_scope="dram", units=units,
                   scopes=(dram,), copies=())


@pytest.mark.parametrize(("spec", "latency_ms", "follows"), [
    # CPUs apart: L and R at once; each waits for S on its CPU, J for both of them
    ({"L": "left", "R": "right"}, 1 + 4 + 1, {"L": ["S"], "R": ["S"], "J": ["L", "R"]}),
    # CPU 0 shared by left and both: R waits for L, though it does not read it
    ({"L": "left", "R": "both"}, 1 + 4 + 4 + 1, {"L": ["S"], "R": ["L"]}),
    ({"L": "both", "R": "both"}, 1 + 4 + 4 + 1, {}),  # one unit: in order anyway
])
def test_units_sharing_a_cpu_take_turns_in_program_order(spec, latency_ms, follows):
    space = SearchSpace(fork_graph(), pinned_profile())
    placement = space.from_user({"S": "both", "J": "both", **spec})
    sched = schedule_of(space, placement)
    names = [space.graph.ops[w.op].name for w in sched.work]
    assert {names[i]: [names[f] for f in w.follows] for i, w in enumerate(sched.work)
            if w.follows} == follows
    reference = Simulator(space).simulate(placement)
    assert reference.latency_s == pytest.approx(latency_ms * 1e-3)
    batch = simulate_batch(space, *space.encode([placement]))
    assert batch.latency[0] == pytest.approx(reference.latency_s)
    assert batch.period[0] == pytest.approx(reference.period_s)


def test_a_shared_cpu_is_busy_with_every_unit_pinned_to_it():
    """The period of a stream: CPU 0 runs S, L and J (left and both), 6 ms per inference,
    more than any one unit's work."""
    space = SearchSpace(fork_graph(), pinned_profile())
    placement = space.from_user({"S": "both", "L": "left", "R": "right", "J": "both"})
    result = Simulator(space).simulate(placement)
    assert result.unit_busy_s == pytest.approx({"both": 2e-3, "left": 4e-3, "right": 4e-3})
    assert result.period_s == pytest.approx(6e-3)
    batch = simulate_batch(space, *space.encode([placement]))
    assert np.isclose(batch.period[0], 6e-3)


@pytest.mark.parametrize(("spec", "latency_ms"), [
    # L waits for S on another unit (left's 0.2 ms), R likewise (right's 0.3 ms): L 1.2-5.2,
    # R 1.3-5.3; J (both's 0.1 ms) after the later of them: 5.4-6.4
    ({"L": "left", "R": "right"}, 6.4),
    # L 1.2-5.2; R reads S on its own unit but follows L on CPU 0: 5.3-9.3; J reads R on its
    # own unit, and L, which ended long before: 9.3-10.3
    ({"L": "left", "R": "both"}, 10.3),
    ({"L": "both", "R": "both"}, 10.0),  # one unit: nothing is handed over
])
def test_work_that_waits_for_another_unit_starts_a_handover_after_it(spec, latency_ms):
    space = SearchSpace(fork_graph(), pinned_profile(handover_ms=(0.1, 0.2, 0.3)))
    placement = space.from_user({"S": "both", "J": "both", **spec})
    reference = Simulator(space).simulate(placement)
    assert reference.latency_s == pytest.approx(latency_ms * 1e-3)
    assert sum(reference.unit_busy_s.values()) == pytest.approx(10e-3)  # a wait, not work
    batch = simulate_batch(space, *space.encode([placement]))
    assert batch.latency[0] == pytest.approx(reference.latency_s)


def test_a_region_is_one_piece_of_work_in_an_order_its_reads_allow():
    """fork_graph on tiny: S (acc, SRAM) and R (acc, DRAM) as one region, L on acc beside
    it, J on the cpu. In program order (S, L, R) acc would run L, which reads S, before the
    region that writes S: the region comes first; the copy S -> R inside the region is no
    more, the copy S -> L waits for the whole region."""
    space = SearchSpace(fork_graph(), tiny_profile())
    placement = space.from_user({"ops": {"S": {"unit": "acc", "scope": "sram"}, "L": "acc",
                                         "R": "acc", "J": "cpu"},
                                 "copies": {"S->L": "async", "S->R": "async"}})
    timing = Simulator(space).timing(placement)
    merged = with_regions(space, timing, [(0, 2)])
    s = merged.schedule
    region = s.op_work[0]
    assert s.op_work[2] == region and s.work[region].kind == "region"
    assert s.work[region].ops == (0, 2) and s.work[region].after == ()
    assert [s.work[i].kind for i in s.order["acc"]] == ["region", "op"]  # then L
    copies = [w for w in s.work if w.kind == "copy"]
    assert [space.edge_names[w.edge] for w in copies] == ["S->L"]
    assert copies[0].after == (region,) and s.work[s.op_work[1]].after == (s.work.index(
        copies[0]),)
    assert sorted(s.work[s.op_work[3]].after) == sorted({region, s.op_work[1]})
    old = timing.schedule
    assert merged.start[region] == timing.start[old.op_work[0]]
    assert merged.end[region] == timing.end[old.op_work[2]]
    with pytest.raises(ValueError, match="cycle"):  # S -> L (cpu) -> J: a region {S, J}
        with_regions(space, Simulator(space).timing(space.from_user(
            {"S": "acc", "L": "cpu", "R": "acc", "J": "acc"})), [(0, 3)])
