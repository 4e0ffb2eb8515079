"""The log is the source of truth: a job killed at any point resumes without measuring any
logged candidate again, whether or not the candidate reached the Optuna study. The jobs
measure 8 a round (five rounds in 40 trials: room for a kill between rounds)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import optuna
import pytest

from autoplace.hardware.load import load_profile
from autoplace.measure.simulator import Simulator
from autoplace.models import load_graph
from autoplace.records.tuning_log import TuningLog, read
from autoplace.search import TuneConfig, baselines, tune
from autoplace.space import SearchSpace

#: a job that SIGKILLs itself right after the log line of trial ``kill_at`` is flushed:
#: that candidate is in the log and not in the study
KILLED_JOB = textwrap.dedent("""
    import os, signal, sys
    from autoplace.measure.simulator import Simulator
    from autoplace.models import load_graph
    from autoplace.hardware.load import load_profile
    from autoplace.records.tuning_log import TuningLog
    from autoplace.search import TuneConfig, baselines, tune
    from autoplace.space import SearchSpace

    log_path, storage, sampler, kill_at = sys.argv[1], sys.argv[2] or None, sys.argv[3], \\
        int(sys.argv[4])
    resume = len(sys.argv) > 5 and sys.argv[5] == "resume"

    class DiesAfterLogging(TuningLog):
        def append(self, record):
            super().append(record)
            if record.trial == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)

    space = SearchSpace(load_graph("squeezenet"), load_profile("soc"))
    with DiesAfterLogging(log_path) as log:
        tune(space, Simulator(space), log, TuneConfig(trials=40, seed=5, sampler=sampler,
                                                      storage=storage, resume=resume,
                                                      batch_size=8))
