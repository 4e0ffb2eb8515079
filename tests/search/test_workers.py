"""Several workers on one study (``autoplace tune --worker``), on a journal file and on a
real PostgreSQL server: trial numbers from the study, no candidate measured twice, baselines
once, ``--trials`` the study's total, a dead worker's running trials reclaimed."""

from __future__ import annotations

import functools
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings
from pathlib import Path

import optuna
import pytest
from factories import started_together
from postgres_server import Server, binaries

from autoplace.hardware.load import load_profile
from autoplace.models import load_graph
from autoplace.records.tuning_log import read
from autoplace.search import baselines
from autoplace.search.study_storage import open_storage
from autoplace.search.workers import BASELINE
from autoplace.space import SearchSpace

TRIALS = 300
MODEL, HW = "squeezenet", "soc"


def worker_args(storage: str, log: Path, seed: int, *extra: str) -> list[str]:
    return ["tune", MODEL, "--hw", HW, "--trials", str(TRIALS), "--batch-size", "4",
            "--storage", storage, "--worker", "--log", str(log), "--seed", str(seed),
            "--no-progress", *extra]


def worker(storage: str, log: Path, seed: int, *extra: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "autoplace", *worker_args(storage, log, seed, *extra)]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def finish(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err


def the_study(storage: str) -> optuna.Study:
    (name,) = optuna.get_all_study_names(open_storage(storage))
    return optuna.load_study(study_name=name, storage=open_storage(storage))


def assert_one_job(storage: str, logs: list[Path]) -> None:
    """The invariants of a shared job, from the workers' logs and the study."""
    records = [r for log in logs if log.exists() for r in read(log)]
    sp = the_space()
    choice, mode = sp.encode([r.placement for r in records])
    genomes = sp.keys(choice, sp.normalize(choice, mode))
    twice = [(r.trial, r.strategy) for r, g in zip(records, genomes) if genomes.count(g) > 1]
    assert not twice, f"measured twice: {twice}"
    numbers = [r.trial for r in records]
    assert len(numbers) == len(set(numbers)), "a trial number was used twice"
    names = {name for name, _ in baselines_of()}
    base = [r.strategy for r in records if r.strategy in names]
    assert sorted(base) == sorted(names), "every baseline exactly once"
    assert len(records) - len(base) == TRIALS, "--trials is the study's total"
    study = the_study(storage)
    measured = {t.number: t for t in study.get_trials(deepcopy=False)
                if t.user_attrs.get("strategy")}
    assert sorted(measured) == sorted(numbers), "log and study are one truth"
    for r in records:
        t = measured[r.trial]
        assert t.user_attrs["strategy"] == r.strategy
        assert (t.value if r.result.ok else None) == (r.result.latency_s if r.result.ok else None)
        assert (t.user_attrs["kind"] == BASELINE) == (r.strategy in names)
    running = study.get_trials(states=(optuna.trial.TrialState.RUNNING,))
    assert not running
    assert {r.run for r in records} == {study.user_attrs["run"]}, "one run: the study's"


@functools.cache
def the_space() -> SearchSpace:
    return SearchSpace(load_graph(MODEL), load_profile(HW))


@functools.cache
def baselines_of():
    return baselines(the_space())


def three_workers(storage: str, tmp_path: Path) -> None:
    logs = [tmp_path / f"w{k}.jsonl" for k in range(3)]
    finish(started_together([worker_args(storage, log, seed=0) for log in logs],
                            f"tuning {MODEL}"))  # same seed: they must not collide
    assert_one_job(storage, logs)
    assert all(log.exists() and log.stat().st_size for log in logs), "every worker measured"
    assert_heartbeats_apart(storage, 3)


def assert_heartbeats_apart(storage: str, workers: int) -> None:
    """The workers' heartbeats are system attributes: none among the user attributes a
    dashboard shows."""
    store = open_storage(storage)
    (name,) = optuna.get_all_study_names(store)
    study = optuna.load_study(study_name=name, storage=store)
    assert not [k for k in study.user_attrs if k.startswith("worker:")]
    beats = store.get_study_system_attrs(store.get_study_id_from_name(name))
    assert len([k for k in beats if k.startswith("worker:")]) == workers


def test_three_workers_on_a_journal_file(tmp_path):
    three_workers(f"journal:{tmp_path / 'study.journal'}", tmp_path)


@pytest.fixture(scope="module")
def postgres():
    bindir = binaries()
    if bindir is None:
        if os.environ.get("AUTOPLACE_CI"):
            pytest.fail("PostgreSQL is not installed (.ci/run installs it)")
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql)")
    root = Path(tempfile.mkdtemp(prefix="autoplace-pg-"))  # pytest's are private to root
    server = Server(root, bindir)
    try:
        yield server.start()
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_three_workers_on_postgresql(postgres, tmp_path):
    three_workers(postgres.url, tmp_path)


