"""Several workers on one study (``--worker``): claims, heartbeats, reclaiming dead workers.

Each worker has its own log and a strategy of its own; the study (a journal file on one
host, PostgreSQL across hosts) is what they share. Before measuring, a worker asks a study
trial per candidate and writes its claim on it (the genome, whether it is a baseline, the
worker), then reads the study once: a candidate is measured only under the lowest-numbered
trial that claims its genome among the live claims (running trials of live workers, and
measured trials), and a search candidate only if fewer than ``--trials`` live search claims
come before it. Claiming before reading makes this race-free: of two workers claiming one
genome, both see the earlier claim, so exactly one measures it. Trial numbers are the
study's; a trial whose claim lost is finished as failed, without a strategy (no record).

Each worker writes a heartbeat (a study *system* attribute ``worker:ID``: the time, kept
apart from the user attributes a dashboard shows) at start and then every quarter of
``grace_s``; a worker silent for ``grace_s`` is dead, and the next worker
that looks finishes its running trials (reclaims them). A claim names the worker's log
(``log``; workers share a log directory), and a worker logs a measured candidate before
writing it on its trial, so a reclaimed trial is finished as measured, with its record's
attributes, if its attributes say so or its worker's log holds the record (``recover``);
else as failed, so that its genome can be claimed again.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import FrozenTrial, TrialState

BASELINE, SEARCH = "baseline", "search"
#: how long a claim waits for the claims of trials asked before its own (seconds)
CLAIM_WAIT_S = 10.0
_PREFIX = "worker:"


@dataclass(frozen=True)
class Holder:
    """A live claim: trial number, genome, kind (``baseline`` or ``search``)."""

    number: int
    genome: str
    kind: str


class SharedStudy:
    """This worker's side of a study shared with other workers (see the module docstring)."""

    def __init__(self, study: optuna.Study, storage: optuna.storages.BaseStorage, *,
                 grace_s: float, worker: str, log: Path,
                 recover: Callable[[FrozenTrial], dict | None] = lambda t: None):
        self.study, self.storage, self.grace_s = study, storage, float(grace_s)
        self.worker, self.log, self.recover = worker, str(Path(log).resolve()), recover
        self._study_id = storage.get_study_id_from_name(study.study_name)
        self._stop = threading.Event()
        self.beat()
        self._thread = threading.Thread(target=self._beating, name="autoplace-heartbeat",
                                        daemon=True)
        self._thread.start()

    def beat(self) -> None:
        self.storage.set_study_system_attr(self._study_id, _PREFIX + self.worker, time.time())

    def _beating(self) -> None:
        while not self._stop.wait(self.grace_s / 4):
            try:
                self.beat()
            except Exception:  # noqa: BLE001 - a missed beat is retried; the job goes on
                continue

    def close(self) -> None:
        self._stop.set()

    # -- claims --------------------------------------------------------------------------------
    def claim(self, trials: list[optuna.Trial], genomes: list[str], kinds: list[str],
              limit: int) -> list[bool]:
        """Write a claim per candidate on its trial; whether each one is this worker's to
        measure (``limit``: ``--trials``, the study's search candidates)."""
        written = [self._write_claim(t, genome, kind)
                   for t, genome, kind in zip(trials, genomes, kinds)]
        first: dict[str, int] = {}
        search_rank: dict[int, int] = {}
        alive = self._alive()  # one view of who is alive: a dead worker's running trial is
        self.reclaim(alive)  # finished (from its log if it logged it) before claims are read
        settled = self._settled(max((t.number for t in trials), default=-1))
        for h in self.holders(settled, alive):
            first.setdefault(h.genome, h.number)
            if h.kind == SEARCH:
                search_rank[h.number] = len(search_rank)
        return [ok and first.get(g) == t.number
                and (k != SEARCH or search_rank[t.number] < limit)
                for ok, t, g, k in zip(written, trials, genomes, kinds)]

    def _write_claim(self, trial: optuna.Trial, genome: str, kind: str) -> bool:
        """Write this worker's claim of ``genome`` on ``trial``; False if another worker
        finished the trial first (it took this one for dead: a late heartbeat)."""
        try:
            trial.set_user_attr("kind", kind)
            trial.set_user_attr("worker", self.worker)
            trial.set_user_attr("log", self.log)
            trial.set_user_attr("claim", genome)  # last: a trial with a claim has all three
        except UpdateFinishedTrialError:
            return False
        return True

    def _settled(self, below: int) -> list[FrozenTrial]:
        """The study's trials once every running trial numbered below ``below`` has its
        claim written (a worker claims right after asking; one that has not after
        :data:`CLAIM_WAIT_S` is taken to have died in between)."""
        deadline = time.monotonic() + CLAIM_WAIT_S
        while True:
            trials = self.study.get_trials(deepcopy=False)
            pending = any(t.number < below and t.state == TrialState.RUNNING
                          and "claim" not in t.user_attrs for t in trials)
            if not pending or time.monotonic() > deadline:
                return trials
            time.sleep(0.02)

    def holders(self, trials: list[FrozenTrial] | None = None,
                alive: set[str] | None = None) -> list[Holder]:
        """The live claims among ``trials`` (default: the study's), by trial number;
        ``alive``: the live workers (default: as the heartbeats say now)."""
        alive = self._alive() if alive is None else alive
        out = []
        for t in self.study.get_trials(deepcopy=False) if trials is None else trials:
            genome = t.user_attrs.get("claim") or t.user_attrs.get("genome")
            if genome and _holds(t, alive):
                out.append(Holder(t.number, genome, t.user_attrs.get("kind", SEARCH)))
        return sorted(out, key=lambda h: h.number)

    def search_claims(self) -> tuple[int, int]:
        """Search candidates the study has measured or has live workers measuring, and how
        many of them other workers are still measuring (their trials running)."""
        trials = self.study.get_trials(deepcopy=False)
        running = {t.number for t in trials if t.state == TrialState.RUNNING
                   and t.user_attrs.get("worker") != self.worker}
        claims = [h for h in self.holders(trials) if h.kind == SEARCH]
        return len(claims), sum(1 for h in claims if h.number in running)

    def others_running(self) -> int:
        """Trials other workers have running, after finishing dead workers' (:meth:`reclaim`)."""
        self.reclaim()
        return sum(1 for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
                   if t.user_attrs.get("worker") != self.worker)

    def remaining(self, limit: int) -> int:
        """Search candidates still to measure for a study total of ``limit``, after failing
        dead workers' trials. While other workers' running claims would fill the total, it
        waits for them to end: measured, or failed when their worker dies (then they are
        to be measured again), so that no worker leaves a total short of ``limit``."""
        while True:
            self.reclaim()
            claims, others_running = self.search_claims()
            if claims < limit or not others_running:
                return max(limit - claims, 0)
            time.sleep(min(1.0, self.grace_s / 4))

    # -- dead workers ------------------------------------------------------------------------
    def _finish(self, t: FrozenTrial) -> None:
        """Finish a dead worker's running trial: as measured if its attributes or its log
        say so (the record's attributes written first), else as failed."""
        attrs = None if "strategy" in t.user_attrs else self.recover(t)
        if attrs:
            trial_id = self.storage.get_trial_id_from_study_id_trial_number(
                self.storage.get_study_id_from_name(self.study.study_name), t.number)
            try:
                for key, value in attrs.items():  # ``strategy`` last
                    self.storage.set_trial_user_attr(trial_id, key, value)
            except UpdateFinishedTrialError:  # another worker finished it meanwhile
                return
        value, state = _finish_attrs({**t.user_attrs, **(attrs or {})})
        try:
            self.study.tell(t.number, value, state=state, skip_if_finished=True)
        except UpdateFinishedTrialError:  # another worker finished it between check and write
            pass

    def _alive(self) -> set[str]:
        now = time.time()
        beats = self.storage.get_study_system_attrs(self._study_id)
        return {key[len(_PREFIX):] for key, at in beats.items()
                if key.startswith(_PREFIX) and now - float(at) <= self.grace_s}

    def reclaim(self, alive: set[str] | None = None) -> int:
        """Finish the running trials of dead workers (not in ``alive``, default: as the
        heartbeats say now; see :meth:`_finish`); how many."""
        alive, n = (self._alive() if alive is None else alive) | {self.worker}, 0
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            owner = t.user_attrs.get("worker")
            dead = owner not in alive if owner is not None else _older(t, self.grace_s)
            if dead:
                self._finish(t)
                n += 1
        return n


