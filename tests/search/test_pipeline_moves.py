"""The pipeline moves past a local optimum: once every plan one move from the best is
known, they go on from the next best measured plan, until no measured plan has a new
neighbour (seed_te's 4 ops on a 1x2 mesh: a few dozen plans in all)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from autoplace.hardware.load import load_profile
from autoplace.models import load_graph
from autoplace.pipeline.moves import PlanMoves
from autoplace.pipeline.stream_measurer import StreamMeasurer
from autoplace.search.mesh import plan_space
from autoplace.search.pipeline_moves import PipelineMoves
from autoplace.search.strategy import Proposal


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    mesh = tmp_path_factory.mktemp("mesh") / "mesh1x2.toml"
    text = Path(load_profile("mesh").source).read_text()
    mesh.write_text(text.replace("rows = 4", "rows = 1").replace("cols = 4", "cols = 2"))
    return plan_space(load_graph("seed_te"), load_profile(mesh))


def observed(space, strategy: PipelineMoves, plans) -> list[tuple[Proposal, np.ndarray]]:
    """``plans`` measured by their streams and observed by ``strategy``; what it saw."""
    choice, mode = space.encode(list(plans))
    proposal = Proposal(choice=choice, mode=mode, labels=("t",) * len(plans))
    periods = np.array([np.nan if r.period_s is None else r.period_s
                        for r in StreamMeasurer(space.costs).measure(list(plans))])
    strategy.observe(proposal, periods)
    return [(proposal, periods)]


def run_dry(space, strategy: PipelineMoves, stop=lambda s: False):
    """Observe the start plans, then propose and observe one plan at a time until the
    strategy proposes none (or ``stop(strategy)``); the plans measured, and what it saw."""
    seen = observed(space, strategy, space.starts)
    plans = list(space.starts)
    while not stop(strategy) and len(proposal := strategy.propose(1)):
        plans += space.decode_rows(proposal.choice, proposal.mode)
        seen += observed(space, strategy, plans[-1:])
    return plans, seen


def one_move_from(space, plan, draws: int = 3000) -> set:
    moves = PlanMoves(space.costs, space.pes, np.random.default_rng(7))
    return {p for p in (moves.draw(plan)[0] for _ in range(draws)) if p is not None}


def test_past_the_best_plans_neighbours_the_moves_go_on_until_they_reach_no_new_plan(tiny):
    strategy = PipelineMoves(tiny, seed=0, ranking="analytic")
    plans, _ = run_dry(tiny, strategy)
    measured = set(plans)
    assert len(plans) == len(measured), "a plan proposed twice"
    best = strategy.best[1]
    near_best = one_move_from(tiny, best) | {best}
    # the moves went on from other plans than the best (where the job used to stop) ...
    assert measured - near_best - set(tiny.starts)
    # ... and stopped only when no measured plan has a neighbour not measured
    for plan in measured:
        assert one_move_from(tiny, plan) <= measured
    assert strategy.dry == measured


def test_a_restored_state_holds_the_plans_that_ran_dry(tiny):
    """The plans whose neighbourhoods ran dry are state: a fresh strategy that observed the
    same plans and restored it proposes the same next plans, its random state where the
    first one's is; without them it draws from those plans again (the draws of a resumed
    job would then part from the uninterrupted job's)."""
    s = PipelineMoves(tiny, seed=0, ranking="analytic")
    _, seen = run_dry(tiny, s, stop=lambda s: len(s.dry) >= 2)
    state = json.loads(json.dumps(s.state()))  # strict JSON, as a checkpoint holds it
    assert len(state["dry"]) >= 2
    nxt = s.propose(3)
    assert len(nxt)

    def fresh(state: dict) -> tuple[Proposal, dict]:
        f = PipelineMoves(tiny, seed=99, ranking="analytic")
        for proposal, periods in seen:
            f.observe(proposal, periods)
        f.restore(state)
        return f.propose(3), f.rng.bit_generator.state

    again, rng = fresh(state)
    assert list(again.choice) == list(nxt.choice) and rng == s.rng.bit_generator.state
    _, rng = fresh({"rng": state["rng"]})
    assert rng != s.rng.bit_generator.state
