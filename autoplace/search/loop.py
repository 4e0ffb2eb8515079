"""The tuning loop: baselines first, then a search strategy's proposals, measured and recorded
(a job sets it up and runs it: :func:`autoplace.search.job.tune`).

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

from autoplace.measure.base import MeasurementStopped, Measurer, MeasureResult
from autoplace.measure.estimates import with_estimates
from autoplace.pipeline.plan_space import PlanSpace
from autoplace.records.tuning_log import Record
from autoplace.search.checkpoint import (
    Checkpoint,
    CheckpointWriter,
    checkpoint_path,
    read_checkpoint,
)
from autoplace.search.config import TuneConfig
from autoplace.search.descent import predicted
from autoplace.search.fit_repair import FitRepair
from autoplace.search.interrupt import from_ctrl_c, uninterrupted
from autoplace.search.local_search import LocalSearch
from autoplace.search.store import Done, Store
from autoplace.search.strategies import (
    named_baselines,
)
from autoplace.search.strategy import Proposal, SearchStrategy
from autoplace.search.workers import (
    BASELINE,
    SEARCH,
    SharedStudy,
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
        #: what the strategy observes of a result: its value, or its values of several
        #: objectives (None: none), as the store reads them from the log and the study
        self.observed = self.objective.values if config.multi else self.objective.value
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
        self.pending: dict[bytes, Done] = {}
        self.checkpoint = None if shared is not None or strategy.state() is None else \
            checkpoint_path(store.log.path)
        self._checkpoints: CheckpointWriter | None = None  # made on the first round
        self._local: LocalSearch | None = None  # made when descent first runs
        self._repair: FitRepair | None = None  # made when nothing measured fits
        #: the loop's descent (off where the strategy descends itself)
        self.descent = 0.0 if strategy.descends else config.descent
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
                    batch_size=c.batch_size, objective=c.goal.name)  # (with its limits)

    def _write_checkpoint(self) -> None:
        if self.checkpoint is not None:
            if self._checkpoints is None:
                self._checkpoints = CheckpointWriter(self.checkpoint, **self._job())
            self._checkpoints.write(len(self.done), self.strategy.state())

    def _take_in(self, done: list[Done]) -> None:
        """Measured candidates of the job from elsewhere (log, study): remembered as
        measured, and observed by the strategy."""
        if not done:
            return
        labels, placements, values = zip(*done)
        choice, mode = self.space.encode(list(placements))
        lat = self._array(values)
        self._remember(choice, mode, lat if lat.ndim == 1 else lat[:, 0])
        self.strategy.observe(Proposal(choice=choice, mode=mode, labels=labels), lat)
        self._add_done(labels)

    @property
    def local(self) -> LocalSearch:
        """Descent and its restarts (predictions are the simulator's, the same every round,
        unless a costly measurer's cost model learns)."""
        if self._local is None:
            self._local = LocalSearch(self.space, self.predict, stable=self.measurer.free,
                                      objective=self.objective)
        return self._local

    def _array(self, values) -> np.ndarray:
        """What the strategy observes of values (:attr:`observed`'s): seconds per row (NaN:
        none), or for several objectives a row of figures each (a row of NaN: none)."""
        if not self.config.multi:
            return np.array([np.nan if v is None else v for v in values], dtype=np.float64)
        k = len(self.objective.criteria)
        return np.array([[np.nan] * k if v is None else v for v in values],
                        dtype=np.float64).reshape(-1, k)

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
        values = {i: self.observed(r) for i, r in zip(todo, results) if r is not None}
        for i, (label, _, value) in logged.items():  # measured before the job was resumed
            values[i] = value
            self._seen(keys[i], value[0] if isinstance(value, list) else value)
            self._add_done((label,))
        rows = [i for i in fresh if i in values]
        self.strategy.observe(proposal.take(rows), self._array([values[i] for i in rows]))
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
        with uninterrupted():  # a Ctrl-C between the log's line and its count here miscounts
            self.records.append(self.store.add(proposal.labels[i], placement, result, genome,
                                               trial))
        self._seen(key, self.objective.value(result))
        self._add_done((proposal.labels[i],))

    def _measure(self, choice: np.ndarray, mode: np.ndarray, placements: list[Placement]):
        """(results, stop): the measurer's results, or, when it stops mid-batch, what it got
        (None for the rest) and the stop to raise once those are recorded."""
        if not placements:
            return [], None
        t0 = time.perf_counter()
        if not self.config.multi:  # (a front's plans are not bounded by one figure)
            self.measurer.set_incumbent(self.best_s)
        try:
            results, stop = self.measurer.measure_encoded(choice, mode, placements), None
        except MeasurementStopped as exc:
            results, stop = exc.partial or [None] * len(placements), exc
        finally:
            self.measure_s += time.perf_counter() - t0
        if isinstance(self.space, SearchSpace):  # (what a timing measurer leaves out)
            results = with_estimates(self.space, choice, mode, results)
        return results, stop

    def run_search(self, progress) -> int:
        """Search until ``trials`` search candidates are measured; returns how many this run
        measured. When the strategy runs dry or stalls, descent (unless off) takes over
        early, then kicks, then wandering (:meth:`LocalSearch.wander`). A worker with
        neither waits for the other workers' running trials and goes on from what they
        measured (:meth:`_went_on_from_others`). Ends early, with a
        warning, when none of that gives an unmeasured candidate, or
        nothing new was measured for :data:`STALLED_ROUNDS` rounds in a row (a worker's
        round whose candidates other workers claimed first is not stalled: the study's
        total goes on growing, and the loop ends when it is reached)."""
        measured, stalled = 0, 0
        while (remaining := self._remaining()) > 0 and stalled < STALLED_ROUNDS:
            self._write_checkpoint()
            n = min(self.config.batch_size, remaining)
            late = remaining <= self._descent_budget() or (stalled and self.descent)
            if remaining <= self._descent_budget(self.config.descent):
                self.strategy.finishing()  # (of a strategy that descends itself)
            proposal = self.local.propose(n, self.seen) if late else None
            if proposal is None:
                proposal = self.strategy.propose(n)
                proposal = self.local.polish(proposal, self.seen, self.references) if late \
                    else proposal
            if not len(proposal) and self.descent:  # ran dry: descend, kick, then wander
                proposal = self.local.propose(n, self.seen) or self.local.kick(self.seen) \
                    or self.local.wander(n, self.seen) or proposal
            if not len(proposal):  # nothing fits yet: toward fitting
                proposal = self._toward_fitting(n) or proposal
            if not len(proposal):
                if self._went_on_from_others():
                    continue
                break
            n = self.run(proposal)
            if self.pending:  # not proposed again (the strategy changed): taken in as is
                self._take_in(list(self.pending.values()))
                self.pending.clear()
            measured += n  # (a round served from the log stalled no more than it did)
            stalled = 0 if self.new or self.lost else stalled + 1  # lost: others measure them
            progress(n)
        if remaining > 0:
            warnings.warn(f"search stopped after {measured} trials: {self._why_stopped()}",
                          stacklevel=2)
        self._baselines_lost_to_the_dead()
        return measured

    def _toward_fitting(self, n: int) -> Proposal | None:
        """While no measured candidate fits (placements only): descent toward fitting
        (:class:`~autoplace.search.fit_repair.FitRepair`), said once."""
        if self.best_s is not None or not isinstance(self.space, SearchSpace):
            return None
        if self._repair is None:
            self._repair = FitRepair(self.space, self.objective)
            limits = self.objective.limits
            within = f" within {limits.text()}" if limits else ""
            warnings.warn(f"no candidate measured so far fits {self.space.profile.name}"
                          f"{within}: the search first moves toward fitting (one-op descent "
                          "on the bytes held over capacity, then on the excess over the "
                          "limits)", stacklevel=3)
        return self._repair.propose(n, self.seen)

    def _why_stopped(self) -> str:
        if self.best_s is not None or self._repair is None:
            return "no unmeasured candidate left to propose"
        far = self._repair.closest
        return ("no placement found that fits: one-op descent from the candidates closest "
                "to fitting ends" + ("" if far is None else f" {far}") +
                ", with no move and no kick (random moves, then descent) coming closer")

    def _went_on_from_others(self) -> bool:
        """A worker whose strategy has run dry: wait until another worker measures something
        or none has a trial running (a dead worker's are reclaimed after its grace), take
        in what they measured and measure the baselines whose claims were lost to a worker
        that died; whether the job got anything new to go on from."""
        if self.shared is None:
            return False
        before = len(self.done)
        while not (got := self.store.others()) and self.shared.others_running():
            time.sleep(min(1.0, self.config.grace_s / 4))
        self._take_in(got or self.store.others())
        self.run_baselines()
        return len(self.done) > before

    def _baselines_lost_to_the_dead(self) -> None:
        """A worker whose search is over: while a baseline is measured by no worker and
        others still hold trials (a dead worker's claim lapses after its grace), wait, take
        in what they measured and measure the baselines no live worker holds; so a job
        whose search ends within a dead worker's grace still measures every baseline."""
        running = self.shared is not None
        while running and any(name not in self.done for name, _ in self.baselines):
            running = self.shared.others_running()  # (a lapsed claim is free to take now)
            self._take_in(self.store.others())
            self.run_baselines()
            if running and any(name not in self.done for name, _ in self.baselines):
                time.sleep(min(1.0, self.config.grace_s / 4))

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
        if not self.descent:
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

    def _descent_budget(self, share: float | None = None) -> int:
        """Trials at the end of the search in which descent goes first (at least two
        batches but at most half the trials, unless descent is off: a short job's strategy
        keeps a round): the loop's, or of a descent ``share``."""
        c, share = self.config, self.descent if share is None else share
        return 0 if share == 0 else min(max(2 * c.batch_size, int(c.trials * share)),
                                        max(c.trials // 2, 1))

    def _remaining(self) -> int:
        """Search candidates still to measure: of the job, or, for a worker, of the whole
        study (after failing dead workers' trials and taking in what the others measured)."""
        if self.shared is None:
            return self.config.trials - self.search_trials_done()
        left = self.shared.remaining(self.config.trials)
        self._take_in(self.store.others())
        return left
