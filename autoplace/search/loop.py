"""The tuning loop: baselines first, then a search strategy's proposals, measured and recorded.

Flow of one round: the strategy proposes genomes; the loop drops those the job measured
already (the log is the source of truth), decodes the rest, has the measurer measure them,
records each (log line, then study trial) and lets the strategy observe the results. The
loop knows no strategy by name (:mod:`autoplace.search.strategies` builds them).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import replace

import numpy as np
import optuna

from autoplace.measure.base import MeasurementStopped, Measurer, MeasureResult
from autoplace.pipeline.plan_space import PlanSpace
from autoplace.records.tuning_log import MODEL_STATS, Record, TuningLog, best, side_file
from autoplace.search.checkpoint import (
    Checkpoint,
    CheckpointWriter,
    checkpoint_path,
    read_checkpoint,
)
from autoplace.search.config import TuneConfig, TuneResult
from autoplace.search.descent import predicted
from autoplace.search.interrupt import CtrlC, from_ctrl_c
from autoplace.search.local_search import LocalSearch
from autoplace.search.store import Store, open_study
from autoplace.search.strategies import (
    check_given,
    make_strategy,
    named_baselines,
    needs_study,
    study_sampler,
    warm_rows,
)
from autoplace.search.strategy import Proposal, SearchStrategy
from autoplace.search.study_storage import open_storage
from autoplace.search.workers import (
    BASELINE,
    SEARCH,
    SharedStudy,
    new_worker_id,
    worker_seed,
)
from autoplace.space import Placement, SearchSpace

#: rounds in a row whose every candidate was measured before, after which the search ends
STALLED_ROUNDS = 10


class Tuner:
    """One tuning job: a measurer, a store (log and study), a strategy, over a space of
    placements (:class:`~autoplace.space.SearchSpace`) or of mesh pipeline plans
    (:class:`~autoplace.pipeline.plan_space.PlanSpace`): the loop handles both alike, as
    genome rows the space keys, decodes and records."""

    def __init__(self, space: SearchSpace | PlanSpace, measurer: Measurer, store: Store,
                 strategy: SearchStrategy, config: TuneConfig,
                 shared: SharedStudy | None = None, *, name: str | None = None):
        self.space, self.measurer, self.store = space, measurer, store
        self.strategy, self.config, self.shared = strategy, config, shared
        #: the strategy's name in a checkpoint's header: ``config.sampler``, unless given
        self.name = name or config.sampler
        self.objective = config.goal  # what "faster" means: latency or a stream's period
        #: (name, candidate) measured before the search
        self.baselines = named_baselines(space)
        self.baseline_names = {name for name, _ in self.baselines}
        self.references = self.baseline_names | {"heft"}  # measured as they are
        self.records: list[Record] = []  # measured by this run
        #: genome key -> the objective's seconds (None: failed, or no value for it)
        self.seen: dict[bytes, float | None] = {}
        self.best_s: float | None = None  # the least of them (told to the measurer)
        self.done: list[str] = []  # strategy of every candidate of the job so far
        self._search_done = 0  # of them, candidates of the search (not baselines)
        #: logged candidates of the round a resumed job stopped in, by genome key: taken
        #: from the log when that round is proposed again (see autoplace.search.checkpoint)
        self.pending: dict[bytes, tuple[str, Placement, float | None]] = {}
        self.checkpoint = None if shared is not None or strategy.state() is None else \
            checkpoint_path(store.log.path)
        self._checkpoints: CheckpointWriter | None = None  # made on the first round
        self._local: LocalSearch | None = None  # made when descent first runs
        self.resumed = 0
        self.measure_s = 0.0
        self.lost = 0  # candidates of the last round other workers had claimed first
        #: candidates of the last round new to the job: measured now, or taken from the log
        #: where a resumed job measured them in that round before it stopped
        self.new = 0

    # -- resuming ----------------------------------------------------------------------------
    def replay(self) -> None:
        """Take in what the job measured before (``resume``): the log's records and the
        study's trials; none of it is measured again."""
        done = self.store.sync() if self.config.continues else []
        self.resumed = len(done)
        cp = self._checkpoint(len(done))
        if cp is None:
            self._take_in(done)
            return
        self._take_in(done[:cp.records])
        try:
            self.strategy.restore(cp.strategy)
        except (ValueError, KeyError, TypeError):  # not this strategy's: not exact, safe
            self._take_in(done[cp.records:])
            return
        tail = done[cp.records:]
        if tail:
            choice, mode = self.space.encode([p for _, p, _ in tail])
            keys = self.space.keys(*self.space.canonical(choice, mode))
            self.pending = dict(zip(keys, tail))

    def _checkpoint(self, n_done: int) -> Checkpoint | None:
        """The job's checkpoint, if it can make this resume exact: the job's records all
        come from this log, and the checkpoint is of this run and no further than them."""
        if self.checkpoint is None or n_done != len(self.store.logged):
            return None
        cp = read_checkpoint(self.checkpoint, **self._job())
        return cp if cp is not None and 0 <= cp.records <= n_done else None

    def _job(self) -> dict:
        """What a checkpoint of this job is known by (its header)."""
        c = self.config
        return dict(run=self.store.run, sampler=self.name, seed=c.seed,
                    batch_size=c.batch_size, objective=c.objective)

    def _write_checkpoint(self) -> None:
        if self.checkpoint is not None:
            if self._checkpoints is None:
                self._checkpoints = CheckpointWriter(self.checkpoint, **self._job())
            self._checkpoints.write(len(self.done), self.strategy.state())

    def _take_in(self, done: list[tuple[str, Placement, float | None]]) -> None:
        """Measured candidates of the job from elsewhere (log, study): remembered as
        measured, and observed by the strategy."""
        if not done:
            return
        labels, placements, latency = zip(*done)
        choice, mode = self.space.encode(list(placements))
        lat = np.array([np.nan if x is None else x for x in latency], dtype=np.float64)
        self._remember(choice, mode, lat)
        self.strategy.observe(Proposal(choice=choice, mode=mode, labels=labels), lat)
        self._add_done(labels)

    @property
    def local(self) -> LocalSearch:
        """Descent and its restarts (predictions are the simulator's, the same every round,
        unless a costly measurer's cost model learns)."""
        if self._local is None:
            self._local = LocalSearch(self.space, self.predict, stable=self.measurer.free)
        return self._local

    def _remember(self, choice: np.ndarray, mode: np.ndarray, latency: np.ndarray) -> None:
        keys = self.space.keys(*self.space.canonical(choice, mode))
        for k, x in zip(keys, latency):
            self._seen(k, None if np.isnan(x) else float(x))

    def _seen(self, key: bytes, value: float | None) -> None:
        """Remember ``key`` as measured, at ``value`` seconds (None: no value)."""
        self.seen[key] = value
        if value is not None and (self.best_s is None or value < self.best_s):
            self.best_s = value

    def search_trials_done(self) -> int:
        """Candidates of the search (not baselines) the job has measured."""
        return self._search_done

    def _add_done(self, labels) -> None:
        self.done.extend(labels)
        self._search_done += sum(1 for s in labels if s not in self.baseline_names)

    # -- measuring ---------------------------------------------------------------------------
    def run_baselines(self) -> None:
        """Measure and record every baseline the job has not measured yet."""
        todo = [(n, p) for n, p in self.baselines if n not in self.done]
        if todo:
            choice, mode = self.space.encode([p for _, p in todo])
            self.run(Proposal(choice=choice, mode=mode, labels=tuple(n for n, _ in todo)),
                     dedupe=False)

    def run(self, proposal: Proposal, *, dedupe: bool = True) -> int:
        """Measure and record the candidates of ``proposal`` the job has not measured;
        the strategy observes them. Returns how many were measured. A measurer that stops
        mid-batch has what it got recorded, then its error is raised."""
        choice, mode = self.space.canonical(proposal.choice, proposal.mode)
        if choice is not proposal.choice:  # co-location moved some: measure what is meant
            proposal = replace(proposal, choice=choice)
        keys = self.space.keys(choice, mode)
        fresh = self._fresh(proposal, keys) if dedupe else list(range(len(proposal)))
        self.lost = 0
        if self.shared is not None:
            proposal, fresh = self._claimed(proposal, fresh, mode)
        logged = {i: self.pending.pop(keys[i]) for i in fresh if keys[i] in self.pending}
        todo = [i for i in fresh if i not in logged]
        placements = self.space.decode_rows(proposal.choice[todo], mode[todo])
        results, stopped = [None] * len(todo), None
        try:
            results, stopped = self._measure(proposal.choice[todo], mode[todo], placements)
            for i, pl, res in zip(todo, placements, results):
                self._record(proposal, i, keys[i], pl, res, mode[i])
        finally:  # interrupted: asked trials left running are finished as not measured
            self._release_unfinished(proposal, todo)
        latency = {i: np.nan if (v := self.objective.value(r)) is None else v
                   for i, r in zip(todo, results) if r is not None}
        for i, (label, _, lat) in logged.items():  # measured before the job was resumed
            latency[i] = np.nan if lat is None else lat
            self._seen(keys[i], lat)
            self._add_done((label,))
        rows = [i for i in fresh if i in latency]
        self.strategy.observe(proposal.take(rows), np.array([latency[i] for i in rows]))
        self.new = len(rows)
        if stopped is not None:
            raise stopped
        return len(rows) - len(logged)

    def _fresh(self, proposal: Proposal, keys: list[bytes]) -> list[int]:
        """Rows not measured by the job (nor earlier in the batch); asked trials of the
        others are finished with the known latency."""
        fresh, batch = [], set()
        for i, k in enumerate(keys):
            if k in self.seen or k in batch:
                if proposal.trial(i) is not None:
                    self.store.release(proposal.trial(i), self.seen.get(k))
            else:
                fresh.append(i)
                batch.add(k)
        return fresh

    def _claimed(self, proposal: Proposal, rows: list[int], mode: np.ndarray):
        """``proposal`` with a study trial per row of ``rows``, and the rows whose claim
        won (:meth:`SharedStudy.claim`); the others' trials are released."""
        trials = list(proposal.trials) if proposal.trials else [None] * len(proposal)
        for i in rows:
            trials[i] = trials[i] or self.store.study.ask()
        won = self.shared.claim(
            [trials[i] for i in rows],
            [self.space.format_genome(proposal.choice[i], mode[i]) for i in rows],
            [BASELINE if proposal.labels[i] in self.baseline_names else SEARCH for i in rows],
            self.config.trials)
        for i, ok in zip(rows, won):
            if not ok:
                self.store.release(trials[i])
        self.lost = won.count(False)
        return replace(proposal, trials=tuple(trials)), [i for i, ok in zip(rows, won) if ok]

    def _release_unfinished(self, proposal: Proposal, rows: list[int]) -> None:
        for i in rows:
            trial = proposal.trial(i)
            if trial is not None and trial.number not in self.store.told:
                self.store.release(trial)

    def _record(self, proposal: Proposal, i: int, key: bytes, placement: Placement,
                result: MeasureResult | None, mode: np.ndarray) -> None:
        trial = proposal.trial(i)
        if result is None:  # never measured (the measurer stopped): not a result
            return
        genome = None if self.store.study is None else \
            self.space.format_genome(proposal.choice[i], mode)  # (the study's only)
        self.records.append(self.store.add(proposal.labels[i], placement, result, genome, trial))
        self._seen(key, self.objective.value(result))
        self._add_done((proposal.labels[i],))

    def _measure(self, choice: np.ndarray, mode: np.ndarray, placements: list[Placement]):
        """(results, stop): the measurer's results, or, when it stops mid-batch, what it got
        (None for the rest) and the stop to raise once those are recorded."""
        if not placements:
            return [], None
        t0 = time.perf_counter()
        self.measurer.set_incumbent(self.best_s)
        try:
            return self.measurer.measure_encoded(choice, mode, placements), None
        except MeasurementStopped as exc:
            return exc.partial or [None] * len(placements), exc
        finally:
            self.measure_s += time.perf_counter() - t0

    def run_search(self, progress) -> int:
        """Search until ``trials`` search candidates are measured; returns how many this run
        measured. When the strategy runs dry or stalls, descent (unless off) takes over
        early. Ends early, with a warning, when neither has an unmeasured candidate, or
        nothing new was measured for :data:`STALLED_ROUNDS` rounds in a row (a worker's
        round whose candidates other workers claimed first is not stalled: the study's
        total goes on growing, and the loop ends when it is reached)."""
        measured, stalled = 0, 0
        while (remaining := self._remaining()) > 0 and stalled < STALLED_ROUNDS:
            self._write_checkpoint()
            n = min(self.config.batch_size, remaining)
            late = remaining <= self._descent_budget() or (stalled and self.config.descent)
            proposal = self.local.propose(n, self.seen) if late else None
            if proposal is None:
                proposal = self.strategy.propose(n)
                proposal = self.local.polish(proposal, self.seen, self.references) if late \
                    else proposal
            if not len(proposal) and self.config.descent:  # the strategy ran dry: descend
                proposal = self.local.propose(n, self.seen) or proposal
            if not len(proposal):
                break
            n = self.run(proposal)
            if self.pending:  # not proposed again (the strategy changed): taken in as is
                self._take_in(list(self.pending.values()))
                self.pending.clear()
            measured += n  # (a round served from the log stalled no more than it did)
            stalled = 0 if self.new or self.lost else stalled + 1  # lost: others measure them
            progress(n)
        if remaining > 0:
            warnings.warn(f"search stopped after {measured} trials: no unmeasured "
                          "candidate left to propose", stacklevel=2)
        return measured

    def predict(self, choice: np.ndarray, mode: np.ndarray) -> np.ndarray:
        """The free model descent ranks moves by: the simulator (infinite where a genome does
        not fit), or, with a costly measurer, the strategy's cost model where it has one (the
        simulator plus the residual learned from the measurements)."""
        simulated = predicted(self.space, choice, mode, self.objective)
        if self.measurer.free or not len(choice):
            return simulated
        learned = self.strategy.estimate(choice, mode)
        return simulated if learned is None else np.where(np.isinf(simulated), np.inf, learned)

    def finish(self, progress) -> bool:
        """After an interrupt: descent rounds until the best and every restart is a one-op
        local optimum under :meth:`predict`, or the budget ends; a second interrupt stops at
        once. Whether it got there (False with descent off)."""
        if not self.config.descent:
            return False
        try:
            while (remaining := self._remaining()) > 0:
                proposal = self.local.propose(min(self.config.batch_size, remaining),
                                              self.seen)
                if proposal is None:
                    return True
                progress(self.run(proposal))
        except (KeyboardInterrupt, MeasurementStopped):
            return False
        except SystemError as exc:
            if not from_ctrl_c(exc):
                raise
            return False
        return False

    def _descent_budget(self) -> int:
        """Trials at the end of the search in which descent goes first (at least two
        batches, unless descent is off)."""
        c = self.config
        return 0 if c.descent == 0 else max(2 * c.batch_size, int(c.trials * c.descent))

    def _remaining(self) -> int:
        """Search candidates still to measure: of the job, or, for a worker, of the whole
        study (after failing dead workers' trials and taking in what the others measured)."""
        if self.shared is None:
            return self.config.trials - self.search_trials_done()
        left = self.shared.remaining(self.config.trials)
        self._take_in(self.store.others())
        return left


