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


def test_annealing_finds_the_proven_optimum_of_the_seed_te_example():
    """seed_te on soc: from HEFT's placement (1.1712e-05 s, all on one SRAM), whose one-op
    moves are all slower, to the least latency branch and bound proves (1.112e-05 s: every
    op in DRAM, one on the other core)."""
    import pytest

    from autoplace.baselines.optimum import optimum
    from autoplace.search.descent import moves, predicted
    from autoplace.search.heft_start import heft_start
    from autoplace.search.yardsticks import anneal

    space = SearchSpace(load_graph("seed_te"), load_profile("soc"))
    c, m = heft_start(space)
    start = simulate_batch(space, c, m).latency[0]
    C, M = moves(space, c[0], space.normalize(c, m)[0])
    assert (predicted(space, C, M) >= start).all()  # a one-op local optimum
    got = anneal(space, rounds=300, seed=0)
    assert got.value == pytest.approx(optimum(space).latency_s, rel=1e-12)
    assert got.value < start * (1 - 0.05)
    simulated = simulate_batch(space, got.choice[None, :], got.mode[None, :]).latency[0]
    assert simulated == got.value and got.simulated == 128 * 301
    figures = [v for _, v in got.steps]
    assert figures[0] == start and figures[-1] == got.value
    assert all(b < a for a, b in zip(figures, figures[1:]))  # where the best improved
    again = anneal(space, rounds=300, seed=0)
    assert (again.choice == got.choice).all() and again.steps[-1][1] == got.value
    for bad in (dict(seconds=1.0, rounds=3), dict(rounds=0), dict(seconds=-1.0), {}):
        with pytest.raises(ValueError, match="seconds > 0 or rounds > 0"):
            anneal(space, **bad)
    # one round, hot enough to take any move: the chain leaves HEFT's placement (a local
    # optimum, above), and the best stays what it was
    hot = anneal(space, rounds=1, seed=0, chains=1, hot=1e3, cold=1e3)
    assert len(hot.steps) == 1 and hot.value == start
    assert space.keys(hot.choice[None, :], hot.mode[None, :]) == space.keys(c, m)
