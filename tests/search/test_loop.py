"""The search: baselines first, determinism, failures as failed trials, resume, the model."""

from __future__ import annotations

import json
import warnings

import optuna
import pytest
from factories import chain_graph, fork_graph, tiny_profile

from autoplace.baselines.heft import heft
from autoplace.hardware.load import load_profile
from autoplace.measure import MeasurementStopped, Measurer
from autoplace.measure.simulator import Simulator
from autoplace.models import load_graph
from autoplace.records.tuning_log import TuningLog, read
from autoplace.search import (
    SearchError,
    TuneConfig,
    baselines,
    distributions,
    to_params,
    to_placement,
    tune,
)
from autoplace.search.config import COSTLY_BATCH, FREE_BATCH
from autoplace.space import SearchSpace

SAMPLERS = [dict(), dict(sampler="tpe", cost_model="none"), dict(sampler="tpe")]


def run(tmp_path, graph, profile, name="log.jsonl", **cfg):
    space = SearchSpace(graph, profile)
    with TuningLog(tmp_path / name) as log:
        result = tune(space, Simulator(space), log, TuneConfig(**cfg))
    return result, read(tmp_path / name)


def strip(records):
    return [{k: v for k, v in r.to_dict().items() if k not in ("time", "versions", "run")}
            for r in records]


def test_config_is_validated():
    with pytest.raises(ValueError, match="trials >= 0 must hold, got trials=-1"):
        TuneConfig(trials=-1)
    with pytest.raises(ValueError, match="sampler must be one of"):
        TuneConfig(sampler="grid")
    with pytest.raises(ValueError, match="mutation_ratio <= 1 must hold, got 1.5"):
        TuneConfig(mutation_ratio=1.5)
    with pytest.raises(ValueError, match="cost_model must be one of .* got cost_model='gp'"):
        TuneConfig(cost_model="gp")
    with pytest.raises(ValueError, match="candidates > 0 must hold, got candidates=0"):
        TuneConfig(candidates=0)
    with pytest.raises(ValueError, match="warm_start must be a tuple"):
        TuneConfig(warm_start=["a.jsonl"])
    with pytest.raises(ValueError, match="save_model must end in .json or .ubj, got 'm.pkl'"):
        TuneConfig(save_model="m.pkl")


@pytest.mark.parametrize("cfg", SAMPLERS, ids=["evolve", "tpe", "tpe+xgb"])
def test_baselines_come_first_and_are_logged(tmp_path, cfg):
    result, records = run(tmp_path, fork_graph(), tiny_profile(), trials=16, seed=3, **cfg)
    # acc rejects nothing in the fork graph (all elementwise): two single-unit baselines.
    assert [r.strategy for r in records[:3]] == ["single:cpu", "single:acc", "greedy"]
    assert [r.trial for r in records] == list(range(len(records)))
    assert len(records) == 3 + 16 == result.measured
    best_baseline = min(b.result.latency_s for b in result.baselines.values())
    assert result.best.result.latency_s <= best_baseline


def test_heft_is_the_first_search_candidate(tmp_path):
    graph, profile = load_graph("squeezenet"), load_profile("soc")
    result, records = run(tmp_path, graph, profile, trials=8)
    # cpu1 is the host, so cpu2 is not its twin: each has a single-unit baseline
    assert [r.strategy for r in records[:3]] == ["single:cpu1", "single:cpu2", "greedy"]
    assert records[3].strategy == "heft"
    assert records[3].placement == heft(SearchSpace(graph, profile))
    assert result.baselines["heft"].trial == records[3].trial == 3
    # 8 trials are all in the descent rounds: heft is measured as it is, others may not be
    assert {r.strategy for r in records[4:]} <= {"evolve", "explore", "descent"}
    assert result.best.result.latency_s < records[2].result.latency_s  # the search helps


