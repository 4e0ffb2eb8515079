"""``--objective latency,energy``: a job of several objectives logs and tells the study
every one, keeps capacity and limits as constraints, and ends with their front."""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np
import optuna
import pytest
from factories import op, started_together
from test_fit_repair import soc_with
from test_objective import every_placement, hungry_chain

from autoplace.baselines.optimum import enumerated_front, every_genome
from autoplace.graph import Edge, OpGraph
from autoplace.hardware.load import load_profile
from autoplace.measure.batch import simulate_batch
from autoplace.measure.limits import Limits
from autoplace.measure.objective import ENERGY, LATENCY, PEAK_MEMORY, Objectives, objective_named
from autoplace.measure.simulator import Simulator
from autoplace.models import load_graph
from autoplace.records.front import front, nondominated, significant
from autoplace.records.tuning_log import TuningLog, read
from autoplace.search import TuneConfig, baselines, tune
from autoplace.search.descent import moves
from autoplace.search.job import make_tuner
from autoplace.search.study_storage import open_storage
from autoplace.space import SearchSpace

pytestmark = pytest.mark.filterwarnings("ignore:search stopped after")  # 16 placements in all


def run(tmp_path, space, name, **cfg):
    with TuningLog(tmp_path / name) as log:
        return tune(space, Simulator(space), log, TuneConfig(**{"trials": 24, **cfg}))


def exact_front(points) -> np.ndarray:
    """The points no other dominates once figures are compared to 12 significant digits
    (energy summed in another order differs in the 17th), sorted, equal points once."""
    F = np.unique(significant(np.array(points)), axis=0)
    return F[nondominated(F)]


def figures_of(records, criteria) -> np.ndarray:
    """The front of a tuned front's figures, as :func:`exact_front` takes it."""
    return exact_front([[c.value(r.result) for c in criteria] for r in records])


@pytest.mark.parametrize("spec, says", [
    ("latency,latency", "named twice"),
    ("latency,foo", "no objective 'foo'"),
    ("latency,throughput", "throughput (a stream's period) is searched alone"),
    ("energy,", "no objective ''"),
])
def test_a_bad_spec_is_a_one_line_error_naming_it(spec, says):
    with pytest.raises(ValueError, match=f"objective {spec!r}: .*") as err:
        objective_named(spec)
    assert says in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ValueError, match="named twice|no objective|searched alone"):
        TuneConfig(objective=spec)


def test_several_objectives_by_name():
    goal = objective_named("latency,energy,peak_memory")
    assert isinstance(goal, Objectives) and goal.criteria == (LATENCY, ENERGY, PEAK_MEMORY)
    assert goal.name == "latency,energy,peak_memory" and goal.target == "latency"
    bounded = goal.bounded(Limits(energy_j=6e-3))
    assert bounded.name == "latency,energy,peak_memory --max-energy 0.006"
    assert bounded.criteria == goal.criteria  # (the figures, not the bounded values)
    assert TuneConfig(objective="latency,energy").multi and not TuneConfig().multi
    for setting in ({"sampler": "tpe"}, {"cost_model": "none"}, {"save_model": "m.json"}):
        with pytest.raises(ValueError, match=f"without {next(iter(setting))}="):
            TuneConfig(objective="latency,energy", **setting)


def test_the_simulated_figures_are_the_measured_ones():
    """What the search ranks by (``figures`` of a simulated batch) is what the log records."""
    space = hungry_chain()
    goal = objective_named("latency,energy,peak_memory")
    c, m = space.random_genomes(16, np.random.default_rng(0))
    results = Simulator(space).measure(space.decode_rows(c, m))
    F = goal.figures(simulate_batch(space, c, m))
    assert F.tolist() == [goal.values(r) for r in results]


def test_a_job_of_two_objectives_tells_the_study_both_and_ends_with_their_front(tmp_path):
    space = hungry_chain()
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    result = run(tmp_path, space, "t.jsonl", objective="latency,energy", storage=storage,
                 study_name="s")
    records = read(tmp_path / "t.jsonl")
    assert {r.objective for r in records} == {"latency,energy"}
    study = optuna.load_study(study_name="s", storage=storage)
    assert study.directions == [optuna.study.StudyDirection.MINIMIZE] * 2
    assert study.metric_names == ["latency_s", "energy_j"]
    by_trial = {r.trial: r.result for r in records}
    told = {t.user_attrs["trial"]: t.values for t in study.trials}
    assert told == {n: [r.latency_s, r.energy_j] for n, r in by_trial.items()}
    assert list(result.front) == front(records, (LATENCY, ENERGY))
    # every placement of the 16 was measured: the front is the enumerated one
    assert figures_of(result.front, (LATENCY, ENERGY)) == \
        pytest.approx(exact_front(every_placement(space)), rel=1e-12)


