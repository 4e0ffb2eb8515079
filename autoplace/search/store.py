"""Where measured candidates go: the tuning log first (the source of truth), then the study.

A candidate is appended (and flushed) to the JSON-lines log before the Optuna study hears of
it, so a crash between the two loses nothing: on ``resume`` the job's records in the log
are the measured set, and any the study missed are added to it (:meth:`Store.sync`).
Trials of the study carry the log's trial number (``user_attrs["trial"]``) and the genome
(``user_attrs["genome"]``), so log and study join on the trial number. Without
``--storage``, a strategy that never asks the study (evolution) has none: the log alone
holds the job.

Workers sharing a study (:mod:`autoplace.search.workers`) do the same on their claimed trials:
log line, then the trial's attributes, then its end. A worker killed in between leaves a
running trial that names its log; the worker that reclaims it finishes it from the logged
record (:meth:`Store.logged_attrs`), so its log and the study still agree.
"""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import FrozenTrial, TrialState

from autoplace.measure.base import MeasureResult
from autoplace.measure.objective import LATENCY, Objective
from autoplace.records.tuning_log import Record, TuningLog, jobs_named, new_run_id, read
from autoplace.search.config import TuneConfig
from autoplace.search.params import TrialParams, distributions, op_param, to_placement
from autoplace.search.strategy import SearchError
from autoplace.search.study_storage import open_storage, redact
from autoplace.search.workers import measured_in_study
from autoplace.space import Placement, SearchSpace

#: a candidate the job measured before: (strategy, candidate, its value or None; of a job of
#: several objectives, their values)
Done = tuple[str, Placement, float | list[float] | None]


def study_name(space: SearchSpace, config: TuneConfig) -> str:
    g = space.graph
    return config.study_name or f"autoplace-{g.name}-{space.profile.name}-{g.fingerprint[:8]}"


def open_study(space: SearchSpace, config: TuneConfig, sampler: optuna.samplers.BaseSampler,
               storage: optuna.storages.BaseStorage | None = None) -> optuna.Study:
    """The job's study: in memory, or in ``config.storage`` (opened, unless ``storage`` is
    given; it must not hold the study yet unless the job continues: ``resume``, a worker)."""
    name = study_name(space, config)
    storage = storage if storage is not None else open_storage(config.storage)
    shown = redact(config.storage or "")
    exists = storage is not None and name in optuna.get_all_study_names(storage)
    if exists and not config.continues:
        raise SearchError(f"study {name!r} already exists in {shown}; "
                          "pass --resume to continue it")
    if exists:  # loaded, not created again: a create appends to a journal even when refused
        study = optuna.load_study(study_name=name, storage=storage, sampler=sampler)
    else:  # (workers started together may both get here: the second loads the first's)
        criteria = config.goal.criteria  # (several: a multi-objective study)
        study = optuna.create_study(study_name=name, storage=storage, sampler=sampler,
                                    directions=["minimize"] * len(criteria),
                                    load_if_exists=config.continues)
        with warnings.catch_warnings():  # the dashboard's axis: "latency_s", not "Objective 0"
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names([c.field for c in criteria])
    _check_objective(study, config.goal.name, f"study {name!r} in {shown}")  # (limits too)
    _check_graph(study, space, f"study {name!r} in {shown}")
    profile = study.user_attrs.get("profile_hash")
    if profile is None:
        study.set_user_attr("profile_hash", space.profile.hash)
    elif profile != space.profile.hash:
        raise SearchError(f"study {name!r} in {shown} was made with another version of "
                          f"profile {space.profile.name!r} (hash {profile}, now "
                          f"{space.profile.hash}); use another --study or --storage")
    return study


def _check_objective(study: optuna.Study, objective: str, where: str) -> None:
    """Mark a new study with the objective its values are; refuse one of another (a study
    from before objectives existed is of latency)."""
    attrs = study.user_attrs
    if "objective" not in attrs and "profile_hash" not in attrs:  # a new study
        study.set_user_attr("objective", objective)
        return
    theirs = attrs.get("objective", "latency")
    if theirs != objective:
        raise SearchError(f"{where} minimises {theirs}, not {objective}; use another --study "
                          f"or --objective {theirs}")