@pytest.mark.parametrize("cfg", SAMPLERS, ids=["evolve", "tpe", "tpe+xgb"])
def test_same_seed_same_records(tmp_path, cfg):
    _, a = run(tmp_path, fork_graph(), tiny_profile(), "a.jsonl", trials=24, seed=5, **cfg)
    _, b = run(tmp_path, fork_graph(), tiny_profile(), "b.jsonl", trials=24, seed=5, **cfg)
    _, c = run(tmp_path, fork_graph(), tiny_profile(), "c.jsonl", trials=24, seed=6, **cfg)
    assert strip(a) == strip(b)
    assert strip(a) != strip(c)


def test_same_seed_same_records_on_a_real_model(tmp_path):
    graph, profile = load_graph("squeezenet"), load_profile("mesh")
    _, a = run(tmp_path, graph, profile, "a.jsonl", trials=40, seed=2)
    _, b = run(tmp_path, graph, profile, "b.jsonl", trials=40, seed=2)
    assert strip(a) == strip(b)


@pytest.mark.parametrize("cfg", SAMPLERS, ids=["evolve", "tpe", "tpe+xgb"])
def test_infeasible_candidates_are_failed_trials_not_crashes(tmp_path, cfg):
    prof = tiny_profile(sram_mib=1500 / (1 << 20))  # any two live sram tensors overflow
    with warnings.catch_warnings():  # evolve may run out of placements that fit
        warnings.simplefilter("ignore", UserWarning)
        result, records = run(tmp_path, chain_graph(), prof, trials=40, seed=0, **cfg)
    failed = [r for r in records if not r.result.ok]
    assert all(r.result.error.value == "out_of_memory" for r in failed)
    assert result.best.result.ok
    if cfg:  # Optuna's samplers do propose overflows: failed trials, not crashes
        assert failed
    else:  # evolve proposes only placements that fit (baselines and HEFT are fixed)
        assert {r.strategy for r in failed} <= {"heft", "greedy", "single:acc"}
        assert any(r.strategy in ("evolve", "explore") for r in records)


def test_a_space_smaller_than_the_budget_stops_with_a_warning(tmp_path):
    # chain on tiny: 3 choices per op, 27 op assignments, some with two copy modes
    with pytest.warns(UserWarning, match="no unmeasured candidate left"):
        result, records = run(tmp_path, chain_graph(), tiny_profile(), trials=500,
                              cost_model="none")
    keys = [r.placement.to_json() for r in records]
    search = keys[3:]  # (greedy is single:acc here: baselines may repeat each other)
    assert len(set(search)) == len(search) < 500 and not set(search) & set(keys[:3])


@pytest.mark.parametrize("cfg", SAMPLERS[:2], ids=["evolve", "tpe"])
def test_resume_continues_the_study(tmp_path, cfg):
    storage = f"sqlite:///{tmp_path / 'tune.db'}"
    run(tmp_path, fork_graph(), tiny_profile(), trials=10, seed=1, storage=storage, **cfg)
    with pytest.raises(SearchError, match="already exists .* --resume"):
        run(tmp_path, fork_graph(), tiny_profile(), trials=20, seed=1, storage=storage, **cfg)
    _, records = run(tmp_path, fork_graph(), tiny_profile(), trials=20, seed=1,
                     storage=storage, resume=True, **cfg)
    strategies = [r.strategy for r in records]
    assert strategies.count("greedy") == 1  # baselines are not measured again
    assert len(records) == 3 + 20
    study = optuna.load_study(study_name=optuna.get_all_study_names(storage)[0], storage=storage)
    measured = [t for t in study.trials if t.user_attrs.get("strategy")]
    assert len(measured) == 3 + 20  # (TPE's repeats are finished trials without a strategy)
    assert sorted(t.user_attrs["trial"] for t in measured) == list(range(23))
    assert sorted(r.trial for r in records) == list(range(23))
    if not cfg:  # evolve never measures a placement twice, across the resume too
        keys = [r.placement.to_json() for r in records[3:]]  # (greedy is single:acc here)
        assert len(set(keys)) == len(keys)


