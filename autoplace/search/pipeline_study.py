"""A pipeline search's trials in an Optuna study (``autoplace pipeline --storage URL``).

The same storages as the tuner's (:func:`autoplace.search.study_storage.open_storage`): a journal
file, SQLite or PostgreSQL. One study per graph and mesh (``autoplace-pipeline-<graph>-
<mesh>-<fingerprint>-<hash>``, direction maximize), marked ``kind: pipeline``; each trial
holds, as the tuner's trials do, the log's trial number (``trial``) and the move that made it
(``strategy``), and its record (:mod:`autoplace.pipeline.log`) as ``line``; its value is
the streamed throughput (a plan that does not fit, or was not streamed, is a failed trial).
The log stays the source of truth: a trial goes to the log first, then to the study; a
search run again takes the trials of both as known.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import FrozenTrial, TrialState

from autoplace.pipeline.costs import StageCosts
from autoplace.pipeline.log import LEGACY_KIND, read_lines, trial_fields, trial_of, trial_record
from autoplace.pipeline.plan import PipelinePlan, Stage
from autoplace.pipeline.plan_search import Shared, Trial
from autoplace.search.study_storage import StorageError, open_storage, redact
from autoplace.search.workers import (
    BASELINE,
    SEARCH,
    SharedStudy,
    measured_in_study,
    new_worker_id,
)

KIND = "pipeline"


def study_name(costs: StageCosts, profile_hash: str) -> str:
    g = costs.graph
    return f"autoplace-pipeline-{g.name}-{costs.machine.name}-{g.fingerprint[:8]}-" \
           f"{profile_hash[:8]}"


def open_pipeline_study(url: str, costs: StageCosts, profile_hash: str,
                        name: str | None = None, *,
                        storage: optuna.storages.BaseStorage | None = None) -> optuna.Study:
    """The study of this graph and mesh in storage ``url`` (made if new; ``storage``: the
    storage of ``url`` if the caller opened it); StorageError if a study of that name is not
    a pipeline study."""
    name = name or study_name(costs, profile_hash)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name=name, storage=storage or open_storage(url),
                                direction="maximize", load_if_exists=True)
    attrs = study.user_attrs
    if attrs.get("kind") is None and "objective" not in attrs:  # new (a worker may be making
        for key, value in (("graph_fp", costs.graph.fingerprint),  # it: the same values)
                           ("profile_hash", profile_hash), ("kind", KIND)):  # kind last
            study.set_user_attr(key, value)
        attrs = study.user_attrs
    if attrs.get("kind") != KIND or attrs.get("graph_fp") != costs.graph.fingerprint \
            or attrs.get("profile_hash") != profile_hash:
        raise StorageError(f"--storage {redact(url)}: study {name!r} is not the pipeline "
                           f"study of {costs.graph.name} on this mesh")
    return study


class StudyRecorder:
    """Adds each trial to ``study`` (a completed trial, or a failed one if it does not fit)."""

    def __init__(self, study: optuna.Study, costs: StageCosts, *, profile_hash: str,
                 seed: int, run: str):
        self.study, self.costs = study, costs
        self.profile_hash, self.seed, self.run = profile_hash, seed, run

    def __call__(self, trial: Trial) -> None:
        line = trial_record(trial, self.costs, profile_hash=self.profile_hash, seed=self.seed,
                            run=self.run).to_dict()
        _add_trial(self.study, _attrs(trial, line))


def known_in_study(study: optuna.Study) -> list[Trial]:
    """The trials of a pipeline study, to resume a search without measuring them again."""
    return [_trial(t) for t in study.get_trials(deepcopy=False) if "line" in t.user_attrs]


def _add_trial(study: optuna.Study, attrs: dict) -> None:
    """Add a finished trial of a measured plan's attributes (:func:`_attrs`)."""
    value = attrs["latency"]
    study.add_trial(optuna.trial.create_trial(
        state=TrialState.COMPLETE if value is not None else TrialState.FAIL,
        value=value, params={}, distributions={}, user_attrs=attrs))


def _trial(t: FrozenTrial) -> Trial:
    """The trial a study trial's record (``line``) holds."""
    return trial_of(trial_fields(json.loads(t.user_attrs["line"])))


def _attrs(trial: Trial, line: dict) -> dict:
    """A measured trial's attributes, ``strategy`` last (a trial that has it has them all)
    and ``latency`` the value the study is told (see :mod:`autoplace.search.workers`)."""
    ok = trial.throughput is not None and math.isfinite(trial.throughput)
    return {"trial": trial.number, "line": json.dumps(line, allow_nan=False),
            "latency": trial.throughput if ok else None, "strategy": trial.move}


