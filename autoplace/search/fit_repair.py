"""Toward a placement that fits, when no measured one does (docs/search.md, "Nothing fits").

On a profile whose default scope cannot hold every weight, every baseline may overflow; the
strategies keep to candidates that fit and then have nothing to propose. The same holds for a
job within limits (``--max-latency``, ``--max-energy``, ``--max-memory``) that no baseline
keeps. The loop then asks :class:`FitRepair`: one-op descent in the simulator on the bytes
held over capacity (summed over the scopes) and then on the share by which the figures exceed
the limits, from the measured genome or HEFT's start that is closest to fitting (then the
next ones, up to :data:`REPAIR_STARTS`); once every start is a one-op local optimum, from the
closest one moved by a few random one-op moves (up to
:data:`~autoplace.search.descent.KICKS` a round, an iterated
local search: one-op descent on an energy bound ends 0.2% beyond it on squeezenet/soc where
placements within it exist). A placement that fits ranks below every one that
does not, by its objective, so the descent goes on past the first one that fits to a one-op
local optimum; the loop measures where it ends, and the search goes on from there.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping

import numpy as np

from autoplace.measure.batch import simulate_batch
from autoplace.measure.objective import Objective
from autoplace.search.descent import KICKS, Descent
from autoplace.search.heft_start import heft_start
from autoplace.search.strategy import Proposal
from autoplace.space import SearchSpace

#: added to the bytes over capacity of a genome that does not fit its scopes: above every
#: rank of a genome that does
OVER = 2e15
#: added to :data:`SHARE` times the excess over the limits of a genome that fits its scopes
#: but not the limits: above any objective in seconds or joules, so every genome that fits
#: ranks before every one that does not, and below :data:`OVER`
BEYOND = 1e15
#: a limit's excess (a share: 0.25 is 25% over) in rank units (resolved to 1e-7 at BEYOND)
SHARE = 1e6
#: descent starts tried, least overflow first, before the search gives up on fitting
REPAIR_STARTS = 4
#: (rows x scopes) simulated per unit at a time
CELLS = 1 << 22
LABEL = "fit-repair"


def over_capacity(space: SearchSpace, choice: np.ndarray, mode: np.ndarray,
                  objective: Objective) -> np.ndarray:
    """Per genome: its objective's figure where it fits; else :data:`OVER` plus the bytes
    its scopes hold over their capacity (:meth:`Objective.held`), or where it holds none
    over but exceeds the job's limits, :data:`BEYOND` plus that excess
    (:meth:`Objective.excess`) times :data:`SHARE`; infinite where a copy has no route or a
    block unit's ops are not one block (no move of memory mends those)."""
    rows = max(1, CELLS // max(len(space.scopes), 1))
    parts = [np.zeros(0)]
    for lo in range(0, len(choice), rows):
        out = simulate_batch(space, choice[lo:lo + rows], mode[lo:lo + rows])
        over = np.maximum(np.floor(objective.held(out)) - space.capacity, 0.0).sum(axis=1)
        excess = objective.excess(space, out)
        apart = np.where((over == 0) & (excess > 0), BEYOND + SHARE * excess, OVER + over)
        parts.append(np.where(objective.feasible(space, out), objective.simulated(out),
                              np.where(out.no_route | out.not_contiguous, np.inf, apart)))
    return np.concatenate(parts)


def toward_fitting(space: SearchSpace, objective: Objective,
                   predict: Callable[[np.ndarray, np.ndarray], np.ndarray]
                   ) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """``predict`` where it is finite, else :func:`over_capacity`'s rank: descent from a
    genome that does not fit (a kick moved it beyond a limit) moves toward fitting first."""
    def rank(choice: np.ndarray, mode: np.ndarray) -> np.ndarray:
        ranks = np.array(predict(choice, mode), dtype=np.float64)
        apart = ~np.isfinite(ranks)
        if apart.any():
            ranks[apart] = over_capacity(space, choice[apart], mode[apart], objective)
        return ranks
    return rank


def how_far(rank: float) -> str:
    """What a rank of :func:`over_capacity` of a genome that does not fit says, in words."""
    if rank >= OVER:
        return f"{(rank - OVER) / 2**20:.2f} MiB over capacity"
    return f"{(rank - BEYOND) / SHARE:.1%} beyond the limits"


class FitRepair:
    """Descent toward fitting for one job (module docstring)."""

    def __init__(self, space: SearchSpace, objective: Objective):
        self.space, self.objective = space, objective
        self.descent = Descent(space, predict=self.rank, stable=True)
        self._optima: set[bytes] = set()  # starts found one-op local optima
        #: how far the closest start is from fitting (:func:`how_far`), as last ranked
        self.closest: str | None = None

    def rank(self, choice: np.ndarray, mode: np.ndarray) -> np.ndarray:
        """What the descent minimises (:func:`over_capacity`)."""
        return over_capacity(self.space, choice, mode, self.objective)

    def propose(self, n: int, seen: Mapping[bytes, float | None]) -> Proposal | None:
        """Up to ``n`` genomes one-op descent ranks below a start, where the descent from
        the start that overflows least ends first; None once every start is a local
        optimum (no move of one op or copy holds fewer bytes over capacity)."""
        starts = self.starts(seen)
        for key in starts:
            if key in self._optima:
                continue
            c, m = self.descent.propose(*self.space.from_key(key), n, seen.keys())
            if len(c):
                return Proposal(choice=c, mode=m, labels=(LABEL,) * len(c))
            self._optima.add(key)
        return self.kick(starts[0], seen) if starts else None

    def kick(self, start: bytes, seen: Mapping[bytes, float | None]) -> Proposal | None:
        """Where descent from ``start`` moved by random one-op moves ends, if it ends
        unmeasured and closer to fitting (:meth:`Descent.kick`); None if no kick of
        :data:`KICKS` does (seeded by what was measured: a resumed job kicks as the
        uninterrupted one did)."""
        rng = np.random.default_rng([len(seen), KICKS])
        c, m = self.descent.kick(*self.space.from_key(start), seen.keys(), rng)
        return Proposal(choice=c, mode=m, labels=(LABEL,)) if len(c) else None

    def starts(self, seen: Mapping[bytes, float | None]) -> list[bytes]:
        """The keys of the :data:`REPAIR_STARTS` measured genomes and HEFT's start that
        are closest to fitting, closest first (and remember how far the first is)."""
        keys = list(dict.fromkeys([*seen, *self.space.keys(*heft_start(self.space))]))
        genomes = [self.space.from_key(k) for k in keys]
        ranks = self.rank(np.array([c for c, _ in genomes]), np.array([m for _, m in genomes]))
        best = heapq.nsmallest(REPAIR_STARTS, zip(ranks.tolist(), range(len(keys))))
        far = best and BEYOND <= best[0][0] < np.inf
        self.closest = how_far(best[0][0]) if far else None
        return [keys[i] for r, i in best if np.isfinite(r)]