def tune(space: SearchSpace | PlanSpace, measurer: Measurer, log: TuningLog,
         config: TuneConfig, *, strategy: SearchStrategy | None = None) -> TuneResult:
    """Run baselines then the search; Ctrl-C stops cleanly with everything measured logged,
    after making the best a one-op local optimum (:meth:`Tuner.finish`; Ctrl-C again stops
    at once).

    ``space``: placements (:class:`~autoplace.space.SearchSpace`) or a mesh's pipeline plans
    (:class:`~autoplace.pipeline.plan_space.PlanSpace`, tuned for throughput without
    descent: :func:`autoplace.search.mesh.tune_mesh`). ``strategy``: a
    :class:`SearchStrategy` of ``space`` that proposes the search's candidates (logged
    with its labels); without it, the one ``config.sampler`` names (in a plan space, the
    pipeline moves), built with the config's cost model. ValueError if both are given (a
    ``config`` that sets its sampler or how to build one, beside a ``strategy``).
    """
    from tqdm import tqdm

    if strategy is not None:
        check_given(config, strategy)
    if isinstance(space, PlanSpace) and (config.descent or config.objective != "throughput"):
        raise ValueError("a plan space is tuned for throughput, without descent: "
                         "autoplace.search.mesh.mesh_config")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    t0 = time.perf_counter()
    interrupted = polished = False
    with CtrlC() as ctrl_c, tqdm(total=config.trials, disable=not config.progress,
                                 unit="trial") as bar:
        def progress(n: int) -> None:  # after each round
            bar.update(n)
            ctrl_c.check()

        bar.set_description_str("set-up (study, cost model, log)")
        warm = warm_rows(space, config)
        tuner = _tuner(space, measurer, log, config, warm, strategy)
        bar.update(min(tuner.search_trials_done(), config.trials))
        try:
            bar.set_description_str("baselines")
            tuner.run_baselines()
            bar.set_description_str("search")
            tuner.run_search(progress)
            if config.save_model:
                tuner.strategy.save_model(config.save_model)
        except (KeyboardInterrupt, SystemError) as exc:
            if not from_ctrl_c(exc):
                raise
            ctrl_c.seen()
            interrupted = True
            bar.set_description_str("interrupted: descent from the best (Ctrl-C: stop now)")
            polished = tuner.finish(progress)
        finally:
            if tuner.shared is not None:
                tuner.shared.close()
    result = _result(tuner, interrupted, time.perf_counter() - t0)
    return replace(result, warm_start=warm.summary() if warm is not None else "",
                   polished=polished)


