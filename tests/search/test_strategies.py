"""Contract of the search-strategy extension point, for every strategy the tuner can use:
each sampler of the per-op space and the pipeline moves of a mesh's plan space."""

from __future__ import annotations

import ast
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import optuna
import pytest

from autoplace.hardware.load import load_profile
from autoplace.measure.simulator import Simulator
from autoplace.models import load_graph
from autoplace.pipeline import PipelinePlan
from autoplace.search import SAMPLERS, Proposal, SearchStrategy, TuneConfig
from autoplace.search.checkpoint import CheckpointWriter, read_checkpoint
from autoplace.search.store import open_study
from autoplace.search.strategies import make_strategy, study_sampler
from autoplace.space import SearchSpace

CONFIGS = [dict(sampler=s, cost_model=c) for s in SAMPLERS for c in ("xgb", "none")]


@pytest.fixture(scope="module")
def space():
    return SearchSpace(load_graph("squeezenet"), load_profile("soc"))


def strategy(space, seed: int = 4, **cfg) -> SearchStrategy:
    config = TuneConfig(seed=seed, candidates=64, **cfg)
    return make_strategy(space, open_study(space, config, study_sampler(config)), config)


def measure(space, proposal: Proposal) -> np.ndarray:
    results = Simulator(space).measure([space.decode(c, m)
                                        for c, m in zip(proposal.choice, proposal.mode)])
    return np.array([r.latency_s if r.ok else np.nan for r in results])


def valid(space, proposal: Proposal, n: int) -> None:
    assert 0 < len(proposal) <= n
    assert proposal.choice.shape == (len(proposal), space.n_ops)
    assert proposal.mode.shape == (len(proposal), space.n_edges)
    assert len(proposal.labels) == len(proposal) and all(proposal.labels)
    for c, m in zip(proposal.choice, proposal.mode):
        assert space.check(space.decode(c, m)) is None  # a placement the space accepts


# -- the strategies under contract: each sampler of the per-op space, the pipeline moves -----
@dataclass(frozen=True)
class Case:
    """A strategy of a space as the contract tests use it: ``make(seed)``; ``shown()``: what
    the loop has it observe before its first round (baselines, the DP's plans), with their
    values; ``measure``, ``valid`` of its proposals; ``fresh_only``: it never proposes what
    it proposed or observed."""

    name: str
    space: object
    make: Callable[[int], SearchStrategy]
    shown: Callable[[], tuple[Proposal, np.ndarray] | None]
    measure: Callable[[Proposal], np.ndarray]
    valid: Callable[[Proposal, int], None]
    fresh_only: bool
    checkpoint_name: str


def per_op_case(cfg: dict) -> Case:
    sp = SearchSpace(load_graph("squeezenet"), load_profile("soc"))
    return Case(f"{cfg['sampler']}-{cfg['cost_model']}", sp,
                lambda seed: strategy(sp, seed=seed, **cfg), lambda: None,
                lambda p: measure(sp, p), lambda p, n: valid(sp, p, n),
                cfg["sampler"] == "evolve", cfg["sampler"])


def pareto_case() -> Case:
    """The front search of latency and energy over squeezenet's placements on ``soc``: it
    observes each objective's figure per candidate."""
    from autoplace.measure.objective import objective_named
    from autoplace.search.pareto_search import ParetoSearch

    sp, objective = SearchSpace(load_graph("squeezenet"), load_profile("soc")), \
        objective_named("latency,energy")

    def figures(proposal: Proposal) -> np.ndarray:
        results = Simulator(sp).measure(sp.decode_rows(proposal.choice, proposal.mode))
        return np.array([objective.values(r) or [np.nan] * 2 for r in results],
                        dtype=np.float64).reshape(-1, 2)

    return Case("pareto", sp, lambda seed: ParetoSearch(sp, objective, seed=seed),
                lambda: None, figures, lambda p, n: valid(sp, p, n), False, "evolve")