def _check_graph(study: optuna.Study, space: SearchSpace, where: str) -> None:
    """Mark a new study with its graph; refuse one of another graph (a study from before
    graphs were marked is taken as it is)."""
    g = space.graph
    theirs = study.user_attrs.get("graph_fp")
    if theirs is None and "profile_hash" not in study.user_attrs:  # a new study
        study.set_user_attr("graph", g.name)
        study.set_user_attr("graph_fp", g.fingerprint)
    elif theirs is not None and theirs != g.fingerprint:
        raise SearchError(f"{where} is a study of graph {study.user_attrs.get('graph')!r} "
                          f"(fingerprint {theirs}), not {g.name!r} ({g.fingerprint}); use "
                          "another --study")


class Store:
    """The job's log and study, and the job's records found in them. The study is told
    ``objective``'s seconds per inference, or each of several objectives' figures (a record
    without them is a failed trial); a trial it adds carries ``params`` (the parameters
    ``--study-params`` names)."""

    def __init__(self, space: SearchSpace, log: TuningLog, study: optuna.Study | None, *,
                 measurer: str, seed: int, params: TrialParams, study_numbers: bool = False,
                 continues: bool = False, append: bool = False, objective: Objective = LATENCY):
        self.space, self.log, self.study = space, log, study
        #: what the study is told of a result: its value, or its values of several criteria
        self.multi = len(objective.criteria) > 1
        #: what each record says it was searched for: several objectives' names (None: one)
        self.goal = ",".join(c.name for c in objective.criteria) if self.multi else None
        self.told_value = objective.values if self.multi else objective.value
        #: a record's trial number is its study trial's (workers sharing a study)
        self.study_numbers = study_numbers
        self.taken: set[int] = set()  # study trial numbers taken in from other logs
        self.measurer, self.seed, self.params = measurer, seed, params
        self.continues, self.append = continues, append
        self.logged: list[Record] = self._job_records()
        self._run = None if study_numbers and study is not None else self._own_run_id()
        self.told: set[int] = set()  # numbers of asked trials finished by this run
        self._dead_logs: dict[str, tuple[tuple, dict]] = {}  # see _dead_log
        self.next_trial = 1 + max((r.trial for r in self.logged), default=-1)

    def _job_records(self) -> list[Record]:
        """Records of this graph, profile and measurer already in the log; a log whose
        records of this graph were made with another version of the profile is refused."""
        if not self.log.path.exists() or self.log.path.stat().st_size == 0:
            return []
        g, p = self.space.graph, self.space.profile
        everything = read(self.log.path)
        if everything and not (self.continues or self.append):
            raise SearchError(
                f"{self.log.path}: already holds {len(everything)} records (of "
                f"{jobs_named(everything)}); --resume continues its job, --append adds a new run "
                "to it, or give another --log")
        records = [r for r in everything if r.graph_fp == g.fingerprint]
        changed = next((r for r in records if r.profile == p.name and r.profile_hash != p.hash),
                       None)
        if changed is not None:
            raise SearchError(
                f"{self.log.path}: its records of {g.name} on profile {p.name!r} were made with "
                f"another version of the profile (hash {changed.profile_hash}, now {p.hash}); "
                "use another --log for the changed profile")
        return [r for r in records if r.profile_hash == p.hash and r.measurer == self.measurer]

    @property
    def run(self) -> str:
        """The job's run id: its records' (a resumed job keeps it), the shared study's for
        workers (see :func:`shared_run_id`), else a new one (a new run, even on a log
        with records of the job)."""
        if self._run is None:
            self._run = shared_run_id(self.study)
        return self._run

    def _own_run_id(self) -> str:
        known = [r.run for r in self.logged if r.run] if self.continues else []
        return known[-1] if known else new_run_id()

    # -- resuming ----------------------------------------------------------------------------
    def sync(self) -> list[Done]:
        """Add to the study the logged records it misses; return what the job measured
        before: (strategy, placement, value or None; of several objectives, their values)
        from the log, then from trials of the study that no record of this log has (another
        log's run on the same study)."""
        in_study = {}
        trials = [] if self.study is None else self.study.get_trials(
            deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL))
        for t in trials:
            if t.user_attrs.get("strategy"):  # asked but never measured: no strategy
                in_study[t.user_attrs.get("trial", t.number)] = t
        for r in self.logged:
            if r.trial not in in_study and self.study is not None:
                self._add_trial(r)
        done = [(r.strategy, self.space.candidate_of(r.pipeline, r.placement),
                 self.told_value(r.result)) for r in self.logged]
        self.taken.update(r.trial for r in self.logged)
        self.next_trial = max([self.next_trial, *(n + 1 for n in in_study)])
        return done + self._take_in(in_study)

    def others(self) -> list[Done]:
        """Candidates other workers measured since the last call (as :meth:`sync`)."""
        trials = self.study.get_trials(deepcopy=False,
                                       states=(TrialState.COMPLETE, TrialState.FAIL))
        return self._take_in({t.user_attrs.get("trial", t.number): t for t in trials
                              if t.user_attrs.get("strategy")})

    def _take_in(self, in_study: dict[int, FrozenTrial]):
        done = []
        for number, t in sorted(in_study.items()):
            if number not in self.taken and (p := self._placement(t)) is not None:
                done.append((t.user_attrs["strategy"], p, _told(t.values, self.multi)))
            self.taken.add(number)
        return done

    def _placement(self, trial: FrozenTrial) -> Placement | None:
        genome = trial.user_attrs.get("genome")
        if genome:
            return self.space.decode(*self.space.parse_genome(genome))
        if op_param(self.space.graph.ops[0].name) in trial.params:  # the Optuna samplers'
            dists = distributions(self.space)
            return to_placement(self.space, {**{k: d.choices[0] for k, d in dists.items()},
                                             **trial.params})
        return None

    # -- recording ---------------------------------------------------------------------------
    def add(self, strategy: str, placement: Placement, result: MeasureResult,
            genome: str | None, trial: optuna.Trial | None = None) -> Record:
        """Log a measured candidate (flushed), then tell the study: finish ``trial`` if the
        candidate was asked as one, else add a finished trial. ``genome``: the candidate's
        text (:meth:`SearchSpace.format_genome`) for the study (None: made if needed)."""
        g, p = self.space.graph, self.space.profile
        number = trial.number if self.study_numbers and trial is not None else self.next_trial
        rec = Record(graph=g.name, graph_fp=g.fingerprint, profile=p.name, profile_hash=p.hash,
                     strategy=strategy, trial=number, seed=self.seed, run=self.run,
                     measurer=self.measurer, result=result, objective=self.goal,
                     **self.space.record_fields(placement, result))
        self.next_trial = max(self.next_trial, number + 1)  # before the write: an interrupt
        self.taken.add(number)  # between the two leaves a gap, never a number used twice
        self.log.append(rec)
        if trial is not None:
            self._finish(trial, rec, genome)
        elif self.study is not None:
            self._add_trial(rec, genome)
        return rec

    def _finish(self, trial: optuna.Trial, rec: Record, genome: str) -> None:
        """Tell the study the asked ``trial`` was measured; if another worker finished it
        meanwhile (it took this one for dead), add the measurement as a trial of its own."""
        try:
            self._set_attrs(trial, rec, genome)
            self._tell(trial, self.told_value(rec.result))
        except RuntimeError:  # "... has already finished": another worker took this for dead
            if not measured_in_study(self.study, trial.number):  # it finished it as failed
                self._add_trial(rec, genome, extra=trial.user_attrs)

    def logged_attrs(self, trial: FrozenTrial) -> dict | None:
        """The attributes of a dead worker's running ``trial`` if its log (attribute ``log``)
        holds its record (of this run, that trial number): it was measured and logged, and
        died before telling the study. None if the log lacks it or cannot be read."""
        path, genome = trial.user_attrs.get("log"), trial.user_attrs.get("claim")
        if not path or not genome:
            return None
        rec = self._dead_log(path).get((self.run, trial.number))
        return _attrs(rec, genome, self.told_value(rec.result)) if rec is not None else None

    def _dead_log(self, path: str) -> dict[tuple[str, int], Record]:
        """A dead worker's log by (run, trial), read once while the file is unchanged (a
        reclaim finishes several of its trials); empty if it cannot be read."""
        try:
            stat = Path(path).stat()
            seen = self._dead_logs.get(path)
            if seen is None or seen[0] != (stat.st_size, stat.st_mtime_ns):
                with warnings.catch_warnings():  # a torn last line: not logged
                    warnings.simplefilter("ignore")
                    records = {(r.run, r.trial): r for r in read(path)}
                seen = self._dead_logs[path] = ((stat.st_size, stat.st_mtime_ns), records)
        except (OSError, ValueError):
            return {}
        return seen[1]

    def _set_attrs(self, trial: optuna.Trial, rec: Record, genome: str) -> None:
        for k, v in _attrs(rec, genome, self.told_value(rec.result)).items():
            trial.set_user_attr(k, v)

    def release(self, trial: optuna.Trial, latency: float | None = None) -> None:
        """Finish an asked trial that was not measured: with the latency of the equal
        candidate measured before (a duplicate), else as failed. It carries no strategy,
        so it is never taken for a measured candidate. One another worker finished (it
        took this one for dead) is left as it is. (Of a study of several objectives, always
        as failed: ``latency`` is one figure of several.)"""
        self._tell(trial, None if self.multi else latency, skip_if_finished=True)

    def _tell(self, trial: optuna.Trial, value: float | None,
              skip_if_finished: bool = False) -> None:
        self.told.add(trial.number)
        try:
            if value is None:
                self.study.tell(trial, state=TrialState.FAIL, skip_if_finished=skip_if_finished)
            else:
                self.study.tell(trial, value, state=TrialState.COMPLETE,
                                skip_if_finished=skip_if_finished)
        except UpdateFinishedTrialError:  # finished by another worker between check and write
            if not skip_if_finished:
                raise

    def _add_trial(self, rec: Record, genome: str | None = None, extra: dict | None = None) -> None:
        candidate = self.space.candidate_of(rec.pipeline, rec.placement)
        genome = genome or self.space.format_genome(*(x[0] for x in
                                                      self.space.encode([candidate])))
        params = self.params.of(candidate)
        value = self.told_value(rec.result)
        told = {"values" if isinstance(value, list) else "value": value}
        self.study.add_trial(optuna.trial.create_trial(
            params=params, distributions={k: self.params.dists[k] for k in params},
            **told, state=TrialState.COMPLETE if value is not None else TrialState.FAIL,
            user_attrs={**(extra or {}), **_attrs(rec, genome, value)}))