""")

SPACE = None


def space():
    global SPACE
    if SPACE is None:
        SPACE = SearchSpace(load_graph("squeezenet"), load_profile("soc"))
    return SPACE


def killed_run(log: Path, storage: str, sampler: str, kill_at: int, *resume: str) -> None:
    proc = subprocess.run([sys.executable, "-c", KILLED_JOB, str(log), storage, sampler,
                           str(kill_at), *resume], capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]


def resume(log: Path, storage: str, sampler: str):
    s = space()
    with TuningLog(log) as tl:
        return tune(s, Simulator(s), tl, TuneConfig(trials=40, seed=5, sampler=sampler,
                                                    storage=storage or None, resume=True,
                                                    batch_size=8))


def n_baselines() -> int:
    return len(baselines(space()))  # squeezenet on soc: single:cpu1, single:cpu2, greedy


def genome_keys(records):
    s = space()
    choice, mode = s.encode([r.placement for r in records])
    return s.keys(choice, s.normalize(choice, mode))


def check_job(records, n_baselines: int) -> None:
    """Every baseline once, 40 search candidates, no placement measured twice (baselines
    may repeat each other), trial numbers 0..n-1 in log order."""
    assert len(records) == n_baselines + 40
    assert [r.trial for r in records] == list(range(len(records)))
    search = genome_keys(records[n_baselines:])
    assert len(set(search)) == len(search)
    assert len({r.strategy for r in records[:n_baselines]}) == n_baselines


def logged_values(records) -> dict[int, float | None]:
    return {r.trial: r.result.latency_s if r.result.ok else None for r in records}


def study_trials(storage: str) -> dict[int, float | None]:
    from autoplace.search.study_storage import open_storage

    storage = open_storage(storage)
    study = optuna.load_study(study_name=optuna.get_all_study_names(storage)[0], storage=storage)
    return {t.user_attrs["trial"]: t.value for t in study.trials if t.user_attrs.get("strategy")}


# killed among the baselines (1) or in the search (17); TPE on SQLite is slow (Optuna
# commits each of a trial's ~90 parameters on its own: 118 s in CI), on a journal not
@pytest.mark.parametrize("sampler,kill_at,store", [("evolve", 1, "sqlite"),
                                                   ("evolve", 17, "sqlite"),
                                                   ("tpe", 17, "journal")])
def test_a_candidate_logged_but_not_in_the_study_is_not_measured_again(tmp_path, sampler,
                                                                      kill_at, store):
    log = tmp_path / "t.jsonl"
    storage = f"sqlite:///{tmp_path / 't.db'}" if store == "sqlite" else \
        f"journal:{tmp_path / 't.journal'}"
    killed_run(log, storage, sampler, kill_at)
    before = read(log)
    assert before[-1].trial == kill_at
    assert kill_at not in study_trials(storage)  # killed between the log and the study
    result = resume(log, storage, sampler)
    records = read(log)
    assert records[:len(before)] == before  # nothing logged is rewritten
    assert result.resumed == len(before) and result.measured == len(records) - len(before)
    check_job(records, n_baselines())
    # log and study join on the trial number, with the same values
    assert study_trials(storage) == logged_values(records)
    best = min((r for r in records if r.result.ok), key=lambda r: r.result.latency_s)
    assert result.best.result.latency_s == best.result.latency_s  # over the whole job


def measured(records) -> list[tuple]:
    return [(r.trial, r.strategy, r.placement, r.result.latency_s) for r in records]


@pytest.mark.parametrize("storage", ["", "sqlite"])
def test_a_job_killed_and_resumed_measures_what_the_uninterrupted_job_measures(tmp_path,
                                                                                storage):
    """Killed after a baseline, mid-round twice (the default round is 8 candidates), resumed
    each time: the same candidates, trial numbers, latencies and best as without kills."""
    full = tmp_path / "full.jsonl"
    with TuningLog(full) as tl:
        tune(space(), Simulator(space()), tl, TuneConfig(trials=40, seed=5, batch_size=8))
    log = tmp_path / "t.jsonl"
    url = f"sqlite:///{tmp_path / 't.db'}" if storage else ""
    for k, kill_at in enumerate((1, 13, 30)):
        killed_run(log, url, "evolve", kill_at, *(["resume"] if k else []))
        assert read(log)[-1].trial == kill_at
    result = resume(log, url, "evolve")
    assert measured(read(log)) == measured(read(full))
    assert result.best.trial == min(read(full), key=lambda r: r.result.latency_s).trial


@pytest.mark.parametrize("storage", ["", "sqlite"])
def test_a_kill_between_a_rounds_last_record_and_its_checkpoint_resumes_exactly(tmp_path,
                                                                                  storage):
    """Killed right after the last record of a round, before the next round's checkpoint
    (twice): the resumed job proposes that round again, finds all of it in the log, and goes
    on as the uninterrupted job did (such a round counted as stalled, and stalled rounds
    start descent: another best with SQLite, other trial numbers with the log alone)."""
    import json

    full = tmp_path / "full.jsonl"
    with TuningLog(full) as tl:
        tune(space(), Simulator(space()), tl, TuneConfig(trials=40, seed=5, batch_size=8))
    state = full.with_suffix(".state.jsonl")
    rounds = [json.loads(line)["records"] for line in state.read_text().splitlines()[1:]]
    ends = [n - 1 for n in rounds if n > n_baselines()][:3:2]  # a round's last trial
    assert len(ends) == 2
    log = tmp_path / "t.jsonl"
    url = f"sqlite:///{tmp_path / 't.db'}" if storage else ""
    for k, kill_at in enumerate(ends):
        killed_run(log, url, "evolve", kill_at, *(["resume"] if k else []))
        assert read(log)[-1].trial == kill_at
    resume(log, url, "evolve")
    assert measured(read(log)) == measured(read(full))


def test_resume_without_storage_continues_from_the_log(tmp_path):
    log = tmp_path / "t.jsonl"
    killed_run(log, "", "evolve", 20)
    before = read(log)
    result = resume(log, "", "evolve")
    records = read(log)
    check_job(records, n_baselines())
    assert result.resumed == len(before) == 21
    assert set(result.baselines) >= {"greedy", "single:cpu1"}  # from the log, not measured


def kill_at_a_random_moment(cmd: list[str], log: Path, rng: random.Random) -> bool:
    """Start ``cmd`` and SIGKILL it at a random moment once the log has grown by a random
    number of lines (then after a random delay of up to 0.3 s, mid-batch or mid-write);
    whether it was killed (it may finish first)."""
    lines = log.read_bytes().count(b"\n") if log.exists() else 0
    grow, delay = rng.randint(1, 12), rng.uniform(0.0, 0.3)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if log.exists() and log.read_bytes().count(b"\n") >= lines + grow:
            time.sleep(delay)
            os.killpg(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.005)
    proc.wait(timeout=60)
    assert proc.returncode in (0, -signal.SIGKILL), proc.stderr.read()[-2000:]
    return proc.returncode == -signal.SIGKILL


@pytest.mark.parametrize("storage", ["sqlite", "none"])
def test_sigkills_at_random_moments_of_a_cli_run_lose_and_repeat_nothing(tmp_path, storage):
    """Real crashes, wherever the kill lands (among the baselines, mid-batch, between the log
    and the study, between a round's last record and its checkpoint): three in a row, each
    followed by ``--resume``; then the job finishes, having measured what the job never
    killed measures, trial by trial."""
    log = tmp_path / "t.jsonl"
    store = ["--storage", f"sqlite:///{tmp_path / 't.db'}"] if storage == "sqlite" else []
    cmd = [sys.executable, "-m", "autoplace", "tune", "squeezenet", "--hw", "soc",
           "--trials", "40", "--seed", "5", "--batch-size", "4", "--log", str(log),
           *store, "--no-progress"]
    rng = random.Random(storage)  # the moments vary with timing, the line counts do not
    kills = sum(kill_at_a_random_moment(cmd + ["--resume"] * (k > 0), log, rng)
                for k in range(3))
    assert kills >= 1
    done = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    records = read(log)  # (a torn last line was cut before appending)
    check_job(records, n_baselines())
    if store:
        assert study_trials(store[1]) == logged_values(records)
    assert "resumed:" in done.stdout
    whole = tmp_path / "whole.jsonl"
    never = [x if x != str(log) else str(whole) for x in cmd]
    never = [x.replace("t.db", "whole.db") for x in never]
    assert subprocess.run(never, capture_output=True, timeout=300).returncode == 0
    assert measured(records) == measured(read(whole))


def test_resuming_with_a_changed_profile_is_refused_in_one_line(tmp_path):
    log, storage = tmp_path / "t.jsonl", f"sqlite:///{tmp_path / 't.db'}"
    hw = tmp_path / "soc.toml"
    hw.write_text((Path(__file__).parents[2] / "hwprofiles" / "soc.toml").read_text())
    cmd = [sys.executable, "-m", "autoplace", "tune", "squeezenet", "--hw", str(hw),
           "--trials", "8", "--log", str(log), "--storage", storage, "--no-progress"]
    assert subprocess.run(cmd, capture_output=True, timeout=300).returncode == 0
    before = log.read_bytes()
    hw.write_text(hw.read_text().replace("conv2d = 10.0", "conv2d = 9.0", 1))  # edited
    no_storage = cmd[:cmd.index("--storage")] + ["--no-progress"]
    for run, fragment in [(no_storage, f"{log}: its records of squeezenet on profile 'soc' "
                                       "were made with another version of the profile"),
                          ([*cmd, "--log", str(tmp_path / "new.jsonl")],
                           "was made with another version of profile 'soc'")]:
        out = subprocess.run([*run, "--resume"], capture_output=True, text=True, timeout=300)
        assert out.returncode == 2, out.stderr
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and fragment in lines[0], out.stderr
    assert log.read_bytes() == before  # nothing appended



def test_sigkills_of_a_mesh_pipeline_search_lose_and_repeat_nothing(tmp_path):
    """The same loop on the plan space of a mesh: killed three times at random moments
    (``pipeline`` always goes on from its log), then finished; every plan once, trial
    numbers 0..n-1, the study's values the log's, and the same trials as a search never
    killed."""
    from autoplace.pipeline.plan_space import plan_text

    mesh = tmp_path / "mesh16.toml"
    mesh.write_text(Path(load_profile("mesh").source).read_text()
                    .replace("rows = 4", "rows = 16").replace("cols = 4", "cols = 16"))
    log, storage = tmp_path / "p.jsonl", f"sqlite:///{tmp_path / 'p.db'}"
    cmd = [sys.executable, "-m", "autoplace", "pipeline", "resnet50", "--hw", str(mesh),
           "--trials", "600", "--seed", "2"]
    rng = random.Random("mesh")
    kills = sum(kill_at_a_random_moment([*cmd, "--log", str(log), "--storage", storage],
                                        log, rng) for _ in range(3))
    assert kills >= 1
    done = subprocess.run([*cmd, "--log", str(log), "--storage", storage],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    records = read(log)
    assert [r.trial for r in records] == list(range(len(records))) and len(records) > 300
    plans = [plan_text_of(r, plan_text) for r in records]
    assert len(set(plans)) == len(plans)
    assert study_trials(storage) == {r.trial: r.result.period_s for r in records}
    whole = tmp_path / "whole.jsonl"
    again = subprocess.run([*cmd, "--log", str(whole)], capture_output=True, text=True,
                           timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert [plan_text_of(r, plan_text) for r in read(whole)] == plans


def plan_text_of(record, plan_text) -> str:
    from autoplace.pipeline.plan_space import plan_of

    return plan_text(plan_of(record.pipeline))
