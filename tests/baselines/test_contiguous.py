"""The best contiguous split: against every split of small instances, simulated."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from autoplace.baselines.contiguous import best_split, inseparable_blocks
from autoplace.baselines.named import baselines
from autoplace.frontend.tarnawski import convert
from autoplace.measure.batch import fitting, simulate_batch, streams
from autoplace.space import SearchSpace


def instance(seed: int, n: int = 7, cpus: int = 1) -> dict:
    """A random DAG in Tarnawski et al.'s format: two accelerators of room for about half
    the sizes, one node they cannot run, one cost per node's output."""
    rng = np.random.default_rng(seed)
    nodes = [{"id": i, "cpuLatency": float(rng.uniform(1, 10)),
              "fpgaLatency": float(rng.uniform(0.2, 3)), "size": float(rng.integers(1, 5)),
              "supportedOnFpga": i != n // 2} for i in range(n)]
    cost = rng.uniform(0, 2, n)
    edges = [{"sourceId": i, "destId": j, "cost": float(cost[i])}
             for i in range(n) for j in range(i + 1, n) if j == i + 1 or rng.random() < 0.3]
    size = sum(x["size"] for x in nodes)
    return {"nodes": nodes, "edges": edges, "maxSizePerFPGA": float(size // 2),
            "maxFPGAs": 2, "maxCPUs": cpus}


def every_split(space: SearchSpace, what: str = "period") -> tuple[np.ndarray, np.ndarray]:
    """Every placement of the ops on the host and the two accelerators in their home scopes
    in which each accelerator's ops are one range of the blocks' order, and its period (inf
    where it does not stream) or, ``what="busy"``, the sum of every unit's busy time (inf
    where it does not fit)."""
    pos = np.empty(space.n_ops, dtype=np.int64)
    for q, ops in enumerate(inseparable_blocks(space)):
        pos[ops] = q
    prof, ops = space.profile, np.arange(space.n_ops)
    units = [space.host] + [prof.unit_index[u.name] for u in prof.units if u.execution == "block"]
    rows = []
    for assign in itertools.product(range(len(units)), repeat=space.n_ops):
        a = np.array(assign)
        if all(_one_range(pos[a == k]) for k in range(1, len(units))):
            u = np.array(units)[a]
            home = [prof.scope_index[prof.home_scope(space.units[x])] for x in u]
            c = space.choice_index(ops, u, home, [1] * space.n_ops)
            if (c >= 0).all():
                rows.append(c)
    choice = np.array(rows)
    mode = np.ones((len(choice), space.n_edges), dtype=np.int64)
    out = simulate_batch(space, choice, mode)
    if what == "busy":
        return choice, np.where(fitting(space, out), out.busy.sum(axis=1), np.inf)
    return choice, np.where(streams(space, out), out.period, np.inf)


def _one_range(positions: np.ndarray) -> bool:
    return len(positions) == 0 or len(np.unique(positions)) == positions.max() - positions.min() + 1


def period_of(space: SearchSpace, placement) -> float:
    choice, mode = space.encode([placement])
    out = simulate_batch(space, choice, mode)
    assert streams(space, out)[0] and not out.not_contiguous[0]
    return float(out.period[0])


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("cpus", [1, 2])
def test_the_split_has_the_least_period_of_every_contiguous_split(seed, cpus):
    graph, profile = convert(instance(seed, cpus=cpus), name=f"r{seed}", source="random")
    space = SearchSpace(graph, profile)
    _, periods = every_split(space)
    got = period_of(space, best_split(space))
    assert got == pytest.approx(periods.min(), rel=1e-9)
    assert (periods > got * (1 + 1e-6)).mean() > 0.5  # most splits are worse: not by luck


@pytest.mark.parametrize("seed", range(4))
def test_the_latency_split_has_the_least_chained_latency_of_every_contiguous_split(seed):
    """Its goal, every range's load plus every host op's time, is the units' busy time."""
    graph, profile = convert(instance(seed, cpus=8), name=f"r{seed}", source="random")
    space = SearchSpace(graph, profile)
    _, busy = every_split(space, "busy")
    choice, mode = space.encode([best_split(space, "latency")])
    out = simulate_batch(space, choice, mode)
    assert fitting(space, out)[0]
    assert out.busy.sum() == pytest.approx(busy.min(), rel=1e-9)
    assert (busy > busy.min() * (1 + 1e-6)).mean() > 0.5


def test_an_unknown_goal_is_refused():
    graph, profile = convert(instance(0), name="r", source="random")
    with pytest.raises(ValueError, match="goal must be"):
        best_split(SearchSpace(graph, profile), "energy")


def test_the_split_uses_the_accelerators_and_beats_the_other_baselines():
    graph, profile = convert(instance(3, n=40), name="r", source="random")
    space = SearchSpace(graph, profile)
    named = dict(baselines(space))
    got = period_of(space, named["contiguous:period"])
    on = {u for u, _ in named["contiguous:period"].ops.values() if u != profile.host}
    assert len(on) == 2
    for name in ("fill", "greedy", f"single:{profile.host}"):
        choice, mode = space.encode([named[name]])
        out = simulate_batch(space, choice, mode)
        theirs = np.where(streams(space, out), out.period, np.inf)[0]
        assert got <= theirs * (1 + 1e-12), name


def test_no_split_without_a_class_of_block_units():
    from factories import chain_graph, tiny_profile

    space = SearchSpace(chain_graph(), tiny_profile())
    assert best_split(space) is None
    assert not [name for name, _ in baselines(space) if name.startswith("contiguous")]


@pytest.mark.parametrize("name", ["layers-resnet50", "ops-resnet50"])
def test_the_latency_split_seeds_the_latency_instances_below_fill(name):
    """On Tarnawski et al.'s latency instances the chained split is far below their greedy's
    fill (layers-resnet50: 1157 against 3790 ms; ops-resnet50: 651 against 756 ms)."""
    from autoplace.baselines.named import fill
    from autoplace.frontend.tarnawski import load_instance
    from autoplace.measure.simulator import Simulator

    space = SearchSpace(*load_instance(name))
    chained, filled = Simulator(space).measure([best_split(space, "latency"), fill(space)])
    assert chained.ok and filled.ok
    assert chained.latency_s < 0.9 * filled.latency_s