#: a worker that SIGKILLs itself right after its ``kill_after``-th log line, mid-batch: the
#: batch's other candidates are left claimed and running
DOOMED_WORKER = textwrap.dedent("""
    import os, signal, sys
    from autoplace.measure.simulator import Simulator
    from autoplace.models import load_graph
    from autoplace.hardware.load import load_profile
    from autoplace.records.tuning_log import TuningLog
    from autoplace.search import TuneConfig, tune
    from autoplace.space import SearchSpace

    log_path, storage, kill_after = sys.argv[1], sys.argv[2], int(sys.argv[3])

    class DiesAfterLogging(TuningLog):
        def append(self, record):
            super().append(record)
            self.lines = getattr(self, "lines", 0) + 1
            if self.lines == kill_after:
                os.kill(os.getpid(), signal.SIGKILL)

    space = SearchSpace(load_graph(sys.argv[4]), load_profile(sys.argv[5]))
    with DiesAfterLogging(log_path) as log:
        tune(space, Simulator(space), log, TuneConfig(trials=int(sys.argv[6]), seed=1,
             batch_size=4, storage=storage, worker=True, grace_s=2.0))
""")


def test_a_dead_workers_running_trials_are_reclaimed(tmp_path):
    storage = f"journal:{tmp_path / 'study.journal'}"
    dead, alive = tmp_path / "dead.jsonl", tmp_path / "alive.jsonl"
    # 3 baselines, then a batch of 4 of which 2 are logged
    proc = subprocess.run([sys.executable, "-c", DOOMED_WORKER, str(dead), storage, "5", MODEL,
                           HW, str(TRIALS)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    running = the_study(storage).get_trials(states=(optuna.trial.TrialState.RUNNING,))
    # the batch's last two claimed, and the one logged last (killed before writing it on
    # its trial): none of them says it was measured, the log does for one
    assert len(running) == 3 and not any("strategy" in t.user_attrs for t in running)
    assert {t.user_attrs["log"] for t in running} == {str(dead.resolve())}
    last = read(dead)[-1]
    time.sleep(2.5)  # past its grace
    finish([worker(storage, alive, 2, "--grace", "2")])
    assert_one_job(storage, [dead, alive])
    study = the_study(storage)
    for t in running:  # reclaimed: finished from the dead worker's log, or failed and free
        now = study.trials[t.number]
        if t.number == last.trial:
            assert now.state == optuna.trial.TrialState.COMPLETE
            assert now.value == last.result.latency_s
            assert now.user_attrs["strategy"] == last.strategy
        else:
            assert now.state == optuna.trial.TrialState.FAIL
            assert "strategy" not in now.user_attrs


def test_workers_agree_on_the_run_id_whoever_computes_it_first(tmp_path):
    from autoplace.search.store import shared_run_id

    def one_study(path: Path) -> tuple[optuna.Study, optuna.Study]:
        a = optuna.create_study(study_name="s", storage=open_storage(f"journal:{path}"))
        b = optuna.load_study(study_name="s", storage=open_storage(f"journal:{path}"))
        return a, b

    a, b = one_study(tmp_path / "one.journal")
    with pytest.raises(RuntimeError, match="before its first trial"):
        shared_run_id(a)
    b.ask()
    time.sleep(0.01)
    a.ask()  # each worker asked a trial; the later one computes first
    run = shared_run_id(b)
    assert shared_run_id(a) == run == a.user_attrs["run"]
    other, _ = one_study(tmp_path / "two.journal")  # same name, another study: another run
    other.ask()
    assert shared_run_id(other) != run


def test_workers_killed_at_random_moments_are_replaced_and_the_job_stays_one(tmp_path):
    """Three workers; twice, one of them (a random one) is SIGKILLed at a random moment and
    a new worker with a log of its own takes its place; the job's invariants still hold."""
    storage = f"journal:{tmp_path / 'study.journal'}"
    logs = kill_and_replace(lambda log, seed: worker(storage, log, seed, "--grace", "5"),
                            tmp_path, random.Random(11), (0.5, 2.5))
    assert_one_job(storage, logs)


def kill_and_replace(start, tmp_path: Path, rng: random.Random, wait: tuple[float, float]
                     ) -> list[Path]:
    """Three workers (``start(log, seed)``); twice, after a random wait, a random one is
    SIGKILLed (if still running) and a new one with a log of its own takes its place; the
    logs of all of them once every worker has finished (at least one was killed)."""
    logs = [tmp_path / f"w{k}.jsonl" for k in range(3)]
    procs = [start(log, k) for k, log in enumerate(logs)]
    kills = 0
    for n in range(2):
        time.sleep(rng.uniform(*wait))
        k = rng.randrange(3)
        if procs[k].poll() is None:
            procs[k].send_signal(signal.SIGKILL)
            procs[k].wait(timeout=60)
            kills += 1
        logs.append(tmp_path / f"w{k}-{n}.jsonl")
        procs[k] = start(logs[-1], 10 + n)
    finish(procs)
    assert kills >= 1
    return logs


#: the mesh job of the killed-workers test: squeezenet's plans on a 16x16 mesh
MESH_TRIALS = 300


def mesh_worker(storage: str, mesh: Path, log: Path, seed: int) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "autoplace", "pipeline", MODEL, "--hw", str(mesh), "--trials",
           str(MESH_TRIALS), "--storage", storage, "--worker", "--log", str(log), "--seed",
           str(seed), "--grace", "5"]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def test_mesh_workers_killed_at_random_moments_are_replaced_and_the_job_stays_one(tmp_path):
    """The same on a mesh's pipeline plans (the one loop's workers): every plan once, the
    DP's plans once, trial numbers the study's and distinct, ``pipeline --trials`` the
    study's total (plans in all), log and study one truth."""
    from autoplace.pipeline.log import read_lines
    from autoplace.pipeline.plan_space import plan_of

    mesh = tmp_path / "mesh16.toml"
    text = Path(load_profile("mesh").source).read_text()
    mesh.write_text(text.replace("rows = 4", "rows = 16").replace("cols = 4", "cols = 16"))
    storage = f"journal:{tmp_path / 'study.journal'}"
    logs = kill_and_replace(lambda log, seed: mesh_worker(storage, mesh, log, seed), tmp_path,
                            random.Random(12), (1.0, 3.0))
    lines = [x for log in logs if log.exists() for x in read_lines(log)]
    plans = [plan_of(x) for x in lines]
    assert len(plans) == len(set(plans)), "a plan measured twice"
    numbers = [x["trial"] for x in lines]
    assert len(numbers) == len(set(numbers)), "a trial number was used twice"
    starts = [x for x in lines if x["move"].startswith("dp")]
    assert len(starts) == len({x["move"] for x in starts}) >= 1, "the DP's plans once"
    assert len(lines) == MESH_TRIALS, "the study's total is --trials"
    study = the_study(storage)
    measured = {t.number: t for t in study.get_trials(deepcopy=False)
                if t.user_attrs.get("strategy")}
    assert sorted(measured) == sorted(numbers), "log and study are one truth"
    assert not study.get_trials(states=(optuna.trial.TrialState.RUNNING,))


#: a mesh worker that SIGKILLs itself when it starts measuring the DP's plans, holding their
#: claims
DIES_HOLDING_THE_DP = textwrap.dedent("""
    import os, signal, sys
    from autoplace.hardware.load import load_profile
    from autoplace.models import load_graph
    from autoplace.pipeline.stream_measurer import StreamMeasurer
    from autoplace.records.tuning_log import TuningLog
    from autoplace.search.job import tune
    from autoplace.search.mesh import mesh_config, plan_space

    class Dies(StreamMeasurer):
        def measure(self, plans):
            os.kill(os.getpid(), signal.SIGKILL)

    space = plan_space(load_graph("squeezenet"), load_profile("mesh"))
    config = mesh_config(trials=40, seed=0, storage=sys.argv[2], resume=True, worker=True,
                         grace_s=2.0)
    with TuningLog(sys.argv[1]) as log:
        tune(space, Dies(space.costs), log, config)
""")


def test_a_mesh_worker_goes_on_once_the_dead_holder_of_the_dps_claim_is_past_its_grace(
        tmp_path):
    """A worker died holding the claims of the DP's plans (their trials running, not
    measured). The next worker loses those claims to it and has no measured plan to move
    from: it waits for the running trials, which are failed once their worker is past its
    grace, then measures the DP's plans itself and the job's trials (it used to end at
    once, with none)."""
    from autoplace.pipeline.log import read_lines

    storage = f"journal:{tmp_path / 'study.journal'}"
    dead = subprocess.run([sys.executable, "-c", DIES_HOLDING_THE_DP, str(tmp_path / "d.jsonl"),
                           storage], capture_output=True, text=True, timeout=600)
    assert dead.returncode == -signal.SIGKILL, dead.stderr
    held = the_study(storage).get_trials(states=(optuna.trial.TrialState.RUNNING,))
    assert held and all(t.user_attrs["kind"] == BASELINE for t in held)  # the DP's plans
    t = subprocess.run([sys.executable, "-m", "autoplace", "pipeline", MODEL, "--hw", "mesh",
                        "--trials", "40", "--storage", storage, "--worker", "--log",
                        str(tmp_path / "w.jsonl"), "--grace", "2"],
                       capture_output=True, text=True, timeout=600)
    assert t.returncode == 0, t.stderr
    lines = read_lines(tmp_path / "w.jsonl")
    starts = [x["move"] for x in lines if x["move"].startswith("dp")]
    assert len(starts) == len(set(starts)) == len(held) and len(lines) == 40  # in all
    study = the_study(storage)
    assert all(study.trials[t.number].state == optuna.trial.TrialState.FAIL for t in held)


@pytest.mark.parametrize("storage", [None, "sqlite:///t.db"])
def test_a_worker_needs_a_storage_workers_can_share(storage):
    from autoplace.search import TuneConfig

    with pytest.raises(ValueError, match="journal:PATH on one host or postgresql"):
        TuneConfig(worker=True, storage=storage)


def test_a_claim_on_a_trial_another_worker_finished_is_lost_not_raised(tmp_path):
    """A worker whose heartbeat came late was taken for dead: another worker failed the trial
    it had just asked. Its claim of that trial is lost (False), its other claim stands."""
    from autoplace.search.workers import SEARCH, SharedStudy

    storage = open_storage(f"journal:{tmp_path / 'study.journal'}")
    study = optuna.create_study(study_name="s", storage=storage)
    shared = SharedStudy(study, storage, grace_s=60, worker="late", log=tmp_path / "w.jsonl")
    try:
        taken, kept = study.ask(), study.ask()
        study.tell(taken.number, state=optuna.trial.TrialState.FAIL)  # the other worker's
        assert shared.claim([taken, kept], ["a", "b"], [SEARCH, SEARCH], limit=10) \
            == [False, True]
        assert "claim" not in study.trials[taken.number].user_attrs
        assert study.trials[kept.number].user_attrs["claim"] == "b"
    finally:
        shared.close()


def test_rounds_lost_to_other_workers_claims_do_not_end_a_worker(tmp_path, monkeypatch):
    """A worker whose every claim goes to the others for more rounds in a row than a stall
    allows goes on (the others measure those candidates) and measures its share after."""
    from autoplace.measure.simulator import Simulator
    from autoplace.records.tuning_log import TuningLog
    from autoplace.search import TuneConfig, tune
    from autoplace.search.loop import STALLED_ROUNDS
    from autoplace.search.workers import SharedStudy

    real, lost = SharedStudy.claim, []

    def losing(self, trials, genomes, kinds, limit):
        if kinds[0] == BASELINE or len(lost) > STALLED_ROUNDS + 2:
            return real(self, trials, genomes, kinds, limit)
        lost.append(len(trials))
        return [False] * len(trials)

    monkeypatch.setattr(SharedStudy, "claim", losing)
    space = the_space()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "search stopped after ..." would fail it
        with TuningLog(tmp_path / "w.jsonl") as log:
            result = tune(space, Simulator(space), log, TuneConfig(
                trials=20, batch_size=4, storage=f"journal:{tmp_path / 's.journal'}",
                worker=True))
    assert len(lost) == STALLED_ROUNDS + 3
    assert result.measured - len(baselines_of()) == 20


DIES_HOLDING_THE_BASELINES = textwrap.dedent("""
    import os, signal, sys
    from autoplace.hardware.load import load_profile
    from autoplace.measure.simulator import Simulator
    from autoplace.models import load_graph
    from autoplace.records.tuning_log import TuningLog
    from autoplace.search import TuneConfig, tune
    from autoplace.space import SearchSpace

    class Dies(Simulator):
        def measure(self, *args, **kwargs):
            os.kill(os.getpid(), signal.SIGKILL)

        measure_encoded = measure

    space = SearchSpace(load_graph("squeezenet"), load_profile("soc"))
    config = TuneConfig(trials=16, storage=sys.argv[2], worker=True, grace_s=3.0)
    with TuningLog(sys.argv[1]) as log:
        tune(space, Dies(space), log, config)
""")


def test_a_worker_whose_search_ends_within_a_dead_workers_grace_measures_its_baselines(
        tmp_path):
    """A worker died holding the baselines' claims (running, not measured). The next
    worker loses them to it, and its 16 trials end before the dead worker's grace does: it
    then waits for the claims to lapse and measures every baseline (it used to end with
    none of them measured: seen in CI once the search got fast enough)."""
    storage = f"journal:{tmp_path / 'study.journal'}"
    dead = subprocess.run([sys.executable, "-c", DIES_HOLDING_THE_BASELINES,
                           str(tmp_path / "d.jsonl"), storage],
                          capture_output=True, text=True, timeout=600)
    assert dead.returncode == -signal.SIGKILL, dead.stderr
    held = the_study(storage).get_trials(states=(optuna.trial.TrialState.RUNNING,))
    assert held and all(t.user_attrs["kind"] == BASELINE for t in held)
    t = subprocess.run([sys.executable, "-m", "autoplace", "tune", MODEL, "--hw", HW,
                        "--trials", "16", "--storage", storage, "--worker", "--log",
                        str(tmp_path / "w.jsonl"), "--grace", "3", "--no-progress"],
                       capture_output=True, text=True, timeout=600)
    assert t.returncode == 0, t.stderr
    records = read(tmp_path / "w.jsonl")
    names = sorted(name for name, _ in baselines_of())
    assert sorted(r.strategy for r in records if r.strategy in names) == names
    assert len(records) - len(names) == 16 and len(held) == len(names)