def test_every_measured_candidate_is_an_optuna_trial(tmp_path):
    storage = f"sqlite:///{tmp_path / 'tune.db'}"
    space = SearchSpace(fork_graph(), tiny_profile())
    _, records = run(tmp_path, fork_graph(), tiny_profile(), trials=12, storage=storage)
    study = optuna.load_study(study_name=optuna.get_all_study_names(storage)[0], storage=storage)
    assert [t.value for t in study.trials] == [r.result.latency_s for r in records]
    for t, r in zip(study.trials, records):
        assert t.user_attrs["strategy"] == r.strategy
        assert space.decode(*space.parse_genome(t.user_attrs["genome"])) == r.placement


def test_ranking_quality_goes_to_a_side_file(tmp_path):
    per_round = FREE_BATCH
    result, records = run(tmp_path, load_graph("squeezenet"), load_profile("soc"),
                          trials=4 * per_round, descent=0)  # every round the strategy's
    lines = [json.loads(x) for x in (tmp_path / "log.model.jsonl").read_text().splitlines()]
    assert len(lines) == len(result.stats) == 4
    # after 3 baselines (single:cpu1, single:cpu2, greedy), a batch a round (HEFT in the first)
    assert [x["measured"] for x in lines] == [3 + per_round * (k + 1) for k in range(4)]
    assert all(x["batch"] == per_round and x["failed"] <= per_round for x in lines)
    assert all(x["spearman"] is None or -1 <= x["spearman"] <= 1 for x in lines)
    _, none = run(tmp_path, fork_graph(), tiny_profile(), "none.jsonl", trials=8,
                  cost_model="none")
    assert not (tmp_path / "none.model.jsonl").exists()


def test_params_round_trip_through_optuna(tmp_path):
    space = SearchSpace(fork_graph(), tiny_profile())
    dists = distributions(space)
    for _, p in baselines(space):
        params = to_params(space, p)
        assert set(params) <= set(dists)
        assert to_placement(space, {**{k: d.choices[0] for k, d in dists.items()},
                                    **params}) == p


def test_an_evolve_job_resumes_a_tpe_study(tmp_path):
    storage = f"sqlite:///{tmp_path / 'tune.db'}"
    graph, profile = load_graph("seed_te"), load_profile("soc")
    _, first = run(tmp_path, graph, profile, "a.jsonl", trials=12, storage=storage,
                   sampler="tpe", cost_model="none")
    _, second = run(tmp_path, graph, profile, "b.jsonl", trials=30, storage=storage,
                    resume=True)
    assert len(second) == 30 - 12 and second[0].trial == 5 + 12
    tpe = {r.placement.to_json() for r in first[4:]}
    assert not tpe & {r.placement.to_json() for r in second}  # replayed: not measured again


def test_a_round_measures_16_with_the_simulator_8_with_a_costly_measurer_or_a_front(
        tmp_path):
    space = SearchSpace(load_graph("squeezenet"), load_profile("soc"))

    def rounds(measurer, name, **cfg):
        with TuningLog(tmp_path / f"{name}.jsonl") as log:
            tune(space, measurer, log, TuneConfig(trials=32, seed=0, descent=0, **cfg))
        side = (tmp_path / f"{name}.model.jsonl").read_text().splitlines()
        return [json.loads(x)["batch"] for x in side]

    assert rounds(Simulator(space), "free") == [FREE_BATCH] * 2 == [16, 16]
    assert rounds(_StopsAfter(space, 10**6), "costly") == [COSTLY_BATCH] * 4 == [8] * 4
    assert rounds(Simulator(space), "told", batch_size=4) == [4] * 8
    assert TuneConfig(objective="latency,energy").with_batch(True).batch_size == COSTLY_BATCH
    assert TuneConfig(batch_size=4).with_batch(False).batch_size == 4


class _StopsAfter(Measurer):
    """The simulator, until ``left`` candidates are measured; then it stops mid-batch, the
    way the RPC measurer does when its last server dies."""

    name = "simulator"

    def __init__(self, space, left: int):
        self.sim, self.left = Simulator(space), left

    def measure(self, placements):
        results = self.sim.measure(placements)
        if len(placements) <= self.left:
            self.left -= len(placements)
            return results
        partial = results[:self.left] + [None] * (len(placements) - self.left)
        self.left = 0
        raise MeasurementStopped("no server left; run again with --resume", partial)