def test_a_job_of_one_objective_writes_no_objective_into_its_records(tmp_path):
    run(tmp_path, hungry_chain(), "t.jsonl", trials=2)
    assert all(r.objective is None for r in read(tmp_path / "t.jsonl"))
    assert '"objective"' not in (tmp_path / "t.jsonl").read_text()


def test_the_limits_still_apply_to_a_front(tmp_path):
    """Beyond a limit a record is logged with its figures, is no point of the front, and
    its study trial fails."""
    space, storage = hungry_chain(), f"sqlite:///{tmp_path / 'study.db'}"
    bound = Limits(latency_s=3.5e-3)
    result = run(tmp_path, space, "t.jsonl", objective="latency,energy", limits=bound,
                 storage=storage, study_name="s")
    kept = [p for p in every_placement(space) if p[0] <= 3.5e-3]
    assert 0 < len(kept) < 16
    assert figures_of(result.front, (LATENCY, ENERGY)) == \
        pytest.approx(exact_front(kept), rel=1e-12)
    study = optuna.load_study(study_name="s", storage=storage)
    failed = {t.user_attrs["trial"] for t in study.trials
              if t.state == optuna.trial.TrialState.FAIL}
    assert failed == {r.trial for r in read(tmp_path / "t.jsonl")
                      if r.result.latency_s > 3.5e-3}


def test_every_worker_of_a_multi_objective_study_has_its_sampler(tmp_path):
    """Optuna gives a study loaded without a sampler NSGA-II: each worker passes its own."""
    space = hungry_chain()
    config = TuneConfig(trials=4, objective="latency,energy", worker=True,
                        storage=f"journal:{tmp_path / 'j.log'}")
    for k in range(2):
        with TuningLog(tmp_path / f"w{k}.jsonl") as log:
            tuner = make_tuner(space, Simulator(space), log, config)
            assert isinstance(tuner.store.study.sampler, optuna.samplers.TPESampler)
            assert len(tuner.store.study.directions) == 2
            tuner.shared.close()


# -- the search: the front found, not sampled -------------------------------------------------
def branchy() -> SearchSpace:
    """S -> (A, B, C, D) -> J -> (E, F) -> K (1, 2, 3, 4, 5, 1, 2, 6, 1 MFLOP) on
    :func:`hungry_chain`'s profile (cpu 1 W, acc 5 W, no copies): 512 placements, whose
    latency depends on how the branches share the two units."""
    flops = {"S": 1, "A": 2, "B": 3, "C": 4, "D": 5, "J": 1, "E": 2, "F": 6, "K": 1}
    ops = tuple(op(name, f * 1e6, 1000, 1000) for name, f in flops.items())
    pairs = [(0, 1), (0, 2), (0, 3), (0, 4), (1, 5), (2, 5), (3, 5), (4, 5), (5, 6), (5, 7),
             (6, 8), (7, 8)]
    edges = tuple(Edge(src=a, dst=b, nbytes=1000) for a, b in pairs)
    return SearchSpace(OpGraph(name="branchy", ops=ops, edges=edges), hungry_chain().profile)


@pytest.mark.parametrize("spec", ["latency,energy", "latency,energy,peak_memory"])
def test_the_tuned_front_is_the_enumerated_exact_front(tmp_path, spec):
    """64 trials of 512 placements find every point of the exact front."""
    space = branchy()
    assert int(np.prod(space.n_choices)) == 512
    exact = enumerated_front(space, objective_named(spec))
    assert len(exact) >= 15  # (a front worth finding)
    result = run(tmp_path, space, "t.jsonl", objective=spec, trials=64)
    criteria = objective_named(spec).criteria
    assert figures_of(result.front, criteria) == pytest.approx(exact, rel=1e-12)
    assert len(read(tmp_path / "t.jsonl")) <= 64 + 3  # (and the baselines)


