"""GuidedProposer: batches of unmeasured genomes; rows that do not fit are never proposed."""

from __future__ import annotations

import functools

import numpy as np

from autoplace.hardware.load import load_profile
from autoplace.measure.batch import fits, fitting
from autoplace.measure.simulator import Simulator
from autoplace.models import load_graph
from autoplace.search.guided_proposer import GuidedProposer, make_model
from autoplace.space import SearchSpace


def space_of(model: str = "squeezenet", hw: str = "soc") -> SearchSpace:
    return SearchSpace(load_graph(model), load_profile(hw))


def placements(space, choice, mode):
    return [space.decode(c, m) for c, m in zip(choice, mode)]


def test_fits_agrees_with_the_simulator_on_random_genomes():
    space = space_of(hw="mesh")  # 2 MiB PE memories: most random placements overflow
    sim = Simulator(space)
    c, m = space.random_genomes(200, np.random.default_rng(0))
    m = space.normalize(c, m)
    ok = [r.ok for r in sim.measure(placements(space, c, m))]
    assert fits(space, c, m).tolist() == ok
    assert 0 < sum(ok) < len(ok)  # both kinds are in the sample


def test_rows_that_do_not_fit_are_never_proposed():
    space = space_of(hw="mesh")
    sim = Simulator(space)
    p = GuidedProposer(space, model=make_model("xgb", seed=0),
                       candidates=256, seed=0, feasible=functools.partial(fitting, space))
    p.seed_population(*space.random_genomes(64, np.random.default_rng(1)))
    for _ in range(6):
        p.fit()
        batch = p.propose(8)
        results = sim.measure(placements(space, batch.choice, batch.mode))
        assert 0 < len(results) <= 8 and all(r.ok for r in results)
        p.observe(batch.choice, batch.mode, np.array([r.latency_s for r in results]))
    assert p.infeasible  # evolution did breed overflows: the filter had work to do