def shared_run_id(study: optuna.Study) -> str:
    """The run id of a study shared by workers: a function of its trial 0 (its number is
    given once by the storage, its start time set once when asked), so every worker finds
    the same id without a race; written on the study as ``run`` for readers. Needs a trial:
    a worker asks its first before it records anything."""
    first = min(study.get_trials(deepcopy=False), key=lambda t: t.number, default=None)
    if first is None:
        raise RuntimeError("a shared study has no run id before its first trial")
    stamp = first.datetime_start.isoformat() if first.datetime_start else ""
    run = hashlib.sha256(f"{study.study_name}|{stamp}".encode()).hexdigest()[:12]
    if study.user_attrs.get("run") != run:
        study.set_user_attr("run", run)
    return run


def _told(values: list[float] | None, multi: bool) -> float | list[float] | None:
    """A finished trial's value as the store gives it (:meth:`Store.sync`): of several
    objectives all of them, else the one; None if it has none."""
    if not values:
        return None
    return list(values) if multi else values[0]


def _attrs(rec: Record, genome: str, value: float | None) -> dict:
    """A measured trial's attributes; ``strategy`` last: a trial that has it has them all
    (they are set one by one), so a worker that finds it on a dead worker's running trial
    can finish the trial with ``latency``, the value the study was told (the objective's
    seconds per inference; see :meth:`SharedStudy.reclaim`)."""
    attrs = {"trial": rec.trial, "genome": genome, "latency": value}
    if not rec.result.ok:
        attrs["error"] = f"{rec.result.error.value}: {rec.result.detail}"
    return attrs | {"strategy": rec.strategy}
