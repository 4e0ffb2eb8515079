"""The search: baselines first, then model-guided evolution or an Optuna sampler.

Before the search, the baselines (every feasible single-unit placement, and greedy) are
measured, logged and added to the Optuna study. Then, with the default sampler
``evolve`` (docs/search.md), each round the cost model ranks ``candidates`` evolved
placements and only the best ``batch_size`` are measured; the first round also measures
HEFT's placement. With ``tpe`` or ``random``, Optuna's sampler proposes per-op parameters
(``ask``/``tell``), mixed with mutations of the best so far (ranked by the cost model unless
``cost_model="none"``). Every measured candidate is logged and is a trial of the study.
"""

from __future__ import annotations

import functools
import json
import time
import warnings
from dataclasses import dataclass

import numpy as np
import optuna
from optuna.trial import TrialState

from autoplace.baselines import baselines, greedy
from autoplace.cost_model import XGBCostModel
from autoplace.guided import COST_MODELS, GuidedProposer, make_model
from autoplace.heft import heft_genome
from autoplace.measure.base import MeasurementStopped, Measurer, MeasureResult
from autoplace.measure.batch import fits as fits_profile
from autoplace.params import copy_param, distributions, op_param, to_params, to_placement
from autoplace.records import Record, TuningLog
from autoplace.space import Placement, SearchSpace
from autoplace.warm_start import MODEL_SUFFIXES, load_rows, split_paths

__all__ = ["SAMPLERS", "SearchError", "TuneConfig", "TuneResult", "Tuner", "baselines",
           "copy_param", "distributions", "greedy", "op_param", "to_params", "to_placement",
           "tune"]

