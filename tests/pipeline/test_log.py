"""The pipeline search's log: the tuner's records, read back as trials; logs of before."""

from __future__ import annotations

import json
import warnings

import pytest

from autoplace.hardware.load import load_profile
from autoplace.measure import ErrorKind
from autoplace.measure.objective import THROUGHPUT
from autoplace.models import load_graph
from autoplace.pipeline import MeshMachine, PipelinePlan, Stage, StageCosts, best_pipeline
from autoplace.pipeline.log import (
    LEGACY_KIND,
    MEASURER,
    TrialLog,
    TrialLogError,
    best_plan,
    known_trials,
    read_lines,
    trial_of,
)
from autoplace.pipeline.plan_search import PipelineSearch, Trial, measure
from autoplace.records.tuning_log import RecordError, best, read
from autoplace.reports import analysis


@pytest.fixture(scope="module")
def mesh():
    profile = load_profile("mesh")
    return profile, StageCosts(load_graph("squeezenet"), MeshMachine.of(profile))


@pytest.fixture(scope="module")
def logged(mesh, tmp_path_factory):
    """40 trials of a search, logged, and the search."""
    profile, costs = mesh
    path = tmp_path_factory.mktemp("log") / "pipe.jsonl"
    log = TrialLog(path, costs, profile_hash=profile.hash, seed=3)
    search = PipelineSearch(costs, costs.machine.size, seed=3, on_trial=log)
    search.run(best_pipeline(costs), 40)
    log.close()
    return path, search


def test_every_trial_is_a_tuner_record_of_its_plan(mesh, logged):
    profile, costs = mesh
    path, search = logged
    records = read(path)
    trials = sorted(search.seen.values(), key=lambda t: t.number)
    assert [r.trial for r in records] == [t.number for t in trials]
    assert [r.strategy for r in records] == [t.move for t in trials]
    assert {r.measurer for r in records} == {MEASURER} and len({r.run for r in records}) == 1
    assert {r.profile_hash for r in records} == {profile.hash}
    for r, t in zip(records, trials):
        stages = [tuple(s[:3]) for s in r.pipeline["stages"]]
        assert stages == [(s.start, s.end, s.pes) for s in t.plan.stages]
        assert r.pipeline["status"] == t.status and not r.placement.ops
        if t.status == "ok":  # seconds per inference over every copy: 1 / throughput
            assert r.result.period_s == pytest.approx(1 / t.throughput, rel=1e-12)
        else:
            assert r.result.period_s is None
    df = analysis.load(path)  # read as any tuning log
    plan, top = best_plan(path, costs, profile.hash)
    assert df.loc[df["period_s"].idxmin(), "trial"] == top["trial"]
    assert plan == search.best.plan
    assert best(records, objective=THROUGHPUT).trial == top["trial"]
    assert best(records, objective=THROUGHPUT, plans=False) is None  # a plan is no placement


def test_a_plan_too_big_for_its_pes_is_an_out_of_memory_record(mesh, tmp_path):
    profile, costs = mesh
    plan = PipelinePlan(stages=(Stage(0, costs.n, 1),))  # every weight on one PE
    status, period, analytic, throughput = measure(plan, costs)
    assert status == "no-fit"
    log = TrialLog(tmp_path / "p.jsonl", costs, profile_hash=profile.hash, seed=0)
    log(Trial(number=0, move="dp", plan=plan, status=status, period_s=period,
              analytic_period_s=analytic, throughput=throughput))
    log.close()
    (rec,) = read(tmp_path / "p.jsonl")
    assert rec.result.error is ErrorKind.OUT_OF_MEMORY
    assert "stage 0 needs" in rec.result.detail and "2,097,152" in rec.result.detail
    assert best([rec]) is None and best([rec], objective=THROUGHPUT) is None


def test_a_log_of_before_the_records_reads_the_same(mesh, logged, tmp_path):
    profile, costs = mesh
    path, _ = logged
    now = read_lines(path)
    old = tmp_path / "old.jsonl"
    with old.open("w") as f:
        for x in now:  # the line as the search wrote it before it wrote records
            f.write(json.dumps({"kind": LEGACY_KIND, **{k: v for k, v in x.items()
                                                       if k != "run"}}) + "\n")
    assert [trial_of(x) for x in read_lines(old)] == [trial_of(x) for x in now]
    assert known_trials(old, costs, profile.hash) == known_trials(path, costs, profile.hash)


def test_a_search_run_again_keeps_its_run_and_a_torn_line_is_cut(mesh, logged, tmp_path):
    profile, costs = mesh
    path = tmp_path / "p.jsonl"
    path.write_bytes(logged[0].read_bytes() + b'{"schema": 2, "ru')
    with pytest.warns(UserWarning, match="torn last line"):
        assert len(read_lines(path)) == 40
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        log = TrialLog(path, costs, profile_hash=profile.hash, seed=3)
    search = PipelineSearch(costs, costs.machine.size, seed=3, on_trial=log, known=log.known())
    search.run(best_pipeline(costs), 50)
    log.close()
    records = read(path)
    assert [r.trial for r in records] == list(range(50))
    assert len({r.run for r in records}) == 1
    fresh = TrialLog(tmp_path / "q.jsonl", costs, profile_hash=profile.hash, seed=3, run="r1")
    assert fresh.run == "r1"
    fresh.close()


def test_a_tuning_record_is_not_a_pipeline_trial(mesh, logged, tmp_path):
    profile, costs = mesh
    path = tmp_path / "mixed.jsonl"
    line = json.loads(logged[0].read_text().splitlines()[0])
    del line["pipeline"]
    path.write_text(logged[0].read_text() + json.dumps(line) + "\n")
    with pytest.raises(TrialLogError,
                       match=r"mixed.jsonl:41: corrupt record: not a pipeline trial"):
        TrialLog(path, costs, profile_hash=profile.hash, seed=0)
    line["pipeline"] = {"stages": [[0, costs.n, 2, None]], "replicas": 1, "status": "ok",
                        "period_s": -1.0, "analytic_period_s": 1.0}
    path.write_text(json.dumps(line) + "\n")
    with pytest.raises(TrialLogError, match=r"mixed.jsonl:1: corrupt record: 'pipeline "
                                            r"period_s' must be a finite number >= 0, got -1.0"):
        read_lines(path)
    for stages, wrong in (([["a", 3, 2, None]], "a pipeline stage's start must be an integer"),
                          ([[0, 3, 2, 5]], "a pipeline stage's splits must be a list or null"),
                          ([[0, 3]], r"a pipeline stage is \[start, end, pes, splits, "
                                     r"units, streamed\]"),
                          ([[0, 3, 2, None, [1]]], "a pipeline stage's units must be unit names")):
        line["pipeline"].update(stages=stages, period_s=1.0)
        path.write_text(json.dumps(line) + "\n")
        with pytest.raises(RecordError, match=f"mixed.jsonl:1: corrupt record: {wrong}"):
            read(path)  # the tuner's reader: autoplace best, analysis.load
        with pytest.raises(RecordError, match=wrong):
            analysis.load(path)
