"""The front search's learned figures (autoplace/search/learned_figures.py): with a measurer
that differs from the simulator, the front it finds is better for learning the residual;
with the simulator as the measurer, nothing is learned and nothing changes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from autoplace.hardware.load import load_profile
from autoplace.measure.base import Measurer
from autoplace.measure.objective import objective_named
from autoplace.measure.simulator import Simulator
from autoplace.models import load_graph
from autoplace.records.front import figures, front, hypervolume
from autoplace.records.tuning_log import TuningLog, read
from autoplace.search import TuneConfig, tune
from autoplace.search.pareto_search import ParetoSearch
from autoplace.space import SearchSpace

GOAL = objective_named("latency,energy")


class Board(Measurer):
    """A board unlike its profile: the figures of the simulator over ``real`` (the big
    cluster's convolutions at 24 GFLOP/s where the profile says 60, at 4.5 W where it says
    3), not free."""

    name, free = "board", False

    def __init__(self, real: SearchSpace, stop_after: int | None = None):
        self.simulator, self.left = Simulator(real), stop_after

    def measure(self, placements):
        if self.left is not None:  # Ctrl-C once this many are measured
            if self.left < len(placements):
                raise KeyboardInterrupt
            self.left -= len(placements)
        return self.simulator.measure(placements)


@pytest.fixture(scope="module")
def spaces(tmp_path_factory):
    text = Path(load_profile("biglittle").source).read_text()
    text = text.replace("conv2d = 60.0", "conv2d = 24.0").replace("power_w = 3.0",
                                                                   "power_w = 4.5")
    real = tmp_path_factory.mktemp("board") / "biglittle_real.toml"
    real.write_text(text)
    graph = load_graph("squeezenet")
    return SearchSpace(graph, load_profile("biglittle")), SearchSpace(graph, load_profile(real))


def front_job(space, measurer, path, *, learn=True, trials=64, resume=False):
    search = ParetoSearch(space, GOAL, seed=0, learn=learn)
    with TuningLog(path) as log:
        tune(space, measurer, log, TuneConfig(trials=trials, seed=0, objective=GOAL.name,
                                              resume=resume), strategy=search)
    return search, [r for r in read(path) if r.result.ok]


def test_learning_the_boards_residual_finds_a_better_front(spaces, tmp_path):
    """On a board whose big cores are slower and hungrier than the profile says, the front
    of 64 trials ranked by the learned figures dominates more (measured) than the front
    ranked by the simulator's alone (1.75x the hypervolume when written), and the learned
    figures are nearer the measured ones (of the simulator-ranked job's last 16 candidates:
    a mean log error of 0.04 against 1.05 when written)."""
    space, real = spaces
    learned, ours = front_job(space, Board(real), tmp_path / "l.jsonl")
    plain, theirs = front_job(space, Board(real), tmp_path / "s.jsonl", learn=False)
    assert learned.model.active and not plain.model.active
    both = np.vstack([figures(ours, GOAL.criteria), figures(theirs, GOAL.criteria)])
    ref = np.percentile(both, 90, axis=0)
    hv = [hypervolume(figures(front(r, GOAL.criteria), GOAL.criteria), ref)
          for r in (ours, theirs)]
    assert hv[0] > 1.3 * hv[1]
    c, m = space.encode([r.placement for r in theirs[-16:]])
    measured = figures(theirs[-16:], GOAL.criteria)
    errors = [np.abs(np.log(s.simulate(c, m)[0] / measured)).mean() for s in (learned, plain)]
    assert errors[0] < 0.5 * errors[1]


def test_with_the_simulator_as_the_measurer_nothing_is_learned(spaces, tmp_path):
    """Its figures are then the simulator's: no residual, no model, the same records as a
    search that never learns."""
    space, _ = spaces
    search, records = front_job(space, Simulator(space), tmp_path / "a.jsonl", trials=32)
    _, plain = front_job(space, Simulator(space), tmp_path / "b.jsonl", trials=32, learn=False)
    assert not search.model.active and search.model.fitted_rows > 0
    assert [r.placement for r in records] == [r.placement for r in plain]


def test_a_resumed_search_learns_what_the_uninterrupted_one_did(spaces, tmp_path):
    """Interrupted (Ctrl-C) after 107 candidates and resumed on the board, the log holds
    what the job run through holds: the model refits on the rows of the checkpoint (past 80
    rows a round's 8 no longer make it refit: without the refit, the resumed model is
    fitted on more rows than the interrupted one was)."""
    space, real = spaces
    _, whole = front_job(space, Board(real), tmp_path / "w.jsonl", trials=128)
    _, cut = front_job(space, Board(real, stop_after=109), tmp_path / "r.jsonl", trials=128)
    assert 100 < len(cut) < len(whole)
    search, resumed = front_job(space, Board(real), tmp_path / "r.jsonl", trials=128,
                                resume=True)
    assert search.model.active
    assert [(r.trial, r.strategy, r.placement) for r in resumed] == \
        [(r.trial, r.strategy, r.placement) for r in whole]
