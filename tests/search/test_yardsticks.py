"""The yardstick strategies: hill climbing (HEFT first, then one-move neighbours of the best
measured placement) and steepest descent (HEFT first, then down to a local optimum)."""

from __future__ import annotations

import numpy as np

from autoplace.baselines.heft import heft_genome
from autoplace.hardware.load import load_profile
from autoplace.measure.batch import simulate_batch
from autoplace.models import load_graph
from autoplace.search.strategy import Proposal
from autoplace.search.yardsticks import HillClimbing, SteepestDescent
from autoplace.space import SearchSpace


def test_hill_proposes_heft_then_single_moves_from_the_best_measured():
    space = SearchSpace(load_graph("squeezenet"), load_profile("soc"))
    hill = HillClimbing(space, seed=1)
    first = hill.propose(8)
    c, m = heft_genome(space)
    assert first.labels == ("heft",) and (first.choice[0] == c).all()
    lat = simulate_batch(space, first.choice, first.mode).latency
    hill.observe(first, lat)
    for _ in range(5):
        p = hill.propose(8)
        assert len(p) == 8 and set(p.labels) == {"hill"}
        _, best_c, best_m = hill.best
        ops_moved = (p.choice != best_c).sum(axis=1)
        modes = space.normalize(p.choice, p.mode)
        flips = (modes != best_m).sum(axis=1)
        # one op moved (its copies' modes may follow), or one copy flipped alone
        assert ((ops_moved == 1) | ((ops_moved == 0) & (flips == 1))).all()
        lat = simulate_batch(space, p.choice, p.mode).latency
        before = hill.best[0]
        hill.observe(p, lat)
        assert hill.best[0] == min(before, lat.min())


def test_hill_never_proposes_what_it_measured():
    space = SearchSpace(load_graph("seed_te"), load_profile("soc"))
    hill, seen = HillClimbing(space, seed=2), set()
    for _ in range(30):
        p = hill.propose(4)
        if not len(p):
            break
        keys = set(space.keys(*space.canonical(p.choice, p.mode)))
        assert not keys & seen
        seen |= keys
        hill.observe(p, simulate_batch(space, p.choice, p.mode).latency)
    assert isinstance(hill.propose(1), Proposal)
    assert np.isfinite(hill.best[0])


def test_steepest_descends_from_heft_to_a_local_optimum_and_runs_dry():
    space = SearchSpace(load_graph("squeezenet"), load_profile("soc"))
    steep = SteepestDescent(space)
    first = steep.propose(4)
    assert first.labels == ("heft",)
    steep.observe(first, simulate_batch(space, first.choice, first.mode).latency)
    heft_ms = steep.best[0]
    for _ in range(50):
        p = steep.propose(4)
        if not len(p):
            break
        assert set(p.labels) == {"steepest"}
        steep.observe(p, simulate_batch(space, p.choice, p.mode).latency)
    assert not len(steep.propose(4)), "it ran dry"
    assert steep.best[0] < heft_ms
    from autoplace.search.descent import moves, predicted

    C, M = moves(space, steep.best[1], steep.best[2])
    assert not (predicted(space, C, M) < steep.best[0]).any()  # a one-op local optimum
