"""The Optuna search: baselines first, determinism, failures as failed trials, resume."""

from __future__ import annotations

import optuna
import pytest
from factories import chain_graph, fork_graph, tiny_profile

from autoplace.graph import Op, OpGraph
from autoplace.measure.simulator import Simulator
from autoplace.records import TuningLog, read
from autoplace.search import (
    SearchError,
    TuneConfig,
    baselines,
    distributions,
    greedy,
    to_params,
    to_placement,
    tune,
)
from autoplace.space import SearchSpace


def run(tmp_path, graph, profile, name="log.jsonl", **cfg):
    space = SearchSpace(graph, profile)
    with TuningLog(tmp_path / name) as log:
        result = tune(space, Simulator(graph, profile, space=space), log, TuneConfig(**cfg))
    return result, read(tmp_path / name)


def strip(records):
    return [{k: v for k, v in r.to_dict().items() if k not in ("time", "versions")}
            for r in records]


def test_config_is_validated():
    with pytest.raises(ValueError, match="trials > 0 must hold, got trials=0"):
        TuneConfig(trials=0)
    with pytest.raises(ValueError, match="sampler must be one of"):
        TuneConfig(sampler="grid")
    with pytest.raises(ValueError, match="mutation_ratio <= 1 must hold, got 1.5"):
        TuneConfig(mutation_ratio=1.5)


def test_baselines_come_first_and_are_logged(tmp_path):
    result, records = run(tmp_path, fork_graph(), tiny_profile(), trials=16, seed=3)
    # acc rejects nothing in the fork graph (all elementwise): two single-unit baselines.
    assert [r.strategy for r in records[:3]] == ["single:cpu", "single:acc", "greedy"]
    assert [r.trial for r in records] == list(range(len(records)))
    assert len(records) == 3 + 16 == result.measured
    best_baseline = min(b.result.latency_s for b in result.baselines.values())
    assert result.best.result.latency_s <= best_baseline


def test_same_seed_same_records(tmp_path):
    _, a = run(tmp_path, fork_graph(), tiny_profile(), "a.jsonl", trials=24, seed=5)
    _, b = run(tmp_path, fork_graph(), tiny_profile(), "b.jsonl", trials=24, seed=5)
    _, c = run(tmp_path, fork_graph(), tiny_profile(), "c.jsonl", trials=24, seed=6)
    assert strip(a) == strip(b)
    assert strip(a) != strip(c)


def test_infeasible_candidates_are_failed_trials_not_crashes(tmp_path):
    prof = tiny_profile(sram_mib=1500 / (1 << 20))  # any two live sram tensors overflow
    result, records = run(tmp_path, chain_graph(), prof, trials=40, seed=0)
    failed = [r for r in records if not r.result.ok]
    assert failed and all(r.result.error.value == "out_of_memory" for r in failed)
    assert result.best.result.ok


def test_resume_continues_the_study(tmp_path):
    storage = f"sqlite:///{tmp_path / 'tune.db'}"
    run(tmp_path, fork_graph(), tiny_profile(), trials=10, seed=1, storage=storage)
    with pytest.raises(SearchError, match="already exists .* --resume"):
        run(tmp_path, fork_graph(), tiny_profile(), trials=20, seed=1, storage=storage)
    _, records = run(tmp_path, fork_graph(), tiny_profile(), trials=20, seed=1,
                     storage=storage, resume=True)
    strategies = [r.strategy for r in records]
    assert strategies.count("greedy") == 1  # baselines are not measured again
    assert strategies.count("tpe") + strategies.count("mutate") == 20
    study = optuna.load_study(study_name=optuna.get_all_study_names(storage)[0], storage=storage)
    assert len(study.trials) == 3 + 20
    assert sorted(r.trial for r in records) == list(range(23))


def test_params_round_trip_through_optuna(tmp_path):
    space = SearchSpace(fork_graph(), tiny_profile())
    dists = distributions(space)
    for _, p in baselines(space):
        params = to_params(space, p)
        assert set(params) <= set(dists)
        assert to_placement(space, {**{k: d.choices[0] for k, d in dists.items()},
                                    **params}) == p


def test_greedy_puts_each_op_on_its_fastest_choice():
    space = SearchSpace(chain_graph(), tiny_profile())
    # acc is 10x faster; its home scope is dram (the default scope, which it can use)
    assert set(greedy(space).ops.values()) == {("acc", "dram")}
    conv = OpGraph(name="g", ops=(Op(name="c", kind="conv2d", flops=1e6, bytes_read=1,
                                     output_bytes=1),), edges=())
    assert greedy(SearchSpace(conv, tiny_profile())).ops == {"c": ("cpu", "dram")}
