"""Where the tuning loop asks for descent: from the job's best and from restarts.

:class:`LocalSearch` turns :class:`~autoplace.search.descent.Descent` into proposals of the
job: moves predicted to beat the best measured genome; once that is a one-op local optimum,
moves from restarts in other basins (HEFT's placement, then the next best measured genomes
within :data:`RESTART_SLACK` of the best); when a strategy has nothing left to propose
and every start is a local optimum, kicks from the best (:meth:`LocalSearch.kick`); and,
in the last rounds, a strategy's candidates
predicted to beat the best replaced by where descent from them ends. It reads what the job
measured (``seen``: genome key -> latency, None for a failure) and keeps only which starts it
found to be local optima, so a resumed job proposes what the uninterrupted one did.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Mapping
from dataclasses import replace

import numpy as np

from autoplace.measure.objective import LATENCY, Objective
from autoplace.search.descent import KICKS, LABEL, Descent, kicked
from autoplace.search.fit_repair import toward_fitting
from autoplace.search.heft_start import heft_start
from autoplace.search.strategy import Proposal
from autoplace.space import SearchSpace

#: the best measured genomes descent starts from, best first (then HEFT's placement), if
#: within RESTART_SLACK of the best
DESCENT_STARTS, RESTART_SLACK = 4, 0.10
#: the last resort (:meth:`LocalSearch.wander`): tries per genome wanted, random one-op moves
#: at most before each descent, and its label in the log
WANDER_TRIES, WANDER_KICK, WANDER = 8, 8, "wander"


class LocalSearch:
    """Descent proposals of one job (module docstring); ``predict`` ranks the moves."""

    def __init__(self, space: SearchSpace,
                 predict: Callable[[np.ndarray, np.ndarray], np.ndarray], stable: bool = False,
                 objective: Objective = LATENCY):
        self.space, self.predict = space, predict
        self.descent = Descent(space, predict=predict, stable=stable)
        #: descent after a kick: a kicked genome beyond the limits moves back toward them
        self.kicks = Descent(space, predict=toward_fitting(space, objective, predict))
        self._optima: set[bytes] = set()  # descent starts found one-op local optima
        self._heft: bytes | None = None  # the key of HEFT's genome, a descent start

    def propose(self, n: int, seen: Mapping[bytes, float | None]) -> Proposal | None:
        """Up to ``n`` moves predicted to beat a start: from the job's best measured genome,
        and once that is a one-op local optimum, from the next starts (:meth:`starts`);
        None once every start is one."""
        for key, choice, mode in self.starts(seen):
            if key in self._optima:
                continue
            c, m = self.descent.propose(choice, mode, n, seen.keys())
            if len(c):
                return Proposal(choice=c, mode=m, labels=(LABEL,) * len(c))
            self._optima.add(key)
        return None

    def kick(self, seen: Mapping[bytes, float | None]) -> Proposal | None:
        """Where predicted descent from the best measured genome moved by random one-op
        moves ends, if it ends unmeasured and predicted below the best (an iterated local
        search: :meth:`Descent.kick`); None if no kick of :data:`KICKS` does. Seeded by
        what was measured (a resumed job kicks as the uninterrupted one did)."""
        done = [(lat, k) for k, lat in seen.items() if lat is not None]
        if not done:
            return None
        best = self.space.from_key(min(done, key=lambda x: x[0])[1])
        rng = np.random.default_rng([len(seen), KICKS])
        c, m = self.kicks.kick(*best, seen.keys(), rng)
        return Proposal(choice=c, mode=m, labels=("kick",)) if len(c) else None

    def wander(self, n: int, seen: Mapping[bytes, float | None]) -> Proposal | None:
        """The last resort of a job whose strategy, descents and kicks found nothing new:
        up to ``n`` genomes, each where descent from a random measured genome that fits,
        moved by 1 to :data:`WANDER_KICK` random one-op moves, ends (else the moved genome
        itself), if it is unmeasured and fits, better than the best or not; up to
        :data:`WANDER_TRIES` tries per genome. None if every try ends measured or not
        fitting. Seeded by what was measured."""
        starts = sorted(k for k, lat in seen.items() if lat is not None)
        if not starts:
            return None
        rng = np.random.default_rng([len(seen), WANDER_TRIES])
        found: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}
        for _ in range(WANDER_TRIES * n):
            start = self.space.from_key(starts[rng.integers(len(starts))])
            c, m = kicked(self.space, *start, rng, WANDER_KICK)
            ends = (self.kicks.descend(c, m, self.kicks.predict(c[None, :], m[None, :])[0]),
                    (c, m))
            for c, m in ends:
                c, m = self.space.canonical(c[None, :], m[None, :])
                key = self.space.keys(c, m)[0]
                if key not in seen and key not in found and np.isfinite(self.predict(c, m)[0]):
                    found[key] = (c, m)
                    break
            if len(found) == n:
                break
        if not found:
            return None
        C, M = (np.concatenate(x) for x in zip(*found.values()))
        return Proposal(choice=C, mode=M, labels=(WANDER,) * len(C))

    def starts(self, seen: Mapping[bytes, float | None]):
        """``(key, choice, mode)`` of the descent starts, in order: the job's best measured
        genome, HEFT's placement once measured (a basin of its own: steepest descent from
        it alone beat the tuner in 7 of 36 runs of bench_hill), then the next best measured
        genomes within :data:`RESTART_SLACK` of the best (up to :data:`DESCENT_STARTS`).
        Of equal figures the first measured comes first, as in the log's best
        (:func:`autoplace.records.tuning_log.best`)."""
        done = heapq.nsmallest(DESCENT_STARTS, ((lat, i, k) for i, (k, lat)
                                                 in enumerate(seen.items()) if lat is not None))
        if not done:
            return
        if self._heft is None:
            self._heft = self.space.keys(*heft_start(self.space))[0]
        starts = [done[0][2]] + ([self._heft] if seen.get(self._heft) is not None else [])
        starts += [k for lat, _, k in done[1:DESCENT_STARTS]
                   if lat <= done[0][0] * (1 + RESTART_SLACK)]
        for key in dict.fromkeys(starts):
            yield (key, *self.space.from_key(key))

    def polish(self, proposal: Proposal, seen: Mapping[bytes, float | None],
               references: Collection[str]) -> Proposal:
        """``proposal`` with the candidates predicted to beat the best replaced by where
        descent from them ends (:meth:`Descent.polish`); not those asked as study trials
        (their parameters are the sampler's), nor ``references`` (HEFT's, a baseline the
        summary compares with)."""
        done = [(lat, k) for k, lat in seen.items() if lat is not None]
        if not done or not len(proposal):
            return proposal
        choice, mode = self.space.from_key(min(done, key=lambda x: x[0])[1])
        bound = self.predict(choice[None, :], mode[None, :])[0]
        fixed = np.array([proposal.trial(i) is not None or label in references
                          for i, label in enumerate(proposal.labels)], dtype=bool)
        C, M, changed = self.descent.polish(proposal.choice, proposal.mode, bound, fixed,
                                            seen.keys())
        if not changed.any():
            return proposal
        labels = tuple(LABEL if c else x for c, x in zip(changed, proposal.labels))
        guess = None if proposal.predicted is None else \
            np.where(changed, np.nan, proposal.predicted)  # none for the replaced ones
        return replace(proposal, choice=C, mode=M, labels=labels, predicted=guess)
