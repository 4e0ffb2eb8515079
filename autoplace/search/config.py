"""Settings of one tuning job (:class:`TuneConfig`) and what it found (:class:`TuneResult`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from autoplace.measure.limits import Limits
from autoplace.measure.objective import Objective, objective_named
from autoplace.records.tuning_log import Record

#: ``--cost-model`` values: learned (the simulator plus a learned residual), the simulator
#: alone, the analytic estimate alone, none (random ranking)
COST_MODELS = ("xgb", "simulator", "analytic", "none")
#: ``--cost-model`` values over a mesh's plans: how each candidate's move is picked (the
#: learned model, the analytic period alone, or one move per candidate, unranked)
RANKINGS = ("xgb", "analytic", "none")

#: a saved cost model's file suffixes (XGBoost's JSON and UBJ)
MODEL_SUFFIXES = (".json", ".ubj")


def split_paths(paths: Sequence[str]) -> tuple[list[str], str | None]:
    """(logs, model file) of ``--warm-start``: a ``.json``/``.ubj`` path is a saved model
    (at most one: ValueError otherwise)."""
    models = [p for p in paths if Path(p).suffix in MODEL_SUFFIXES]
    if len(models) > 1:
        raise ValueError(f"--warm-start takes at most one saved model, got {models}")
    return [p for p in paths if p not in models], (models[0] if models else None)


#: the search strategies by name (``autoplace.search.strategies`` builds them)
SAMPLERS = ("evolve", "tpe", "random", "hill", "steepest")
#: settings of the single-objective strategies' sampling and cost model, which a search of
#: several objectives leaves at their defaults (TuneConfig._check_several)
_MODEL_SETTINGS = ("sampler", "cost_model", "candidates", "explore", "mutation_ratio",
                   "warm_start", "save_model")
#: what a study's trials carry as parameters (``--study-params``; search.params.TrialParams)
STUDY_PARAMS = ("counts", "ops", "none")


#: candidates a round measures unless told (``batch_size=None``). With a free measurer (the
#: simulator) the tuner's own time is the job's, and a round's evolution costs about the
#: same whatever the round then measures: rounds of 16 halve the overhead per trial against
#: 8, with bests as good or better over five seeds (docs/search.md, "Candidates a round").
#: With a costly one (this host, boards) the measurements are the job's time, and rounds of
#: 8 feed what each measured back into the ranking sooner.
FREE_BATCH, COSTLY_BATCH = 16, 8


@dataclass(frozen=True, kw_only=True)
class TuneConfig:
    """Settings of one tuning job."""

    #: search candidates after the baselines (0: the baselines only)
    trials: int = 200
    seed: int = 0
    #: what the search minimises: ``"latency"`` (one inference), ``"throughput"`` (the
    #: period of a stream, docs/simulator.md) or ``"energy"`` (joules per inference); or the
    #: front of two or three of latency, energy, peak_memory (``"latency,energy"``,
    #: docs/pareto.md); all are logged
    objective: str = "latency"
    #: bounds the best must keep (``--max-latency``, ``--max-energy``, ``--max-memory``):
    #: a candidate beyond them is no better than a failure (docs/pareto.md)
    limits: Limits = field(default_factory=Limits)
    #: candidates measured per round; None: the job's measurer's (:meth:`with_batch`)
    batch_size: int | None = None
    sampler: str = "evolve"
    storage: str | None = None
    study_name: str | None = None
    #: the parameters of the study's trials (search.params.STUDY_PARAMS): ``counts`` (ops
    #: per unit and scope, copies per mode), ``ops`` (a categorical per op and free edge) or
    #: ``none``; None: ``ops`` for the Optuna samplers (they ask those), else ``counts``
    study_params: str | None = None
    #: continue from the tuning log (and the study, with ``storage``): nothing logged is
    #: measured again, trial numbers go on after the logged ones
    resume: bool = False
    #: add a new run to a log that already holds records (without it, such a log is refused
    #: unless the job continues: ``resume`` or a worker)
    append: bool = False
    progress: bool = False
    #: join the study in ``storage`` as one of several workers (autoplace.search.workers):
    #: trial numbers are the study's, ``trials`` counts the whole study's search candidates
    worker: bool = False
    #: a worker silent this long (seconds) is dead; its running trials are reclaimed
    grace_s: float = 120.0
    #: tpe/random: share of each batch proposed as mutations of the best so far
    mutation_ratio: float = 0.5
    #: "xgb" (the simulator plus a learned residual), "simulator", "analytic" (the features'
    #: estimate) or "none" (no ranking)
    cost_model: str = "xgb"
    #: evolve: candidates the model ranks per round (over three generations)
    candidates: int = 512
    #: evolve: share of each batch drawn from below the model's top
    explore: float = 0.1
    #: share of ``trials`` at the end of the search (at least two batches) in which the best
    #: is first made a one-op local optimum (autoplace.search.descent); 0: no descent
    descent: float = 0.125
    #: earlier tuning logs (.jsonl) and at most one saved model (.json/.ubj)
    warm_start: tuple[str, ...] = ()
    #: write the final cost model here (.json or .ubj)
    save_model: str | None = None

    def __post_init__(self) -> None:
        checks = [
            (0.0 <= self.mutation_ratio <= 1.0,
             f"0 <= mutation_ratio <= 1 must hold, got {self.mutation_ratio}"),
            (self.trials >= 0, f"trials >= 0 must hold, got trials={self.trials}"),
            (self.batch_size is None or self.batch_size > 0,
             f"batch_size > 0 must hold, got batch_size={self.batch_size}"),
            (self.sampler in SAMPLERS,
             f"sampler must be one of {SAMPLERS}, got sampler={self.sampler!r}"),
            (self.study_params in (None, *STUDY_PARAMS),
             f"study_params must be one of {STUDY_PARAMS}, got {self.study_params!r}"),
            (self.cost_model in COST_MODELS,
             f"cost_model must be one of {COST_MODELS}, got cost_model={self.cost_model!r}"),
            (self.candidates > 0, f"candidates > 0 must hold, got candidates={self.candidates}"),
            (0.0 <= self.explore <= 1.0, f"0 <= explore <= 1 must hold, got {self.explore}"),
            (0.0 <= self.descent <= 1.0, f"0 <= descent <= 1 must hold, got {self.descent}"),
            (not self.worker or (self.storage or "sqlite").split(":")[0] != "sqlite",
             "worker needs a storage the workers can share: journal:PATH on one host or "
             "postgresql://... (SQLite is not meant for concurrent writers)"),
            (math.isfinite(self.grace_s) and self.grace_s > 0,
             f"grace_s > 0 must hold, got grace_s={self.grace_s}"),
            (isinstance(self.limits, Limits),
             f"limits must be a Limits, got {self.limits!r}"),
            (isinstance(self.warm_start, tuple),
             f"warm_start must be a tuple of paths, got {self.warm_start!r}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)
        objective_named(self.objective)  # (a one-line error naming the bad spec)
        self._check_several()
        self._check_model_files()

    def _check_several(self) -> None:
        """A search of several objectives (autoplace.search.pareto_search) ranks by the
        simulator's figures and residuals it learns itself (one model per objective,
        autoplace.search.learned_figures): the evolution's sampler and model settings would
        do nothing."""
        if not self.multi:
            return
        default = TuneConfig()
        given = [f"{k}={getattr(self, k)!r}" for k in _MODEL_SETTINGS
                 if getattr(self, k) != getattr(default, k)]
        if given:
            raise ValueError(f"objective {self.objective!r}: several objectives are searched "
                             f"by the simulator's figures and residuals the search learns "
                             f"itself, without {', '.join(given)}")

    def with_batch(self, free: bool) -> TuneConfig:
        """This config with its batch size set: its own, else :data:`FREE_BATCH` for a
        measurer that is ``free`` (the simulator), :data:`COSTLY_BATCH` for one that is not
        (a round of a front's search, several objectives, is always :data:`COSTLY_BATCH`:
        its rounds learn residuals per objective)."""
        if self.batch_size is not None:
            return self
        free = free and not self.multi
        return replace(self, batch_size=FREE_BATCH if free else COSTLY_BATCH)

    @property
    def goal(self) -> Objective:
        """The :class:`Objective` that :attr:`objective` names, within :attr:`limits`."""
        return objective_named(self.objective).bounded(self.limits)

    @property
    def multi(self) -> bool:
        """Whether the job searches several objectives' front (``latency,energy``)."""
        return len(self.goal.criteria) > 1

    @property
    def continues(self) -> bool:
        """Whether the job takes in what was measured before (``resume``, or a worker)."""
        return self.resume or self.worker

    def _check_model_files(self) -> None:
        if self.save_model is not None and not self.save_model.endswith(MODEL_SUFFIXES):
            raise ValueError(f"save_model must end in .json or .ubj, got {self.save_model!r}")
        split_paths(self.warm_start)  # at most one saved model
        if (self.warm_start or self.save_model is not None) and self.cost_model != "xgb":
            raise ValueError("warm_start and save_model are for a learned cost model: they "
                             f"need cost_model='xgb', got {self.cost_model!r}")


@dataclass(frozen=True, kw_only=True)
class TuneResult:
    """What a tuning job found: the best record, the baselines, how far it got.

    ``best`` and ``baselines`` cover the whole job, records a resumed run found in its log
    included; ``measured`` counts what this run measured. ``baselines`` holds the records
    of the named baselines, and ``"heft"`` when the ``evolve`` search measured HEFT's
    placement (its first candidate).
    """

    best: Record | None
    baselines: dict[str, Record]
    measured: int
    log10_space: float
    interrupted: bool = False
    #: interrupted, the best was made a one-op local optimum before stopping
    polished: bool = False
    resumed: int = 0  # records of the job found in the log and the study before this run
    wall_s: float = 0.0  # whole job
    measure_s: float = 0.0  # inside the measurer; the rest is search overhead
    #: the cost model's ranking quality per round (also in the ``.model.jsonl`` side file)
    stats: tuple[dict, ...] = ()
    warm_start: str = ""
    #: the records this run measured, in order (``measured`` of them)
    records: tuple[Record, ...] = ()
    #: a job of several objectives: its front over them within its limits (the whole
    #: job's, best by the first objective first; :func:`autoplace.records.front.front`)
    front: tuple[Record, ...] = ()