def moves_case(front: bool = False) -> Case:
    """The pipeline moves over squeezenet's plans on the bundled 4x4 mesh (``front``: the
    moves of the front of throughput and energy, measured unbounded)."""
    from autoplace.measure.objective import objective_named
    from autoplace.pipeline.stream_measurer import StreamMeasurer
    from autoplace.search.mesh import plan_space
    from autoplace.search.pipeline_front import PipelineFront
    from autoplace.search.pipeline_moves import PipelineMoves

    sp = plan_space(load_graph("squeezenet"), load_profile("mesh"))

    objective = objective_named("throughput,energy")

    def periods(proposal: Proposal) -> np.ndarray:
        """Seconds per inference; for the front, [plans, 2]: each objective's figure."""
        results = StreamMeasurer(sp.costs).measure(sp.decode_rows(proposal.choice,
                                                                  proposal.mode))
        if front:
            return np.array([objective.values(r) or [np.nan] * 2 for r in results],
                            dtype=np.float64).reshape(-1, 2)
        return np.array([r.period_s if r.period_s is not None else np.nan for r in results])

    def shown() -> tuple[Proposal, np.ndarray]:
        choice, mode = sp.encode(list(sp.starts))
        starts = Proposal(choice=choice, mode=mode, labels=("dp",) * len(choice))
        return starts, periods(starts)

    def plans_of_the_mesh(proposal: Proposal, n: int) -> None:
        plans = sp.decode_rows(proposal.choice, proposal.mode)
        assert 0 < len(plans) <= n and all(isinstance(p, PipelinePlan) for p in plans)
        assert all(p.pes * p.replicas <= sp.pes for p in plans)
        assert proposal.mode.shape == (len(proposal), 0) and all(proposal.labels)

    if front:
        return Case("pipeline-front", sp, lambda seed: PipelineFront(sp, objective, seed=seed),
                    shown, periods, plans_of_the_mesh, True, "front")
    return Case("pipeline-moves", sp, lambda seed: PipelineMoves(sp, seed=seed), shown,
                periods, plans_of_the_mesh, True, "moves")


CASE_NAMES = [*(f"{c['sampler']}-{c['cost_model']}" for c in CONFIGS), "pipeline-moves",
              "pipeline-front", "pareto"]


@functools.cache
def case_named(name: str) -> Case:
    if name == "pareto":
        return pareto_case()
    if name in ("pipeline-moves", "pipeline-front"):
        return moves_case(front=name == "pipeline-front")
    return per_op_case(next(c for c in CONFIGS if f"{c['sampler']}-{c['cost_model']}" == name))


@pytest.fixture(params=CASE_NAMES)
def case(request) -> Case:
    return case_named(request.param)


def started(case: Case, seed: int = 4) -> SearchStrategy:
    s = case.make(seed)
    if (first := case.shown()) is not None:
        s.observe(*first)
    return s


def test_proposals_are_candidates_of_the_space_and_observe_takes_them_back(case):
    s = started(case)
    first = case.shown()
    seen = set(case.space.keys(first[0].choice, first[0].mode)) if first else set()
    for _ in range(4):
        proposal = s.propose(6)
        case.valid(proposal, 6)
        choice, mode = case.space.canonical(proposal.choice, proposal.mode)
        keys = case.space.keys(choice, mode)
        if case.fresh_only:  # never proposes what it proposed or observed
            assert not set(keys) & seen
        seen.update(keys)
        value = case.measure(proposal)
        s.observe(proposal.take(range(len(proposal) - 1)), value[:-1])  # a candidate lost


def test_observing_without_a_prediction_is_a_replay(case):
    """Records of a resumed job and baselines come without predictions or trials."""
    s = case.make(4)
    first = case.shown()
    if first is None:
        choice, mode = case.space.random_genomes(5, np.random.default_rng(0))
        replayed = Proposal(choice=choice, mode=mode, labels=("replayed",) * 5)
        first = replayed, case.measure(replayed)
    s.observe(*first)
    assert s.stats == []  # nothing was ranked
    case.valid(s.propose(3), 3)