def _finish_attrs(attrs: dict):
    """(value, state) to finish a dead worker's trial with: COMPLETE with its latency if it
    was measured and logged (it has a strategy) and feasible, else FAIL (a measured trial
    keeps its strategy and is not measured again; an unmeasured one is free to claim)."""
    latency = attrs.get("latency") if "strategy" in attrs else None
    return (latency, TrialState.COMPLETE) if latency is not None else (None, TrialState.FAIL)


def measured_in_study(study: optuna.Study, number: int) -> bool:
    """Whether trial ``number`` of ``study`` holds a measurement (its ``strategy``)."""
    return any(t.number == number and "strategy" in t.user_attrs
               for t in study.get_trials(deepcopy=False))


def worker_seed(seed: int, worker: str) -> int:
    """A worker's own seed: ``seed`` shifted by a hash of its id, so that workers started
    with one seed do not propose alike (and only lose claims to each other)."""
    return (seed + zlib.crc32(worker.encode())) % 2**32


def new_worker_id() -> str:
    """A worker id unique across hosts and processes: host, pid and a random suffix."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


def _older(t: FrozenTrial, seconds: float) -> bool:
    """Whether ``t`` was asked more than ``seconds`` ago (a trial never claimed: its worker
    died between asking and claiming)."""
    start = t.datetime_start
    return start is not None and (datetime.now() - start).total_seconds() > seconds


def _holds(t: FrozenTrial, alive: set[str]) -> bool:
    if t.state == TrialState.RUNNING:
        return t.user_attrs.get("worker") in alive
    return t.state in (TrialState.COMPLETE, TrialState.FAIL) and "strategy" in t.user_attrs