SAMPLERS = ("evolve", "tpe", "random")

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
    sampler: str = "evolve"
    storage: str | None = None
    study_name: str | None = None
    resume: bool = False
    progress: bool = False
    #: tpe/random: share of each batch proposed as mutations of the best so far
    mutation_ratio: float = 0.5
    #: "xgb" (learned), "analytic" (the features' estimate) or "none" (no ranking)
    cost_model: str = "xgb"
    #: evolve: candidates the model ranks per round (over three generations)
    candidates: int = 512
    #: evolve: share of each batch drawn from below the model's top
    explore: float = 0.1
    #: earlier tuning logs (.jsonl) and at most one saved model (.json/.ubj)
    warm_start: tuple[str, ...] = ()
    #: write the final cost model here (.json or .ubj)
    save_model: str | None = None

    def __post_init__(self) -> None:
        checks = [
            (0.0 <= self.mutation_ratio <= 1.0,
             f"0 <= mutation_ratio <= 1 must hold, got {self.mutation_ratio}"),
            (self.trials > 0, f"trials > 0 must hold, got trials={self.trials}"),
            (self.batch_size > 0, f"batch_size > 0 must hold, got batch_size={self.batch_size}"),
            (self.sampler in SAMPLERS,
             f"sampler must be one of {SAMPLERS}, got sampler={self.sampler!r}"),
            (self.cost_model in COST_MODELS,
             f"cost_model must be one of {COST_MODELS}, got cost_model={self.cost_model!r}"),
            (self.candidates > 0, f"candidates > 0 must hold, got candidates={self.candidates}"),
            (0.0 <= self.explore <= 1.0, f"0 <= explore <= 1 must hold, got {self.explore}"),
            (isinstance(self.warm_start, tuple),
             f"warm_start must be a tuple of paths, got {self.warm_start!r}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)
        self._check_model_files()

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

    ``baselines`` holds the records of the named baselines, and ``"heft"`` when the
    ``evolve`` search measured HEFT's placement (its first candidate).
    """

    best: Record | None
    baselines: dict[str, Record]
    measured: int
    log10_space: float
    interrupted: bool = False
    wall_s: float = 0.0  # whole job
    measure_s: float = 0.0  # inside the measurer; the rest is search overhead
    #: the cost model's ranking quality per round (also in the ``.model.jsonl`` side file)
    stats: tuple[dict, ...] = ()
    warm_start: str = ""


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
        self.incumbent: tuple[float, Placement] | None = None  # latency, placement of the best
        self.seen: set[str] = set()
        self.measure_s = 0.0
        self.stopped: MeasurementStopped | None = None
        self.baseline_names = {name for name, _ in baselines(space)}
        self.stats: list[dict] = []
        self.stats_path = log.path.with_name(log.path.stem + ".model.jsonl")
        logs, model_file = split_paths(config.warm_start)
        self.warm = load_rows(logs, space) if logs else None
        self.proposer = self._proposer(model_file)
        self.n_trials = self._replay()

    def _proposer(self, model_file: str | None) -> GuidedProposer | None:
        cfg = self.config
        if cfg.sampler != "evolve" and cfg.cost_model == "none":
            return None
        if model_file is not None:
            XGBCostModel.load(model_file)  # a bad file fails now, before any measurement
        model = make_model(cfg.cost_model, seed=cfg.seed, init_model=model_file)
        warm = (self.warm.X, self.warm.y) if self.warm is not None else None
        fits = functools.partial(fits_profile, self.space)
        return GuidedProposer(self.space, model=model, candidates=cfg.candidates,
                              seed=cfg.seed, warm=warm, explore=cfg.explore, feasible=fits)

    def _study(self) -> optuna.Study:
        cfg, g = self.config, self.space.graph
        name = cfg.study_name or f"autoplace-{g.name}-{self.space.profile.name}-{g.fingerprint[:8]}"
        sampler = (optuna.samplers.RandomSampler(seed=cfg.seed) if cfg.sampler == "random"
                   else optuna.samplers.TPESampler(seed=cfg.seed, multivariate=True))
        if cfg.storage and not cfg.resume and name in optuna.get_all_study_names(cfg.storage):
            raise SearchError(f"study {name!r} already exists in {cfg.storage}; "
                              "pass --resume to continue it")
        return optuna.create_study(study_name=name, storage=cfg.storage, sampler=sampler,
                                   direction="minimize", load_if_exists=cfg.resume)

    def _replay(self) -> int:
        """Feed the trials of a resumed study to the proposer; the number of trials."""
        trials = self.study.get_trials(deepcopy=False)
        done = [(t, p) for t in trials if t.state in (TrialState.COMPLETE, TrialState.FAIL)
                and t.user_attrs.get("strategy")  # asked, never measured: no strategy
                and (p := self._trial_placement(t)) is not None]
        for t, p in done:
            self.seen.add(p.to_json())
            if t.value is not None and (self.incumbent is None or t.value < self.incumbent[0]):
                self.incumbent = (t.value, p)
        if self.proposer is not None and done:
            choice, mode = self.space.encode([p for _, p in done])
            lat = np.array([np.nan if t.value is None else t.value for t, _ in done])
            self.proposer.observe(choice, mode, lat)
        return len(trials)

    def _trial_placement(self, trial) -> Placement | None:
        genome = trial.user_attrs.get("genome")
        if genome:
            return self.space.decode(*self.space.parse_genome(genome))
        if trial.params:
            return to_placement(self.space, self._complete(trial.params))
        return None

    def _measure(self, placements: list[Placement]) -> list[MeasureResult | None]:
        """The measurer's results; when it stops mid-batch, what it got (None for the
        rest): the caller logs those, then :meth:`_go_on` raises the stop."""
        t0 = time.perf_counter()
        try:
            return self.measurer.measure(placements)
        except MeasurementStopped as exc:
            self.stopped = exc
            return exc.partial or [None] * len(placements)
        finally:
            self.measure_s += time.perf_counter() - t0

    def _go_on(self) -> None:
        if self.stopped is not None:
            raise self.stopped

    def _record(self, strategy: str, trial: int, placement: Placement,
                result: MeasureResult) -> Record:
        g, p = self.space.graph, self.space.profile
        rec = Record(graph=g.name, graph_fp=g.fingerprint, profile=p.name,
                     profile_hash=p.hash, strategy=strategy, trial=trial,
                     seed=self.config.seed, measurer=self.measurer.name,
                     placement=placement, result=result)
        self.log.append(rec)
        self.records.append(rec)
        if self.config.sampler != "evolve":  # evolve keeps genome keys in its proposer
            self.seen.add(placement.to_json())
        if result.ok and (self.incumbent is None or result.latency_s < self.incumbent[0]):
            self.incumbent = (result.latency_s, placement)
        return rec

    def _add_trial(self, strategy: str, placement: Placement, res: MeasureResult,
                   genome: str) -> None:
        """A measured candidate as a finished trial: per-op parameters for the Optuna
        samplers, or only its genome (a few hundred bytes) for ``evolve``."""
        attrs = self._attrs(strategy, res)
        if self.config.sampler == "evolve":
            params, dists = {}, {}
            attrs["genome"] = genome
        else:
            params = to_params(self.space, placement)
            dists = {k: self.dists[k] for k in params}
        self.study.add_trial(optuna.trial.create_trial(
            params=params, distributions=dists, value=res.latency_s if res.ok else None,
            state=TrialState.COMPLETE if res.ok else TrialState.FAIL, user_attrs=attrs))
        self.n_trials += 1

    def _observe(self, choice: np.ndarray, mode: np.ndarray,
                 results: list[MeasureResult | None]) -> None:
        """Teach the proposer the measured results (None: never measured, skipped)."""
        keep = [i for i, r in enumerate(results) if r is not None]
        if self.proposer is not None and keep:
            lat = np.array([r.latency_s if r.ok else np.nan for r in results if r is not None])
            self.proposer.observe(choice[keep], mode[keep], lat)

    def run_baselines(self) -> dict[str, Record]:
        """Measure, log and add to the study every baseline (skipped when resuming)."""
        done = {t.user_attrs.get("strategy") for t in self.study.get_trials(deepcopy=False)}
        todo = [(n, p) for n, p in baselines(self.space) if n not in done]
        results = self._measure([p for _, p in todo])
        choice, mode = self.space.encode([p for _, p in todo])
        out = {}
        for b, ((name, placement), res) in enumerate(zip(todo, results)):
            if res is not None:
                out[name] = self._record(name, self.n_trials, placement, res)
                self._add_trial(name, placement, res,
                                self.space.format_genome(choice[b], mode[b]))
        self._observe(choice, mode, results)
        self._go_on()
        return out

    @staticmethod
    def _attrs(strategy: str, res: MeasureResult) -> dict:
        attrs = {"strategy": strategy}
        if not res.ok:
            attrs["error"] = f"{res.error.value}: {res.detail}"
        return attrs

    def search_trials_done(self) -> int:
        """Finished trials of the search (not baselines, not asked-but-unmeasured)."""
        return sum(1 for t in self.study.get_trials(deepcopy=False)
                   if t.user_attrs.get("strategy") not in (None, *self.baseline_names)
                   and t.state in (TrialState.COMPLETE, TrialState.FAIL))

    def run_search(self, progress) -> int:
        """Search until ``trials`` search trials are done; returns how many were measured."""
        if self.config.sampler == "evolve":
            return self._run_guided(progress)
        return self._run_optuna(progress)

    # -- evolve: model-guided rounds -------------------------------------------------------
    def _heft_genome(self) -> tuple[np.ndarray, np.ndarray] | None:
        """HEFT's placement as a genome, if it was not measured yet (it seeds the search)."""
        choice, mode = (x[None, :] for x in heft_genome(self.space))
        self.proposer.seed_population(choice, mode)
        key = self.space.keys(choice, self.space.normalize(choice, mode))
        return None if key[0] in self.proposer.measured_genomes else (choice, mode)

    def _run_guided(self, progress) -> int:
        cfg, measured = self.config, 0
        remaining = cfg.trials - self.search_trials_done()
        first = self._heft_genome() if remaining > 0 else None
        while remaining > 0:
            n = min(cfg.batch_size, remaining)
            choice, mode, predicted, labels, rows = self._next_batch(n, first)
            first = None
            if not len(choice):
                warnings.warn(f"search stopped after {measured} trials: no unmeasured "
                              "placement left to propose", stacklevel=2)
                break
            placements = [self.space.decode(c, m) for c, m in zip(choice, mode)]
            results = self._measure(placements)
            for b, (label, pl, res) in enumerate(zip(labels, placements, results)):
                if res is not None:
                    self._record(label, self.n_trials, pl, res)
                    self._add_trial(label, pl, res, self.space.format_genome(choice[b], mode[b]))
            self._observe(choice, mode, results)
            self._go_on()
            self._round_stats(predicted, rows)
            measured, remaining = measured + len(placements), remaining - len(placements)
            progress(len(placements))
        return measured

    def _next_batch(self, n: int, first):
        """``n`` genomes to measure (HEFT's first, if given), predictions, labels, rows."""
        proposer = self.proposer
        rows = proposer.fit()
        parts, labels = [], []
        if first is not None:
            parts.append((*first, proposer.score(*first)[0]))
            labels.append("heft")
        if n > len(labels):
            batch = proposer.propose(n - len(labels))
            parts.append((batch.choice, batch.mode, batch.predicted))
            labels.extend(batch.strategy)
        if not labels:
            return np.zeros((0, 0), dtype=np.int64), None, None, labels, rows
        choice, mode, predicted = (np.concatenate(x) for x in zip(*parts))
        return choice, mode, predicted, labels, rows

    def _round_stats(self, predicted: np.ndarray, rows: int) -> None:
        """Ranking quality of the model on the batch it just chose (before training on it)."""
        if self.config.cost_model == "none":
            return
        stats = {"round": len(self.stats), "measured": len(self.records), "train_rows": rows,
                 **self.proposer.batch_quality(predicted)}
        self.stats.append(stats)
        with open(self.stats_path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(stats, sort_keys=True) + "\n")

    # -- tpe / random: Optuna's sampler ----------------------------------------------------
    def mutate(self) -> dict | None:
        """Parameters of a mutation of the best so far not measured yet (None if none found):
        the model's pick among evolved candidates, or else a random one-parameter change."""
        if self.incumbent is None:
            return None
        if self.proposer is not None:
            batch = self.proposer.propose(1)
            if len(batch.choice):
                placement = self.space.decode(batch.choice[0], batch.mode[0])
                return to_params(self.space, placement)
        names = sorted(self.dists)
        for _ in range(20):
            params = to_params(self.space, self.incumbent[1])
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

    def _tell(self, trial: optuna.Trial, strategy: str, res: MeasureResult) -> None:
        for k, v in self._attrs(strategy, res).items():
            trial.set_user_attr(k, v)
        if res.ok:
            _finish(self.study, trial, res.latency_s, TrialState.COMPLETE)
        else:
            _finish(self.study, trial, None, TrialState.FAIL)

    def _run_optuna(self, progress) -> int:
        """Ask, measure, log, tell in batches until ``trials`` search trials are done."""
        cfg, measured = self.config, 0
        remaining = cfg.trials - self.search_trials_done()
        while remaining > 0:
            batch = [self._ask() for _ in range(min(cfg.batch_size, remaining))]
            told: set[int] = set()
            try:
                placements = [to_placement(self.space, t.params) for t, _ in batch]
                results = self._measure(placements)
                for (t, strategy), pl, res in zip(batch, placements, results):
                    if res is not None:
                        self._record(strategy, t.number, pl, res)
                        self._tell(t, strategy, res)
                        told.add(t.number)
            finally:
                for t, _ in batch:  # asked but never measured (stopped): not a result
                    if t.number not in told:
                        _finish(self.study, t, None, TrialState.FAIL)
            if self.proposer is not None:
                self._observe(*self.space.encode(placements), results)
            self._go_on()
            measured += len(placements)
            remaining -= len(placements)
            progress(len(placements))
        return measured

    def save_model(self, path: str) -> None:
        """Fit the cost model on everything measured and write it (XGBoost's format)."""
        self.proposer.fit(force=True)
        self.proposer.model.save(path)


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
            if config.save_model:
                tuner.save_model(config.save_model)
        except KeyboardInterrupt:
            interrupted = True
    base.update({r.strategy: r for r in tuner.records if r.strategy == "heft"})
    best = min((r for r in tuner.records if r.result.ok),
               key=lambda r: (r.result.latency_s, r.trial), default=None)
    return TuneResult(best=best, baselines=base, measured=len(tuner.records),
                      log10_space=space.log10_size, interrupted=interrupted,
                      wall_s=time.perf_counter() - t0, measure_s=tuner.measure_s,
                      stats=tuple(tuner.stats),
                      warm_start=tuner.warm.summary() if tuner.warm is not None else "")
