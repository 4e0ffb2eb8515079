"""Contract of the search-strategy extension point, for every strategy the tuner can use."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import optuna
import pytest

from autoplace.hardware.load import load_profile
from autoplace.measure.simulator import Simulator
from autoplace.models import load_graph
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


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c['sampler']}-{c['cost_model']}")
def test_proposals_are_placements_of_the_space_and_observe_takes_them_back(space, cfg):
    s = strategy(space, **cfg)
    seen = set()
    for _ in range(4):
        proposal = s.propose(6)
        valid(space, proposal, 6)
        keys = space.keys(proposal.choice, space.normalize(proposal.choice, proposal.mode))
        if cfg["sampler"] == "evolve":  # evolution never proposes what it observed
            assert not set(keys) & seen
        seen.update(keys)
        lat = measure(space, proposal)
        s.observe(proposal.take(range(len(proposal) - 1)), lat[:-1])  # a candidate lost


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c['sampler']}-{c['cost_model']}")
def test_observing_without_a_prediction_is_a_replay(space, cfg):
    """Records of a resumed job and baselines come without predictions or trials."""
    s = strategy(space, **cfg)
    choice, mode = space.random_genomes(5, np.random.default_rng(0))
    proposal = Proposal(choice=choice, mode=mode, labels=("replayed",) * 5)
    s.observe(proposal, measure(space, proposal))
    assert s.stats == []  # nothing was ranked
    valid(space, s.propose(3), 3)


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c['sampler']}-{c['cost_model']}")
def test_a_restored_state_proposes_what_the_strategy_proposed(space, cfg, tmp_path):
    """A strategy that gives its state (JSON) proposes, once a fresh one has observed the
    same candidates and restored it from the checkpoint's last round, the round it proposed
    when the state was taken."""
    s = strategy(space, **cfg)
    if s.state() is None:  # the Optuna samplers cannot say: their resumes are safe, not exact
        assert cfg["sampler"] != "evolve"
        return
    shown, path = [], tmp_path / "t.state.jsonl"
    writer = CheckpointWriter(path, run="r", sampler=cfg["sampler"], seed=4, batch_size=6,
                              objective="latency")
    for _ in range(3):
        writer.write(len(shown), s.state())  # as the loop does before each round
        proposal = s.propose(6)
        lat = measure(space, proposal)
        s.observe(proposal, lat)
        shown.append((proposal, lat))
    writer.write(len(shown), s.state())
    json.dumps(s.state())  # strict JSON
    state = read_checkpoint(path, run="r").strategy
    nxt = s.propose(6)
    fresh = strategy(space, seed=99, **cfg)  # another seed: the state is all it has
    for proposal, lat in shown:
        fresh.observe(proposal, lat)
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
