"""The pipeline search's log: the tuner's records, read back as trials; logs of before."""

from __future__ import annotations

import json
import warnings

import pytest
from mesh_search import search, trial_of

from autoplace.hardware.load import load_profile
from autoplace.measure import ErrorKind
from autoplace.measure.objective import THROUGHPUT
from autoplace.models import load_graph
from autoplace.pipeline import MeshMachine, PipelinePlan, Stage, StageCosts
from autoplace.pipeline.log import LEGACY_KIND, TrialLogError, best_plan, read_lines
from autoplace.pipeline.plan_space import parse_plan, plan_of, plan_text
from autoplace.records.tuning_log import RecordError, best, read
from autoplace.reports import analysis


@pytest.fixture(scope="module")
def mesh():
    profile = load_profile("mesh")
    return profile, StageCosts(load_graph("squeezenet"), MeshMachine.of(profile))


@pytest.fixture(scope="module")
def logged(mesh, tmp_path_factory):
    """40 trials of a search, logged, and (best, trials)."""
    profile, costs = mesh
    path = tmp_path_factory.mktemp("log") / "pipe.jsonl"
    return path, search(costs, 40, seed=3, log=path)


def test_every_trial_is_a_tuner_record_of_its_plan(mesh, logged):
    profile, costs = mesh
    path, (top_trial, trials) = logged
    records = read(path)
    assert [r.trial for r in records] == list(range(40))
    assert {r.measurer for r in records} == {"stream"} and len({r.run for r in records}) == 1
    assert {r.profile_hash for r in records} == {profile.hash}
    for r, t in zip(records, trials):
        assert r.pipeline["status"] == t.status and not r.placement.ops
        if t.status == "ok":  # seconds per inference over every copy; one copy's stream
            assert r.result.period_s == pytest.approx(t.period_s / t.plan.replicas, rel=1e-12)
        else:
            assert r.result.period_s is None
    df = analysis.load(path)  # read as any tuning log
    plan, top = best_plan(path, costs, profile.hash)
    assert df.loc[df["period_s"].idxmin(), "trial"] == top.trial
    assert plan == top_trial.plan
    assert best(records, objective=THROUGHPUT).trial == top.trial
    assert best(records, objective=THROUGHPUT, plans=False) is None  # a plan is no placement


def test_a_plans_text_reads_back_and_bad_text_is_named(logged):
    _, (_, trials) = logged
    for t in trials:
        assert parse_plan(plan_text(t.plan)) == t.plan
    for text, wrong in (("0:41:2", "stages, then 'x<copies>'"), ("0:41 x1", "stage '0:41'"),
                        ("0:41:2/a x1", "stage '0:41:2/a'"), ("0:41:2 x1 ^b", "'b' is not"),
                        ("0:40:2 1:41:2 x1", "not contiguous")):
        with pytest.raises(ValueError, match=wrong):
            parse_plan(text)


def test_a_plan_too_big_for_its_pes_is_an_out_of_memory_record(mesh, tmp_path):
    profile, costs = mesh
    plan = PipelinePlan(stages=(Stage(0, costs.n, 1),))  # every weight on one PE
    search(costs, 1, starts=[plan], log=tmp_path / "p.jsonl")
    (rec,) = read(tmp_path / "p.jsonl")
    assert rec.result.error is ErrorKind.OUT_OF_MEMORY and rec.pipeline["status"] == "no-fit"
    assert "stage 0 needs" in rec.result.detail and "2,097,152" in rec.result.detail
    assert best([rec]) is None and best([rec], objective=THROUGHPUT) is None


def test_a_log_of_before_the_records_reads_the_same(mesh, logged, tmp_path):
    path, _ = logged
    now = read_lines(path)
    old = tmp_path / "old.jsonl"
    with old.open("w") as f:
        for x in now:  # the line as the search wrote it before it wrote records
            f.write(json.dumps({"kind": LEGACY_KIND, **{k: v for k, v in x.items()
                                                       if k != "run"}}) + "\n")
    assert [(plan_of(x), x["status"], x["move"]) for x in read_lines(old)] == \
        [(plan_of(x), x["status"], x["move"]) for x in now]


def test_a_search_run_again_keeps_its_run_and_a_torn_line_is_cut(mesh, logged, tmp_path):
    profile, costs = mesh
    path = tmp_path / "p.jsonl"
    path.write_bytes(logged[0].read_bytes() + b'{"schema": 2, "ru')
    with pytest.warns(UserWarning, match="torn last line"):
        assert len(read_lines(path)) == 40
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, trials = search(costs, 50, seed=3, log=path, resume=True)
    records = read(path)
    assert [r.trial for r in records] == list(range(50))
    assert len({r.run for r in records}) == 1
    assert [trial_of(r) for r in records] == trials


def test_a_tuning_record_is_not_a_pipeline_trial(mesh, logged, tmp_path):
    profile, costs = mesh
    path = tmp_path / "mixed.jsonl"
    line = json.loads(logged[0].read_text().splitlines()[0])
    del line["pipeline"]
    path.write_text(logged[0].read_text() + json.dumps(line) + "\n")
    with pytest.raises(TrialLogError,
                       match=r"mixed.jsonl:41: corrupt record: not a pipeline trial"):
        read_lines(path)
    line["pipeline"] = {"stages": [[0, costs.n, 2, None]], "replicas": 1, "status": "ok",
                        "period_s": -1.0, "analytic_period_s": 1.0}
    path.write_text(json.dumps(line) + "\n")
    with pytest.raises(TrialLogError, match=r"mixed.jsonl:1: corrupt record: Expected a finite "
                                            r"`float` >= 0 - at `\$.pipeline.period_s`"):
        read_lines(path)
    for stages, wrong in (([["a", 3, 2, None]], r"Expected `int \| array \| null`, got `str` - "
                                                r"at `\$.pipeline.stages\[0\]\[0\]`"),
                          ([[-1, 3, 2, None]], "a pipeline stage's start must be an integer >= 0"),
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
