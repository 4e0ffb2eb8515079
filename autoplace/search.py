"""The search: an Optuna study over per-op (unit, scope) and per-edge copy-mode parameters.

Optuna's ``ask``/``tell`` drive it. Before the search, the baselines (every feasible
single-unit placement, and a greedy one) are measured, logged and added to the study as
completed trials so the sampler starts from them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import optuna
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState

from autoplace.measure.base import Measurer, MeasureResult
from autoplace.measure.simulator import op_seconds
from autoplace.records import Record, TuningLog
from autoplace.space import Placement, SearchSpace

SAMPLERS = ("tpe", "random")

try:
    from optuna.study._tell import _tell_with_warning
except ImportError:  # pragma: no cover - a future Optuna without it
    _tell_with_warning = None


def _finish(study: optuna.Study, trial: optuna.Trial, value: float | None,
            state: TrialState) -> None:
    """``study.tell`` without its deep copy of the finished trial.

    ``Study.tell`` returns a deep copy of the trial, which costs ~10 ms with 300
    parameters; the search never uses it, so call the routine ``tell`` wraps.
    """
    if _tell_with_warning is None:
        study.tell(trial, value, state=state)
    else:
        _tell_with_warning(study=study, trial=trial, value_or_values=value, state=state,
                           suppress_warning=True)


class SearchError(ValueError):
    """The search cannot start (e.g. a study that exists without ``resume``)."""


@dataclass(frozen=True, kw_only=True)
class TuneConfig:
    """Settings of one tuning job."""

    trials: int = 200
    seed: int = 0
    batch_size: int = 8
    sampler: str = "tpe"
    storage: str | None = None
    study_name: str | None = None
    resume: bool = False
    progress: bool = False
    #: share of each batch proposed as one-parameter mutations of the best so far
    mutation_ratio: float = 0.5

    def __post_init__(self) -> None:
        if not 0.0 <= self.mutation_ratio <= 1.0:
            raise ValueError(f"0 <= mutation_ratio <= 1 must hold, got {self.mutation_ratio}")
        if self.trials <= 0:
            raise ValueError(f"trials > 0 must hold, got trials={self.trials}")
        if self.batch_size <= 0:
            raise ValueError(f"batch_size > 0 must hold, got batch_size={self.batch_size}")
        if self.sampler not in SAMPLERS:
            raise ValueError(f"sampler must be one of {SAMPLERS}, got sampler={self.sampler!r}")


@dataclass(frozen=True, kw_only=True)
class TuneResult:
    """What a tuning job found: the best record, the baselines, how far it got."""

    best: Record | None
    baselines: dict[str, Record]
    measured: int
    log10_space: float
    interrupted: bool = False
    wall_s: float = 0.0  # whole job
    measure_s: float = 0.0  # inside the measurer; the rest is search overhead


# -- the parameterisation -------------------------------------------------------------------
def op_param(name: str) -> str:
    return f"op:{name}"


def copy_param(edge: str) -> str:
    return f"copy:{edge}"


def distributions(space: SearchSpace) -> dict[str, CategoricalDistribution]:
    """One categorical per op ("unit@scope"), one per edge with a choice of copy mode."""
    dists = {
        op_param(op.name): CategoricalDistribution([f"{u}@{s}" for u, s in choices])
        for op, choices in zip(space.graph.ops, space.op_choices)
    }
    for name, modes in zip(space.edge_names, space.edge_modes):
        if len(modes) > 1:
            dists[copy_param(name)] = CategoricalDistribution(modes)
    return dists


def to_placement(space: SearchSpace, params: dict) -> Placement:
    """Decode Optuna parameters into a placement (copy modes repaired to fit routes)."""
    choice = []
    for op, choices in zip(space.graph.ops, space.op_choices):
        unit, scope = params[op_param(op.name)].split("@", 1)
        choice.append(choices.index((unit, scope)))
    prefs = {k: params[copy_param(n)] for k, n in enumerate(space.edge_names)
             if copy_param(n) in params}
    return space.decode(choice, prefs)


def to_params(space: SearchSpace, placement: Placement) -> dict:
    """Optuna parameters of a placement (edges without a copy keep no parameter)."""
    params = {op_param(k): f"{u}@{s}" for k, (u, s) in placement.ops.items()}
    free = {n for n, m in zip(space.edge_names, space.edge_modes) if len(m) > 1}
    params.update({copy_param(n): m for n, m in placement.copies.items() if n in free})
    return params


# -- baselines ------------------------------------------------------------------------------
def greedy(space: SearchSpace) -> Placement:
    """Each op on the unit that runs it fastest, in that unit's home scope.

    Home scopes (the default scope where the unit can use it) keep the greedy placement
    clear of small on-chip memories, so it is feasible whenever the default scope is big
    enough; copies are async where the route allows.
    """
    prof = space.profile
    default = prof.scope(prof.default_scope)
    choice = []
    for op, cs in zip(space.graph.ops, space.op_choices):
        homes = [j for j, (u, s) in enumerate(cs) if s == prof.home_scope(u)] or range(len(cs))
        choice.append(min(homes, key=lambda j, op=op, cs=cs: op_seconds(
            op, prof.unit(cs[j][0]), prof.scope(cs[j][1]), default)))
    return space.decode(choice, {k: "async" for k in range(len(space.edge_names))})


def baselines(space: SearchSpace) -> list[tuple[str, Placement]]:
    """Named baseline placements: ``single:<unit>`` for each unit that takes every op, greedy."""
    out = [(f"single:{u.name}", p) for u in space.profile.units
           if (p := space.uniform(u.name)) is not None]
    return out + [("greedy", greedy(space))]


# -- the job --------------------------------------------------------------------------------
class Tuner:
    """One tuning job: a graph on a profile, a measurer, a log, a study."""

    def __init__(self, space: SearchSpace, measurer: Measurer, log: TuningLog,
                 config: TuneConfig):
        self.space, self.measurer, self.log, self.config = space, measurer, log, config
        self.dists = distributions(space)
        self.study = self._study()
        self.records: list[Record] = []
        self.rng = np.random.default_rng(config.seed)
        self.incumbent: tuple[float, dict] | None = None  # (latency, params) of the best
        self.seen: set[str] = set()
        self.measure_s = 0.0

    def _measure(self, placements: list[Placement]) -> list[MeasureResult]:
        t0 = time.perf_counter()
        try:
            return self.measurer.measure(placements)
        finally:
            self.measure_s += time.perf_counter() - t0

    def _study(self) -> optuna.Study:
        cfg, g = self.config, self.space.graph
        name = cfg.study_name or f"autoplace-{g.name}-{self.space.profile.name}-{g.fingerprint[:8]}"
        sampler = (optuna.samplers.TPESampler(seed=cfg.seed, multivariate=True)
                   if cfg.sampler == "tpe" else optuna.samplers.RandomSampler(seed=cfg.seed))
        if cfg.storage and not cfg.resume and name in optuna.get_all_study_names(cfg.storage):
            raise SearchError(f"study {name!r} already exists in {cfg.storage}; "
                              "pass --resume to continue it")
        return optuna.create_study(study_name=name, storage=cfg.storage, sampler=sampler,
                                   direction="minimize", load_if_exists=cfg.resume)

    def _record(self, strategy: str, trial: int, placement: Placement,
                result: MeasureResult) -> Record:
        g, p = self.space.graph, self.space.profile
        rec = Record(graph=g.name, graph_fp=g.fingerprint, profile=p.name,
                     profile_hash=p.hash, strategy=strategy, trial=trial,
                     seed=self.config.seed, measurer=self.measurer.name,
                     placement=placement, result=result)
        self.log.append(rec)
        self.records.append(rec)
        self.seen.add(placement.to_json())
        if result.ok and (self.incumbent is None or result.latency_s < self.incumbent[0]):
            self.incumbent = (result.latency_s, to_params(self.space, placement))
        return rec

    def run_baselines(self) -> dict[str, Record]:
        """Measure, log and add to the study every baseline (skipped when resuming)."""
        done = {t.user_attrs.get("strategy") for t in self.study.get_trials(deepcopy=False)}
        todo = [(n, p) for n, p in baselines(self.space) if n not in done]
        results = self._measure([p for _, p in todo])
        out = {}
        for (name, placement), res in zip(todo, results):
            number = len(self.study.get_trials(deepcopy=False))
            out[name] = self._record(name, number, placement, res)
            params = to_params(self.space, placement)
            self.study.add_trial(optuna.trial.create_trial(
                params=params, distributions={k: self.dists[k] for k in params},
                value=res.latency_s if res.ok else None,
                state=TrialState.COMPLETE if res.ok else TrialState.FAIL,
                user_attrs=self._attrs(name, res)))
        return out

    @staticmethod
    def _attrs(strategy: str, res: MeasureResult) -> dict:
        attrs = {"strategy": strategy}
        if not res.ok:
            attrs["error"] = f"{res.error.value}: {res.detail}"
        return attrs

    def _tell(self, trial: optuna.Trial, strategy: str, res: MeasureResult) -> None:
        for k, v in self._attrs(strategy, res).items():
            trial.set_user_attr(k, v)
        if res.ok:
            _finish(self.study, trial, res.latency_s, TrialState.COMPLETE)
        else:
            _finish(self.study, trial, None, TrialState.FAIL)

    def search_trials_done(self) -> int:
        return sum(1 for t in self.study.get_trials(deepcopy=False)
                   if t.user_attrs.get("strategy") in (self.config.sampler, "mutate")
                   and t.state in (TrialState.COMPLETE, TrialState.FAIL))

    def mutate(self) -> dict | None:
        """One-parameter change of the incumbent not measured yet (None if none found)."""
        if self.incumbent is None:
            return None
        names = sorted(self.dists)
        for _ in range(20):
            params = dict(self.incumbent[1])
            name = names[self.rng.integers(len(names))]
            choices = [c for c in self.dists[name].choices if c != params.get(name)]
            if not choices:
                continue
            params[name] = choices[self.rng.integers(len(choices))]
            if to_placement(self.space, self._complete(params)).to_json() not in self.seen:
                return params
        return None

    def _complete(self, params: dict) -> dict:
        """Fill parameters a decode does not use with any valid value."""
        return {**{k: d.choices[0] for k, d in self.dists.items()}, **params}

    def _ask(self) -> tuple[optuna.Trial, str]:
        if self.rng.random() < self.config.mutation_ratio:
            params = self.mutate()
            if params is not None:
                self.study.enqueue_trial(params)
                return self.study.ask(self.dists), "mutate"
        return self.study.ask(self.dists), self.config.sampler

    def run_search(self, progress) -> int:
        """Ask, measure, log, tell in batches until ``trials`` search trials are done."""
        cfg, measured = self.config, 0
        remaining = cfg.trials - self.search_trials_done()
        while remaining > 0:
            batch = [self._ask() for _ in range(min(cfg.batch_size, remaining))]
            try:
                placements = [to_placement(self.space, t.params) for t, _ in batch]
                results = self._measure(placements)
                for (t, strategy), pl, res in zip(batch, placements, results):
                    self._record(strategy, t.number, pl, res)
                    self._tell(t, strategy, res)
                    batch = batch[1:]
            finally:
                for t, _ in batch:  # asked but never measured (interrupted): not a result
                    _finish(self.study, t, None, TrialState.FAIL)
            measured += len(placements)
            remaining -= len(placements)
            progress(len(placements))
        return measured


def tune(space: SearchSpace, measurer: Measurer, log: TuningLog,
         config: TuneConfig) -> TuneResult:
    """Run baselines then the search; Ctrl-C stops cleanly with everything measured logged."""
    from tqdm import tqdm

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    t0 = time.perf_counter()
    tuner = Tuner(space, measurer, log, config)
    interrupted, base = False, {}
    with tqdm(total=config.trials, disable=not config.progress, unit="trial") as bar:
        try:
            base = tuner.run_baselines()
            tuner.run_search(bar.update)
        except KeyboardInterrupt:
            interrupted = True
    best = min((r for r in tuner.records if r.result.ok),
               key=lambda r: (r.result.latency_s, r.trial), default=None)
    return TuneResult(best=best, baselines=base, measured=len(tuner.records),
                      log10_space=space.log10_size, interrupted=interrupted,
                      wall_s=time.perf_counter() - t0, measure_s=tuner.measure_s)
