"""The simulator's period (throughput model) against a stream of inferences simulated event
by event (autoplace/measure/stream.py), and the period's own rules (docs/simulator.md)."""

from __future__ import annotations

import numpy as np
import pytest
from factories import chain_graph, fork_graph, tiny_profile

from autoplace.baselines.heft import heft_genome
from autoplace.hardware.load import load_profile
from autoplace.measure.batch import simulate_batch, streams
from autoplace.measure.simulator import Simulator
from autoplace.measure.stream import stream_finishes, stream_period
from autoplace.models import load_graph
from autoplace.space import Placement, SearchSpace


def chain_on_two_units(mode: str) -> tuple[SearchSpace, Placement]:
    """X (cpu, dram) -> Y (acc, sram) -> Z (cpu, dram), both copies in ``mode``."""
    space = SearchSpace(chain_graph(), tiny_profile())
    placement = Placement(ops={"X": ("cpu", "dram"), "Y": ("acc", "sram"),
                               "Z": ("cpu", "dram")},
                          copies={"X->Y": mode, "Y->Z": mode})
    return space, placement


def test_the_period_is_the_busiest_resource_not_the_latency():
    space, placement = chain_on_two_units("async")
    result = Simulator(space).simulate(placement)
    x, z = (space.seconds_of(i, "cpu", "dram", "streamed") for i in (0, 2))
    # the cpu runs X and Z of every inference; the acc's Y and the DMA engine's two copies
    # overlap with them once inferences are in flight
    assert result.period_s == pytest.approx(x + z, rel=1e-12)
    assert result.latency_s > result.period_s + space.seconds_of(1, "acc", "sram", "streamed")


def test_sync_copies_load_the_host_and_so_the_period():
    space, placement = chain_on_two_units("sync")
    result = Simulator(space).simulate(placement)
    x, z = (space.seconds_of(i, "cpu", "dram", "streamed") for i in (0, 2))
    copies = 2 * (1e-6 + 1000 / 1e9)  # two 1000-byte copies at 1 GB/s, 1 us latency each
    assert result.period_s == pytest.approx(x + z + copies, rel=1e-12)


def test_a_stream_that_fits_once_but_not_twice_has_no_period():
    # Y's input and output (1000 bytes each) live in sram together: 2000 bytes at the
    # peak; a double-buffered stream needs 4000
    placement = chain_on_two_units("async")[1]
    for capacity, streaming in ((3000, False), (4000, True)):
        space = SearchSpace(chain_graph(), tiny_profile(sram_mib=capacity / (1 << 20)))
        result = Simulator(space).simulate(placement)
        assert result.ok and result.peak_bytes["sram"] == 2000
        assert (result.period_s is not None) == streaming
        out = simulate_batch(space, *space.encode([placement]))
        assert streams(space, out).tolist() == [streaming]


def _cases():
    """(name, space, placement): pipelines of several shapes."""
    chain_async, chain_sync = chain_on_two_units("async"), chain_on_two_units("sync")
    fork = SearchSpace(fork_graph(), tiny_profile())
    yield "chain async", *chain_async
    yield "chain sync", *chain_sync
    yield "fork-join", fork, Placement(
        ops={"S": ("cpu", "dram"), "L": ("acc", "sram"), "R": ("cpu", "dram"),
             "J": ("acc", "sram")},
        copies={"S->L": "sync", "R->J": "async"})
    rng = np.random.default_rng(3)
    for model, hw in (("squeezenet", "soc"), ("squeezenet", "mesh"), ("inception_v1",
                                                                        "biglittle")):
        space = SearchSpace(load_graph(model), load_profile(hw))
        yield f"{model}/{hw} HEFT", space, space.decode(*heft_genome(space))
        choice, mode = space.random_genomes(8, rng)
        out = simulate_batch(space, choice, mode)
        b = int(np.flatnonzero(~out.no_route)[0])
        yield f"{model}/{hw} random", space, space.decode(choice[b], mode[b])


CASES = list(_cases())


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_a_stream_of_inferences_runs_at_the_analytic_period(case):
    _, space, placement = case
    out = simulate_batch(space, *space.encode([placement]))
    assert stream_period(space, placement, inferences=240) == pytest.approx(out.period[0],
                                                                            rel=0.02)
    # one inference in flight at a time: each runs alone, as the latency has it
    assert stream_period(space, placement, inferences=8, window=1) == pytest.approx(
        out.latency[0], rel=1e-9)


def test_the_stream_never_beats_the_busiest_resource():
    _, space, placement = CASES[3]  # squeezenet/soc HEFT
    period = float(simulate_batch(space, *space.encode([placement])).period[0])
    finish = np.sort(stream_finishes(space, placement, inferences=120, window=6))
    # the first k inferences to end need k periods of the busiest resource's work
    k = np.arange(1, len(finish) + 1)
    assert (finish >= k * period * (1 - 1e-12)).all()
    assert finish[-1] < 1.05 * len(finish) * period  # and the stream keeps up with it


@pytest.mark.parametrize("cores", [0, 1, 2, 3])
def test_a_parallel_unit_streams_at_its_work_over_its_cores(cores):
    """The host as a ``parallel`` unit of ``cores`` cores, every op of a fork-join on it:
    the stream runs at the analytic period, the larger of its longest op (an op runs one
    inference at a time) and its work over its cores (none: a pool as wide as the graph)."""
    import dataclasses

    prof = tiny_profile()
    cpu = dataclasses.replace(prof.units[0], execution="parallel", cores=cores)
    prof = dataclasses.replace(prof, units=(cpu, *prof.units[1:]))
    space = SearchSpace(fork_graph(), prof)
    placement = space.from_user({"ops": {op.name: "cpu" for op in space.graph.ops}})
    secs = [space.seconds_of(i, "cpu", "dram", "streamed") for i in range(space.n_ops)]
    want = max(max(secs), sum(secs) / cores if cores else 0.0)
    out = simulate_batch(space, *space.encode([placement]))
    assert out.period[0] == pytest.approx(want, rel=1e-12)
    assert stream_period(space, placement, inferences=240) == pytest.approx(want, rel=0.02)
    assert sum(secs) / 3 < max(secs) < sum(secs) / 2  # both terms of the period are checked


def test_bad_stream_arguments_are_refused():
    space, placement = chain_on_two_units("async")
    with pytest.raises(ValueError, match="inferences must be >= 4"):
        stream_period(space, placement, inferences=3)
    with pytest.raises(ValueError, match="window must be >= 1"):
        stream_finishes(space, placement, inferences=5, window=0)
