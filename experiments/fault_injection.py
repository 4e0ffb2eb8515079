"""Kill tuning jobs at random moments and count what that cost (issue 11's figures).

Single process: a job is SIGKILLed ``--kills`` times at random moments (after a random number
of new log lines plus a random delay, so kills land mid-round, mid-write, between the log and
the study), resumed each time, then finished; its log is compared with the same job run
without kills (same seed). Workers: three workers share a study (journal file, and PostgreSQL
if its binaries are installed); ``--kills`` times a random one is SIGKILLed at a random moment
and a new worker with its own log takes its place.

Counted: kills that landed while the job ran (for one process: and left every earlier line
of the log as it was), records lost (a trial of the uninterrupted job, or a measured study
trial, missing from the logs), trial numbers used twice, placements measured twice, search
candidates against ``--trials``, log/study disagreements, and whether the killed job equals
the uninterrupted one record for record. Prints a markdown table and the machine's load.

    python experiments/fault_injection.py [--kills 10] [--trials 600] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import optuna

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from autoplace.hardware.load import load_profile  # noqa: E402
from autoplace.models import load_graph  # noqa: E402
from autoplace.records.tuning_log import read  # noqa: E402
from autoplace.search import baselines  # noqa: E402
from autoplace.search.study_storage import open_storage  # noqa: E402
from autoplace.space import SearchSpace  # noqa: E402

MODEL, HW = "squeezenet", "soc"
SPACE = SearchSpace(load_graph(MODEL), load_profile(HW))
N_BASE = len(baselines(SPACE))
#: workers' --grace: short, so dead workers' trials are reclaimed soon, but longer than a live
#: worker's stalls on this loaded machine (a live worker taken for dead may have a candidate
#: measured twice: its claim was failed while it measured; nothing is lost)
GRACE_S = 10


def tune_cmd(log: Path, trials: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "autoplace", "tune", MODEL, "--hw", HW, "--trials",
            str(trials), "--batch-size", "8", "--log", str(log), "--no-progress", *extra]


def lines(log: Path) -> int:
    return log.read_bytes().count(b"\n") if log.exists() else 0


def kill_later(proc: subprocess.Popen, log: Path, rng: random.Random, most: int) -> bool:
    """SIGKILL ``proc`` once ``log`` grew by a random number of lines (up to ``most``) and a
    random delay passed; whether it was still running then."""
    start, grow = lines(log), rng.randint(1, most)
    while proc.poll() is None and lines(log) < start + grow:
        time.sleep(0.005)
    time.sleep(rng.uniform(0.0, 0.05))
    if proc.poll() is not None:
        return False
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return True


def genome_keys(records) -> list[bytes]:
    choice, mode = SPACE.encode([r.placement for r in records])
    return SPACE.keys(choice, SPACE.normalize(choice, mode))


def single(tmp: Path, storage: str, kills: int, trials: int, rng: random.Random) -> dict:
    extra = ["--seed", "5"] + (["--storage", f"sqlite:///{tmp / 't.db'}"] if storage else [])
    ref = tmp / "ref.jsonl"
    subprocess.run(tune_cmd(ref, trials, "--seed", "5"), check=True, capture_output=True)
    log, landed = tmp / "killed.jsonl", 0
    for k in range(kills):
        before = read(log) if log.exists() else []
        proc = subprocess.Popen(tune_cmd(log, trials, *extra, *(["--resume"] if k else [])),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        killed = kill_later(proc, log, rng, most=max(trials // (3 * kills), 2))
        landed += killed and read(log)[:len(before)] == before  # and nothing rewritten
    done = subprocess.run(tune_cmd(log, trials, *extra, "--resume"), capture_output=True)
    got, want = read(log), read(ref)
    row = _counts(got, trials)
    row.update(job=f"1 process, {'sqlite' if storage else 'log only'}", kills=kills,
               landed=landed, ok=done.returncode == 0,
               lost=len({r.trial for r in want} - {r.trial for r in got}),
               equal=[(r.trial, r.placement, r.result.latency_s) for r in got]
               == [(r.trial, r.placement, r.result.latency_s) for r in want])
    if storage:
        row["log≠study"] = _disagreements(f"sqlite:///{tmp / 't.db'}", got)
    return row


def workers(tmp: Path, url: str, name: str, kills: int, trials: int,
            rng: random.Random) -> dict:
    def start(log: Path, seed: int) -> subprocess.Popen:
        return subprocess.Popen(tune_cmd(log, trials, "--storage", url, "--worker", "--grace",
                                         str(GRACE_S), "--seed", str(seed)),
                                stdout=subprocess.DEVNULL, stderr=open(f"{log}.err", "w"),
                                start_new_session=True)

    logs = [tmp / f"w{k}.jsonl" for k in range(3)]
    procs = [start(log, k) for k, log in enumerate(logs)]
    killed = 0
    for n in range(kills):
        k = rng.randrange(3)
        killed += kill_later(procs[k], logs[k], rng, most=max(trials // (3 * kills), 2))
        logs.append(tmp / f"w{k}-{n}.jsonl")
        procs[k] = start(logs[-1], 10 + n)
        logs[k], logs[-1] = logs[-1], logs[k]  # the live worker's log is logs[k]
    ok = all(p.wait() == 0 for p in procs)
    for log in logs:  # what a worker that failed said
        err = Path(f"{log}.err").read_text() if Path(f"{log}.err").exists() else ""
        if err.strip() and not ok:
            print(f"{log.name}: {err.strip()[-600:]}", file=sys.stderr)
    got = [r for log in logs if log.exists() for r in read(log)]
    (study_name,) = optuna.get_all_study_names(open_storage(url))
    study = optuna.load_study(study_name=study_name, storage=open_storage(url))
    measured = {t.number for t in study.trials if t.user_attrs.get("strategy")}
    row = _counts(got, trials)
    row.update(job=f"3 workers, {name}", kills=kills, landed=killed, ok=ok,
               lost=len(measured - {r.trial for r in got}), equal="n/a",
               running=sum(t.state == optuna.trial.TrialState.RUNNING for t in study.trials))
    row["log≠study"] = _disagreements(url, got)
    return row


def _counts(records, trials: int) -> dict:
    numbers = [r.trial for r in records]
    keys = genome_keys([r for r in records if not r.strategy.startswith("single:")
                        and r.strategy not in ("greedy",)])
    return {"records": len(records), "search": f"{len(records) - N_BASE}/{trials}",
            "numbers twice": len(numbers) - len(set(numbers)),
            "measured twice": len(keys) - len(set(keys))}


def _disagreements(url: str, records) -> int:
    (name,) = optuna.get_all_study_names(open_storage(url))
    study = optuna.load_study(study_name=name, storage=open_storage(url))
    trials = {t.user_attrs["trial"]: t for t in study.trials if t.user_attrs.get("strategy")}
    logged = {r.trial: r for r in records}
    bad = set(trials) ^ set(logged)
    bad |= {n for n in set(trials) & set(logged)
            if trials[n].value != (logged[n].result.latency_s if logged[n].result.ok else None)}
    return len(bad)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--trials", type=int, default=600)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    rows, root = [], Path(tempfile.mkdtemp(prefix="autoplace-faults-"))
    try:
        for storage in ("", "sqlite"):
            d = root / f"single-{storage or 'log'}"
            d.mkdir()
            rows.append(single(d, storage, args.kills, args.trials, rng))
        d = root / "journal"
        d.mkdir()
        rows.append(workers(d, f"journal:{d / 'study.journal'}", "journal file", args.kills,
                            args.trials, rng))
        rows += _postgres_rows(root, args, rng)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    cols = ["job", "kills", "landed", "ok", "records", "search", "lost", "numbers twice",
            "measured twice", "log≠study", "equal"]
    print(f"load average {os.getloadavg()[0]:.2f}, {MODEL}/{HW}, seed {args.seed}\n")
    print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r.get(c, "")) for c in cols) + " |")


def _postgres_rows(root: Path, args, rng: random.Random) -> list[dict]:
    from postgres_server import Server, binaries

    if binaries() is None:
        print("(PostgreSQL not installed: its row is skipped)", file=sys.stderr)
        return []
    pg_root = Path(tempfile.mkdtemp(prefix="autoplace-pg-"))
    server = Server(pg_root, binaries())
    try:
        url = server.start().url
        d = root / "postgres"
        d.mkdir()
        return [workers(d, url, "PostgreSQL", args.kills, args.trials, rng)]
    finally:
        server.stop()
        shutil.rmtree(pg_root, ignore_errors=True)


if __name__ == "__main__":
    main()
