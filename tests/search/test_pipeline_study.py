"""Pipeline searches sharing a study as workers: a claim wins once, and a dead worker's
trial is finished from its log."""

from __future__ import annotations

import time

import optuna
import pytest

from autoplace.hardware.load import load_profile
from autoplace.models import load_graph
from autoplace.pipeline import MeshMachine, StageCosts, best_pipeline
from autoplace.pipeline.log import TrialLog
from autoplace.pipeline.plan_search import Trial, measure
from autoplace.search.pipeline_study import PipelineWorker, open_pipeline_study
from autoplace.search.study_storage import open_storage


@pytest.fixture()
def setup(tmp_path):
    profile = load_profile("mesh")
    costs = StageCosts(load_graph("squeezenet"), MeshMachine.of(profile))
    url = f"journal:{tmp_path / 'study.journal'}"
    storage = open_storage(url)
    study = open_pipeline_study(url, costs, profile.hash, storage=storage)
    return profile, costs, study, storage


def worker(setup, log, grace_s=60.0) -> PipelineWorker:
    profile, costs, study, storage = setup
    return PipelineWorker(study, storage, costs, profile_hash=profile.hash, seed=0, run="r",
                          log=log, grace_s=grace_s)


def test_a_plan_is_claimed_once_and_the_other_worker_takes_it_in(setup, tmp_path):
    _, costs, _, _ = setup
    a, b = worker(setup, tmp_path / "a.jsonl"), worker(setup, tmp_path / "b.jsonl")
    plan = best_pipeline(costs)
    number = a.claim(plan, True, 10)
    assert number is not None and b.claim(plan, True, 10) is None
    status, period, analytic, throughput = measure(plan, costs)
    a(Trial(number=number, move="dp", plan=plan, status=status, period_s=period,
            analytic_period_s=analytic, throughput=throughput))
    (got,) = b.others()
    assert (got.number, got.plan, got.throughput) == (number, plan, throughput)
    assert b.others() == [] and b.claim(plan, True, 10) is None  # measured: never again
    a.close()
    b.close()


def test_a_dead_workers_logged_trial_is_finished_from_its_log(setup, tmp_path):
    profile, costs, study, _ = setup
    dead = worker(setup, tmp_path / "dead.jsonl", grace_s=0.2)
    plan = best_pipeline(costs)
    number = dead.claim(plan, True, 10)
    status, period, analytic, throughput = measure(plan, costs)
    log = TrialLog(tmp_path / "dead.jsonl", costs, profile_hash=profile.hash, seed=0)
    log(Trial(number=number, move="dp", plan=plan, status=status, period_s=period,
              analytic_period_s=analytic, throughput=throughput))
    log.close()
    dead.close()  # it dies after logging, before telling the study
    time.sleep(0.5)
    alive = worker(setup, tmp_path / "alive.jsonl", grace_s=0.2)
    assert alive.shared.reclaim() == 1
    (t,) = study.get_trials(deepcopy=False)
    assert t.state == optuna.trial.TrialState.COMPLETE and t.value == throughput
    assert t.user_attrs["strategy"] == "dp" and t.user_attrs["trial"] == number
    (got,) = alive.others()
    assert got.plan == plan and got.throughput == throughput
    alive.close()


def test_a_worker_taken_for_dead_while_measuring_still_puts_its_trial_in(setup, tmp_path):
    """Another worker failed the trial a slow worker was measuring (its heartbeat came late):
    the measured plan goes in as a trial of its own, with the claim, not an error; a claim of
    a trial failed that way is lost."""
    _, costs, study, _ = setup
    slow = worker(setup, tmp_path / "slow.jsonl")
    plan = best_pipeline(costs)
    number = slow.claim(plan, True, 10)
    study.tell(number, state=optuna.trial.TrialState.FAIL)  # the other worker's reclaim
    status, period, analytic, throughput = measure(plan, costs)
    slow(Trial(number=number, move="dp", plan=plan, status=status, period_s=period,
               analytic_period_s=analytic, throughput=throughput))
    failed, added = study.get_trials(deepcopy=False)
    assert failed.state == optuna.trial.TrialState.FAIL and "strategy" not in failed.user_attrs
    assert added.state == optuna.trial.TrialState.COMPLETE and added.value == throughput
    assert added.user_attrs["trial"] == number
    assert added.user_attrs["claim"] == failed.user_attrs["claim"]
    assert added.user_attrs["worker"] == slow.shared.worker
    other = worker(setup, tmp_path / "other.jsonl")
    assert other.claim(plan, True, 10) is None  # measured: the added trial holds it
    slow.close()
    other.close()