@pytest.mark.parametrize("hw, points", [("soc", 2), ("biglittle", 6), ("host", 2)])
def test_the_tuned_front_of_the_seed_te_example_is_its_exact_front(tmp_path, hw, points):
    """The seed thread's TE example (four elementwise ops; 29,216 placements on soc, copy
    modes counted): 64 trials find every point of the front of every placement."""
    space = SearchSpace(load_graph("seed_te"), load_profile(hw))
    exact = enumerated_front(space, objective_named("latency,energy"))
    assert len(exact) == points
    result = run(tmp_path, space, "t.jsonl", objective="latency,energy", trials=64)
    assert figures_of(result.front, (LATENCY, ENERGY)) == pytest.approx(exact, rel=1e-12)


def test_every_placement_is_enumerated_once():
    """Each op's every choice and every mode of the copies it makes: distinct placements,
    among them every random genome's."""
    space = SearchSpace(load_graph("seed_te"), load_profile("soc"))
    choice, mode = every_genome(space, 1 << 20)
    keys = space.keys(choice, space.normalize(choice, mode))
    assert len(set(keys)) == len(keys) == 29_216 < int(np.prod(space.n_choices)) * 2 ** 4
    c, m = space.random_genomes(256, np.random.default_rng(0))
    assert set(space.keys(c, space.normalize(c, m))) <= set(keys)
    with pytest.raises(ValueError, match="29,216 placements, more than the 10,000"):
        every_genome(space, 10_000)


def neighbours_dominating(space: SearchSpace, rec, spec: str) -> int:
    """How many one-op moves of a record's placement dominate it (simulated; figures to 12
    significant digits, as :func:`exact_front` compares them)."""
    goal = objective_named(spec)
    c, m = space.encode([rec.placement])
    C, M = moves(space, c[0], space.normalize(c, m)[0])
    out = simulate_batch(space, C, M)
    F, here = significant(goal.figures(out)), significant(goal.values(rec.result))
    ok = goal.feasible(space, out)
    return int((ok & (F <= here).all(axis=1) & (F < here).any(axis=1)).sum())


@pytest.mark.parametrize("model, hw, spec, trials", [
    ("squeezenet", "biglittle", "latency,energy", 64),
    ("squeezenet", "soc", "latency,energy,peak_memory", 64),
])
def test_no_point_of_a_tuned_front_is_dominated_by_a_one_op_move(tmp_path, model, hw, spec,
                                                                 trials):
    space = SearchSpace(load_graph(model), load_profile(hw))
    result = run(tmp_path, space, "t.jsonl", objective=spec, trials=trials)
    assert len(result.front) >= 3
    assert [neighbours_dominating(space, r, spec) for r in result.front] == \
        [0] * len(result.front)


class Crash(Exception):
    pass


class CrashesAfter(TuningLog):
    """A log whose job dies right after writing trial ``at``."""

    def __init__(self, path, at: int):
        super().__init__(path)
        self.at = at

    def append(self, record):
        super().append(record)
        if record.trial == self.at:
            raise Crash


@pytest.mark.parametrize("storage", [False, True])
def test_a_resumed_job_of_two_objectives_measures_what_the_uninterrupted_one_does(tmp_path,
                                                                                 storage):
    """Killed after a baseline and mid-round twice, resumed each time: the same
    candidates, trial numbers and figures as the job run through (and with a study: every
    record in it, told both figures)."""
    space = SearchSpace(load_graph("squeezenet"), load_profile("biglittle"))
    url = f"sqlite:///{tmp_path / 'study.db'}" if storage else None
    config = TuneConfig(trials=40, objective="latency,energy", seed=3)
    with TuningLog(tmp_path / "full.jsonl") as log:
        full = tune(space, Simulator(space), log, config)
    config = replace(config, storage=url, study_name="s" if storage else None)
    for k, at in enumerate((1, 13, 30)):
        with CrashesAfter(tmp_path / "t.jsonl", at) as log, pytest.raises(Crash):
            tune(space, Simulator(space), log, replace(config, resume=bool(k)))
    with TuningLog(tmp_path / "t.jsonl") as log:
        resumed = tune(space, Simulator(space), log, replace(config, resume=True))
    if storage:
        told = {t.user_attrs["trial"]: t.values
                for t in optuna.load_study(study_name="s", storage=url).trials}
        goal = objective_named("latency,energy")
        assert told == {r.trial: goal.values(r.result) for r in read(tmp_path / "t.jsonl")}

    def measured(path):
        return [(r.trial, r.strategy, r.placement, r.result.latency_s, r.result.energy_j)
                for r in read(path)]

    assert measured(tmp_path / "t.jsonl") == measured(tmp_path / "full.jsonl")
    assert [r.trial for r in resumed.front] == [r.trial for r in full.front]
    assert all(r.result.ok for r in read(tmp_path / "t.jsonl")
               if r.strategy not in ("single:big", "single:little", "greedy"))  # (it fits)


