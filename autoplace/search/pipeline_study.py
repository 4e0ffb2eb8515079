"""A pipeline search's trials in an Optuna study (``autoplace pipeline --storage URL``).

The same storages as the tuner's (:func:`autoplace.search.storage.open_storage`): a journal
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

import optuna

from autoplace.pipeline.costs import StageCosts
from autoplace.pipeline.log import trial_fields, trial_of, trial_record
from autoplace.pipeline.search import Trial
from autoplace.search.storage import StorageError, open_storage, redact

KIND = "pipeline"


def study_name(costs: StageCosts, profile_hash: str) -> str:
    g = costs.graph
    return f"autoplace-pipeline-{g.name}-{costs.machine.name}-{g.fingerprint[:8]}-" \
           f"{profile_hash[:8]}"


def open_pipeline_study(url: str, costs: StageCosts, profile_hash: str,
                        name: str | None = None) -> optuna.Study:
    """The study of this graph and mesh in storage ``url`` (made if new); StorageError if
    a study of that name is not a pipeline study."""
    name = name or study_name(costs, profile_hash)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name=name, storage=open_storage(url),
                                direction="maximize", load_if_exists=True)
    kind = study.user_attrs.get("kind")
    if kind is None and not study.trials:
        study.set_user_attr("kind", KIND)
        study.set_user_attr("graph_fp", costs.graph.fingerprint)
        study.set_user_attr("profile_hash", profile_hash)
    elif kind != KIND or study.user_attrs.get("graph_fp") != costs.graph.fingerprint \
            or study.user_attrs.get("profile_hash") != profile_hash:
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
        ok = trial.throughput is not None and math.isfinite(trial.throughput)
        self.study.add_trial(optuna.trial.create_trial(
            state=optuna.trial.TrialState.COMPLETE if ok else optuna.trial.TrialState.FAIL,
            value=trial.throughput if ok else None, params={}, distributions={},
            user_attrs={"trial": trial.number, "strategy": trial.move,
                        "line": json.dumps(line, allow_nan=False)}))


def known_in_study(study: optuna.Study) -> list[Trial]:
    """The trials of a pipeline study, to resume a search without measuring them again."""
    return [trial_of(trial_fields(json.loads(t.user_attrs["line"])))
            for t in study.get_trials(deepcopy=False) if "line" in t.user_attrs]