def _tuner(space: SearchSpace | PlanSpace, measurer: Measurer, log: TuningLog, config: TuneConfig,
           warm, given: SearchStrategy | None = None) -> Tuner:
    """The job's tuner, with what it measured before taken in (``resume``, a worker);
    its strategy the ``given`` one, else the one ``config.sampler`` names."""
    storage = open_storage(config.storage)
    study = open_study(space, config, study_sampler(config), storage) \
        if needs_study(config, given) else None
    worker = new_worker_id() if config.worker else None
    if worker is not None:  # workers proposing alike would only lose claims to each other
        config = replace(config, seed=worker_seed(config.seed, worker))
    strategy = given if given is not None else make_strategy(
        space, study, config, warm=warm,
        stats_path=side_file(log.path, MODEL_STATS))
    store = Store(space, log, study, measurer=measurer.name, seed=config.seed,
                  objective=config.goal,
                  study_params=strategy.study_params, study_numbers=worker is not None,
                  continues=config.continues, append=config.append)
    log.open()  # the job starts: its log exists from here, even if it measures nothing
    shared = None
    if worker is not None:
        shared = SharedStudy(study, storage, grace_s=config.grace_s, worker=worker,
                             log=log.path, recover=store.logged_attrs)
        shared.reclaim()
    named = given is not None or isinstance(space, PlanSpace)  # (not config.sampler's)
    tuner = Tuner(space, measurer, store, strategy, config, shared,
                  name=type(strategy).__name__ if named else None)
    tuner.replay()
    return tuner


def _result(tuner: Tuner, interrupted: bool, wall_s: float) -> TuneResult:
    """The job's result over its logged records before this run and this run's."""
    job = [*tuner.store.logged, *tuner.records] if tuner.config.continues else tuner.records
    names = tuner.references
    base = {r.strategy: r for r in job if r.strategy in names}
    return TuneResult(best=best(job, objective=tuner.objective), baselines=base,
                      measured=len(tuner.records), log10_space=tuner.space.log10_size,
                      interrupted=interrupted, resumed=tuner.resumed, wall_s=wall_s,
                      records=tuple(tuner.records),
                      measure_s=tuner.measure_s, stats=tuple(tuner.strategy.stats))