def test_figures_are_compared_to_twelve_significant_digits():
    """Energy summed in another order differs in the 17th digit: no point of its own."""
    a, b = 0.1 + 0.2 + 0.3, 0.3 + 0.2 + 0.1
    assert a != b and significant(np.array([a]))[0] == significant(np.array([b]))[0]
    F = significant(np.array([[4.95e-3, a], [4.95e-3, b], [0.0, np.inf]]))
    assert nondominated(F).tolist() == [True, False, True]
    assert significant(np.array([123456789012345.0]))[0] == 123456789012000.0


def test_best_and_its_pick_weigh_the_objectives_the_job_searched(tmp_path, capsys):
    """``best --pareto`` and ``--pick knee`` of a job of several objectives weigh those its
    records name (no --criteria), what tune printed; --criteria still chooses others."""
    from autoplace.cli.main import main

    log = str(tmp_path / "t.jsonl")
    assert main(["tune", "squeezenet", "--hw", "soc", "--objective", "latency,peak_memory",
                 "--trials", "16", "--log", log, "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "over latency, peak_memory" in printed and f"best {log} --pareto " in printed
    table = printed[printed.index("the front of"):printed.index("next:")]
    assert main(["best", log, "--pareto"]) == 0
    assert capsys.readouterr().out.startswith(f"squeezenet on soc (simulator): {table}")
    knee = next(line.split()[0] for line in table.splitlines() if "knee" in line)
    assert main(["best", log, "--pick", "knee"]) == 0
    assert f"trial {knee}," in capsys.readouterr().out
    assert main(["best", log, "--pareto", "--criteria", "latency,energy"]) == 0
    assert "over latency, energy" in capsys.readouterr().out


def test_two_workers_search_one_front(tmp_path):
    """Two ``--worker`` processes on one journal: no placement measured twice, every
    baseline's placement once, ``--trials`` the study's total, each trial told both
    figures. They start together (:func:`factories.started_together`, held at their first
    line), and the study is long (300 trials, ~3 s of one worker's search) beside the set-up
    after that line (the simulator's kernels loaded, the study opened: ~0.3 s, more under
    load), in which the other worker may run ahead: with 48 trials one worker measured them
    all, once in five CI runs."""
    storage, trials = f"journal:{tmp_path / 'study.journal'}", 300
    logs = [tmp_path / f"w{k}.jsonl" for k in range(2)]
    procs = started_together([["tune", "squeezenet", "--hw", "biglittle", "--objective",
                               "latency,energy", "--trials", trials, "--batch-size", 4,
                               "--storage", storage, "--worker", "--log", log,
                               "--no-progress"] for log in logs], "tuning squeezenet")
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
    records = [r for log in logs for r in read(log)]
    assert all(log.stat().st_size for log in logs)  # both measured
    space = SearchSpace(load_graph("squeezenet"), load_profile("biglittle"))
    choice, mode = space.encode([r.placement for r in records])
    keys = space.keys(choice, space.normalize(choice, mode))
    assert len(set(keys)) == len(keys) and len({r.trial for r in records}) == len(records)
    named = baselines(space)  # (on biglittle greedy's placement is single:big's: measured once)
    c, m = space.encode([p for _, p in named])
    distinct = set(space.keys(c, space.normalize(c, m)))
    base = [k for r, k in zip(records, keys) if r.strategy in {n for n, _ in named}]
    assert sorted(base) == sorted(distinct) and len(distinct) == 2
    assert len(records) - len(base) == trials
    (name,) = optuna.get_all_study_names(open_storage(storage))
    study = optuna.load_study(study_name=name, storage=open_storage(storage))
    told = {t.number: t.values for t in study.trials if t.user_attrs.get("strategy")}
    goal = objective_named("latency,energy")
    assert told == {r.trial: goal.values(r.result) for r in records}


def test_the_two_figure_dominance_test_is_the_general_one():
    """The sorted sweep for two figures gives what comparing every pair gives (with
    ties: figures drawn from a few values)."""
    from autoplace.records.front import weakly_dominated

    rng = np.random.default_rng(0)
    F, front = rng.integers(0, 6, (400, 2)).astype(float), rng.integers(1, 6, (9, 2))
    pad = np.zeros((len(F), 1))  # a third figure all equal: the general path
    assert weakly_dominated(F, front.astype(float)).tolist() == \
        weakly_dominated(np.hstack([F, pad]), np.hstack([front, pad[:9]])).tolist()
    assert 0 < weakly_dominated(F, front.astype(float)).sum() < 400


@pytest.mark.parametrize("hw, seeded", [("soc", True), ("npu", False), ("host", False),
                                        ("biglittle", False)])
def test_the_least_latency_branch_and_bound_proves_is_a_seed(hw, seeded):
    """seed_te: after the baselines, a round proposes the placement of least latency over
    all placements (``seed:exact``) where neither a baseline nor HEFT's start (proposed
    first) reaches it (on soc; on host, recalibrated for the NCHWc kernels with a hand-over
    of 23.6 us, a baseline does)."""
    from autoplace.baselines.optimum import optimum
    from autoplace.search.heft_start import heft_start
    from autoplace.search.pareto_search import ParetoSearch
    from autoplace.search.strategy import Proposal

    space = SearchSpace(load_graph("seed_te"), load_profile(hw))
    search = ParetoSearch(space, objective_named("latency,energy"), seed=0)
    c, m = space.encode([p for _, p in baselines(space)])
    out = simulate_batch(space, c, m)
    measured = out.latency
    search.observe(Proposal(choice=c, mode=m, labels=("baseline",) * len(c)),
                   np.column_stack([out.latency, out.energy]))
    least = optimum(space).latency_s
    heft = simulate_batch(space, *heft_start(space)).latency[0]
    assert (min(measured.min(), heft) > least * (1 + 1e-9)) == seeded
    got = search.propose(8)
    assert ("seed:exact" in got.labels) == seeded
    if seeded:
        i = got.labels.index("seed:exact")
        latency = simulate_batch(space, got.choice[i:i + 1], got.mode[i:i + 1]).latency[0]
        assert latency == pytest.approx(least, rel=1e-12)


def test_a_front_job_where_no_baseline_fits_moves_toward_fitting_then_builds_its_front(
        tmp_path):
    """squeezenet on soc with 3 MiB of DRAM and 4 of SRAM: no baseline fits. The front
    search asked for the moves of a front of no point and died with a traceback (numpy
    broadcasting); now the loop's fit repair finds placements that fit and the search
    builds a front from them, spending its whole budget."""
    space = soc_with(tmp_path, 3, 4)
    result = run(tmp_path, space, "t.jsonl", trials=64, seed=0, objective="latency,energy")
    records = read(tmp_path / "t.jsonl")
    before = [r for r in records if r.strategy in result.baselines]
    assert before and not any(r.result.ok for r in before)
    assert len(records) >= 64 and len(result.front) >= 3
    assert all(r.result.ok for r in result.front)


def test_a_front_job_whose_moves_run_dry_wanders_and_spends_its_whole_budget(tmp_path):
    """squeezenet on soc with 8 MiB of DRAM and 1 MiB SRAMs: after 75 trials every one-op
    move of the front was measured, the scalarised descents ended at measured points and
    no random placement fitted; the job stopped there, "no unmeasured candidate left to
    propose" (as densenet121 on the shipped soc did after 475 of 1,024). Now the round is
    filled by descents from any measured point after longer kicks (``wander``)."""
    space = soc_with(tmp_path, 8, 1)
    with pytest.warns() as said:
        warnings.simplefilter("always")
        result = run(tmp_path, space, "t.jsonl", trials=128, seed=0,
                     objective="latency,energy")
    records = read(tmp_path / "t.jsonl")
    assert not [w for w in said if "search stopped" in str(w.message)]
    assert len(records) == len(baselines(space)) + 128
    choice, mode = space.encode([r.placement for r in records])
    keys = space.keys(choice, space.normalize(choice, mode))
    assert len(set(keys)) == len(records)  # nothing measured twice
    wandered = [r for r in records if r.strategy == "wander"]
    assert 0 < len(wandered) < 128 / 4  # only what the other steps leave short of a round
    assert len(result.front) > 6  # (the front the job stopped with)