@pytest.mark.parametrize("cfg", SAMPLERS[:2], ids=["evolve", "tpe"])
def test_a_stopped_measurer_keeps_its_partial_batch_and_the_job_resumes(tmp_path, cfg):
    storage = f"sqlite:///{tmp_path / 'tune.db'}"
    space = SearchSpace(fork_graph(), tiny_profile())
    n_base = len(baselines(space))
    with TuningLog(tmp_path / "a.jsonl") as log, pytest.raises(MeasurementStopped):
        tune(space, _StopsAfter(space, n_base + 8 + 3), log,
             TuneConfig(trials=24, seed=2, storage=storage, **cfg))
    first = read(tmp_path / "a.jsonl")
    assert len(first) == n_base + 8 + 3  # a whole batch, then 3 of the next one
    _, second = run(tmp_path, fork_graph(), tiny_profile(), "b.jsonl", trials=24, seed=2,
                    storage=storage, resume=True, **cfg)
    assert len(second) == 24 - 8 - 3  # the search trials still to do, no baseline again
    trials = [r.trial for r in first + second]
    assert len(set(trials)) == len(trials)
    study = optuna.load_study(study_name=optuna.get_all_study_names(storage)[0], storage=storage)
    measured = [t for t in study.trials if t.user_attrs.get("strategy")]
    assert len(measured) == len(trials)  # the batch's unmeasured rest left no result
    if not cfg:  # evolve replays the partial batch: none of it is measured again
        keys = [r.placement.to_json() for r in (first + second)[n_base:]]
        assert len(set(keys)) == len(keys)


def test_each_run_has_its_id_and_a_resumed_run_keeps_it(tmp_path):
    g, p = fork_graph(), tiny_profile()
    run(tmp_path, g, p, trials=3, seed=1)
    with pytest.raises(SearchError, match=r"already holds 6 records \(of fork on tiny "
                       r"\(simulator\)\); --resume continues its job, --append adds"):
        run(tmp_path, g, p, trials=3, seed=2)  # a second run on the log: only when asked
    assert len(read(tmp_path / "log.jsonl")) == 6
    run(tmp_path, g, p, trials=3, seed=2, append=True)  # a new run on the same log
    first, second = read(tmp_path / "log.jsonl"), None
    runs = list(dict.fromkeys(r.run for r in first))
    assert len(runs) == 2 and all(len(x) == 12 for x in runs)
    run(tmp_path, g, p, trials=9, seed=2, resume=True)  # continues the job: the last run
    second = read(tmp_path / "log.jsonl")
    assert len(second) > len(first)
    assert {r.run for r in second[len(first):]} == {runs[1]}
    assert all(r.schema == 2 for r in second)


def test_best_says_when_logs_hold_several_jobs(tmp_path):
    import subprocess
    import sys

    run(tmp_path, fork_graph(), tiny_profile(), name="a.jsonl", trials=2, seed=1)
    run(tmp_path, chain_graph(), tiny_profile(), name="b.jsonl", trials=2, seed=1)
    proc = subprocess.run([sys.executable, "-m", "autoplace", "best", str(tmp_path / "a.jsonl"),
                           str(tmp_path / "b.jsonl")], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "holds 2 jobs (graph, profile version, measurer)" in proc.stdout
    assert "fork on tiny (simulator)" in proc.stdout and "chain on tiny (simulator)" in proc.stdout


def test_a_ctrl_c_that_numba_wrapped_is_still_a_ctrl_c():
    from autoplace.search.interrupt import from_ctrl_c

    # how it comes out of a numba kernel that was calling back into Python at the time
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as inner:
            raise SystemError("returned a result with an exception set") from inner
    except SystemError as exc:
        assert from_ctrl_c(exc)
    assert not from_ctrl_c(SystemError("a bug of its own"))
    assert from_ctrl_c(KeyboardInterrupt())