class PipelineWorker(Shared):
    """One of several workers on a pipeline study (``--worker``), through the tuner's
    :class:`~autoplace.search.workers.SharedStudy`: a plan is claimed (its stages and copies
    as the genome) on a study trial asked for it before it is streamed, and measured only if
    the claim wins; the worker logs the trial, then finishes the study trial with its record.
    A dead worker's claims are finished from its log (``recover``) or freed."""

    def __init__(self, study: optuna.Study, storage: optuna.storages.BaseStorage,
                 costs: StageCosts, *, profile_hash: str, seed: int, run: str, log: Path,
                 grace_s: float):
        self.study, self.costs = study, costs
        self.profile_hash, self.seed, self.run = profile_hash, seed, run
        self.asked: dict[int, optuna.Trial] = {}
        self.taken = {t.number for t in study.get_trials(deepcopy=False)  # known_in_study's
                      if "line" in t.user_attrs}
        self.id = new_worker_id()
        self.shared = SharedStudy(study, storage, grace_s=grace_s, worker=self.id, log=log,
                                  recover=self._recover)

    def claim(self, plan: PipelinePlan, baseline: bool, limit: int) -> int | None:
        trial = self.study.ask()
        self.taken.add(trial.number)
        won = self.shared.claim([trial], [_genome(plan)], [BASELINE if baseline else SEARCH],
                                limit)[0]
        if not won:  # (finished already if another worker took this one for dead)
            self.study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
            return None
        self.asked[trial.number] = trial
        return trial.number

    def __call__(self, trial: Trial) -> None:
        """Finish the study trial of ``trial`` (logged before) with its record."""
        asked = self.asked.pop(trial.number)
        line = trial_record(trial, self.costs, profile_hash=self.profile_hash, seed=self.seed,
                            run=self.run).to_dict()
        attrs = _attrs(trial, line)
        try:
            for key, value in attrs.items():
                asked.set_user_attr(key, value)
            self.study.tell(asked, attrs["latency"], state=TrialState.COMPLETE
                            if attrs["latency"] is not None else TrialState.FAIL)
        except UpdateFinishedTrialError:  # another worker took this one for dead
            claim = {k: asked.user_attrs[k] for k in ("kind", "worker", "log", "claim")}
            if not measured_in_study(self.study, trial.number):  # it failed it
                _add_trial(self.study, {**claim, **attrs})  # (not finished from the log)

    def others(self) -> list[Trial]:
        new = [t for t in self.study.get_trials(deepcopy=False,
                                                states=(TrialState.COMPLETE, TrialState.FAIL))
               if t.number not in self.taken and "strategy" in t.user_attrs
               and "line" in t.user_attrs]
        self.taken.update(t.number for t in new)
        return [_trial(t) for t in new]

    def remaining(self, limit: int) -> int:
        return self.shared.remaining(limit)

    def close(self) -> None:
        self.shared.close()

    def _recover(self, trial: FrozenTrial) -> dict | None:
        """A dead worker's running trial's attributes, if its log holds its record."""
        try:
            lines = read_lines(trial.user_attrs["log"])
        except (OSError, ValueError, KeyError):
            return None
        for x in lines:
            if x["trial"] == trial.number and x["graph_fp"] == self.costs.graph.fingerprint:
                found = trial_of(x)
                return _attrs(found, {"kind": LEGACY_KIND, **x})
        return None


def _genome(plan: PipelinePlan) -> str:
    """A plan as text: its stages (``start:end:pes``, then ``/ways`` where split fewer ways,
    ``@units`` where ops run on other units than their defaults, ``~ops`` of the ops that
    stream their weights), copies, and the cuts spilled to the shared memory (``^cuts``)."""
    spilled = f" ^{','.join(map(str, plan.spilled))}" if plan.spilled else ""
    return " ".join(map(_stage_text, plan.stages)) + f" x{plan.replicas}" + spilled


def _stage_text(s: Stage) -> str:
    return (f"{s.start}:{s.end}:{s.pes}"
            + (f"/{','.join(map(str, s.splits))}" if s.splits else "")
            + (f"@{','.join(s.units)}" if s.units else "")
            + (f"~{','.join(map(str, s.streamed))}" if s.streamed else ""))
