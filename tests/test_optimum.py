"""On the first seed's TE example with the soc profile, the tuner finds the true optimum."""

from __future__ import annotations

import itertools

import pytest

from autoplace.measure.simulator import Simulator
from autoplace.models import load_graph
from autoplace.profile_io import load_profile
from autoplace.records import TuningLog
from autoplace.search import TuneConfig, tune
from autoplace.space import SearchSpace


def enumerate_space(space: SearchSpace):
    """Every distinct placement: all op choices x all copy modes of the free edges."""
    free = [k for k, m in enumerate(space.edge_modes) if len(m) > 1]
    seen = {}
    for choice in itertools.product(*[range(len(c)) for c in space.op_choices]):
        for modes in itertools.product(*[space.edge_modes[k] for k in free]):
            p = space.decode(choice, dict(zip(free, modes)))
            seen.setdefault(p.to_json(), p)
    return list(seen.values())


@pytest.fixture(scope="module")
def setup():
    graph, profile = load_graph("seed_te"), load_profile("soc")
    space = SearchSpace(graph, profile)
    sim = Simulator(graph, profile, space=space)
    everything = enumerate_space(space)
    optimum = min(r.latency_s for r in sim.measure(everything) if r.ok)
    return space, sim, everything, optimum


def test_space_size_matches_the_enumeration(setup):
    space, _, everything, _ = setup
    # 8 (unit, scope) choices per op; decode collapses copy modes of edges that need none
    assert [len(c) for c in space.op_choices] == [8, 8, 8, 8]
    assert 8 ** 4 < len(everything) < 8 ** 4 * 2 ** 4


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tuned_best_equals_the_exhaustive_optimum(setup, tmp_path, seed):
    space, sim, _, optimum = setup
    with TuningLog(tmp_path / "log.jsonl") as log:
        result = tune(space, sim, log, TuneConfig(trials=200, seed=seed))
    assert result.best.result.latency_s == pytest.approx(optimum, rel=1e-12)
    greedy = result.baselines["greedy"].result.latency_s
    assert optimum < greedy  # the search is needed: the greedy baseline is not optimal