def test_a_restored_state_proposes_what_the_strategy_proposed(case, tmp_path):
    """A strategy that gives its state (JSON) proposes, once a fresh one has observed the
    same candidates and restored it from the checkpoint's last round, the round it proposed
    when the state was taken."""
    s = started(case)
    if s.state() is None:  # the Optuna samplers cannot say: their resumes are safe, not exact
        assert case.checkpoint_name in ("tpe", "random")
        return
    shown, path = [], tmp_path / "t.state.jsonl"
    writer = CheckpointWriter(path, run="r", sampler=case.checkpoint_name, seed=4,
                              batch_size=6, objective="latency")
    for _ in range(3):
        writer.write(len(shown), s.state())  # as the loop does before each round
        proposal = s.propose(6)
        value = case.measure(proposal)
        s.observe(proposal, value)
        shown.append((proposal, value))
    writer.write(len(shown), s.state())
    json.dumps(s.state())  # strict JSON
    state = read_checkpoint(path, run="r").strategy
    nxt = s.propose(6)
    fresh = started(case, seed=99)  # another seed: the state is all it has
    for proposal, value in shown:
        fresh.observe(proposal, value)
    fresh.restore(state)
    again = fresh.propose(6)
    assert again.labels == nxt.labels
    assert (again.choice == nxt.choice).all() and (again.mode == nxt.mode).all()


def test_only_strategies_with_a_cost_model_save_one(space, tmp_path):
    with pytest.raises(ValueError, match="has no cost model"):
        strategy(space, sampler="tpe", cost_model="none").save_model(str(tmp_path / "m.json"))


def test_the_loop_names_no_strategy():
    """The tuning loop reaches strategies only through the interface and the factory."""
    src = Path(__file__).parents[2] / "autoplace" / "search" / "loop.py"
    imported = {n.module for n in ast.walk(ast.parse(src.read_text()))
                if isinstance(n, ast.ImportFrom)}
    assert not imported & {"autoplace.search.evolution_strategy",
                           "autoplace.search.optuna_sampling",
                           "autoplace.search.guided_proposer"}
    assert not any(name in src.read_text() for name in ('"evolve"', '"tpe"', '"random"'))


def test_optuna_trials_are_finished_by_the_store_not_left_running(space, tmp_path):
    from autoplace.records.tuning_log import TuningLog
    from autoplace.search import tune

    storage = f"sqlite:///{tmp_path / 's.db'}"
    with TuningLog(tmp_path / "l.jsonl") as log:
        tune(space, Simulator(space), log,
             TuneConfig(trials=12, sampler="tpe", cost_model="none", storage=storage))
    study = optuna.load_study(study_name=optuna.get_all_study_names(storage)[0], storage=storage)
    assert all(t.state.is_finished() for t in study.trials)
    assert study.metric_names == ["latency_s"]  # what the dashboard calls the values


class Sampled(SearchStrategy):
    """A user's strategy: seeded random genomes, labelled ``mine``."""

    def __init__(self, space, seed: int):
        super().__init__()
        self.space, self.rng = space, np.random.default_rng(seed)
        self.proposed, self.observed = [], 0

    def propose(self, n: int) -> Proposal:
        choice, mode = self.space.random_genomes(n, self.rng)
        self.proposed += [self.space.decode(c, m) for c, m in zip(choice, mode)]
        return Proposal(choice=choice, mode=mode, labels=("mine",) * n)

    def observe(self, proposal: Proposal, latency: np.ndarray) -> None:
        self.observed += len(proposal)


def test_tune_measures_the_proposals_of_a_users_strategy(space, tmp_path):
    from autoplace.records.tuning_log import TuningLog, read
    from autoplace.search import tune

    mine = Sampled(space, seed=7)
    with TuningLog(tmp_path / "l.jsonl") as log:
        result = tune(space, Simulator(space), log, TuneConfig(trials=12, batch_size=4,
                                                               descent=0), strategy=mine)
    records = read(tmp_path / "l.jsonl")
    searched = [r for r in records if r.strategy not in result.baselines]
    assert [r.strategy for r in searched] == ["mine"] * 12
    assert [r.placement for r in searched] == mine.proposed[:12]
    assert mine.observed == len(records)  # the baselines too
    assert result.best.trial == min(records, key=lambda r: r.result.latency_s).trial


def test_tune_takes_a_strategy_or_a_sampler_not_both(space, tmp_path):
    from autoplace.records.tuning_log import TuningLog
    from autoplace.search import tune

    with TuningLog(tmp_path / "l.jsonl") as log, pytest.raises(
            ValueError, match=r"not both: with strategy=Sampled, leave sampler='tpe', "
                              r"cost_model='none' at the default"):
        tune(space, Simulator(space), log, TuneConfig(sampler="tpe", cost_model="none"),
             strategy=Sampled(space, seed=0))
    assert not (tmp_path / "l.jsonl").exists()  # refused before it began: no log made
