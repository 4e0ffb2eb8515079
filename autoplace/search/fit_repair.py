"""Toward a placement that fits, when no measured one does (docs/search.md, "Nothing fits").

On a profile whose default scope cannot hold every weight, every baseline may overflow; the
strategies keep to candidates that fit and then have nothing to propose. The loop then asks
:class:`FitRepair`: one-op descent in the simulator on the bytes held over capacity (summed
over the scopes), from the measured genome or HEFT's start that overflows least (then the
next ones, up to :data:`REPAIR_STARTS`). A placement that fits ranks below every one that
does not, by its objective, so the descent goes on past the first one that fits to a one-op
local optimum; the loop measures where it ends, and the search goes on from there.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping

import numpy as np

from autoplace.measure.batch import simulate_batch
from autoplace.measure.objective import Objective
from autoplace.search.descent import Descent
from autoplace.search.heft_start import heft_start
from autoplace.search.strategy import Proposal
from autoplace.space import SearchSpace

#: added to the bytes over capacity of a genome that does not fit: above any objective in
#: seconds, so every genome that fits ranks before every one that does not
OVER = 1e15
#: descent starts tried, least overflow first, before the search gives up on fitting
REPAIR_STARTS = 4
#: (rows x scopes) simulated per unit at a time
CELLS = 1 << 22
LABEL = "fit-repair"


def over_capacity(space: SearchSpace, choice: np.ndarray, mode: np.ndarray,
                  objective: Objective) -> np.ndarray:
    """Per genome: its objective's seconds where it fits; else :data:`OVER` plus the bytes
    its scopes hold over their capacity (:meth:`Objective.held`); infinite where a copy has
    no route or a block unit's ops are not one block (no move of memory mends those)."""
    rows = max(1, CELLS // max(len(space.scopes), 1))
    parts = [np.zeros(0)]
    for lo in range(0, len(choice), rows):
        out = simulate_batch(space, choice[lo:lo + rows], mode[lo:lo + rows])
        over = np.maximum(np.floor(objective.held(out)) - space.capacity, 0.0).sum(axis=1)
        parts.append(np.where(objective.feasible(space, out), objective.simulated(out),
                              np.where(out.no_route | out.not_contiguous, np.inf,
                                       OVER + over)))
    return np.concatenate(parts)


class FitRepair:
    """Descent toward fitting for one job (module docstring)."""

    def __init__(self, space: SearchSpace, objective: Objective):
        self.space, self.objective = space, objective
        self.descent = Descent(space, predict=self.rank, stable=True)
        self._optima: set[bytes] = set()  # starts found one-op local optima
        #: bytes over capacity of the closest start to fitting, as last ranked
        self.closest_over: float | None = None

    def rank(self, choice: np.ndarray, mode: np.ndarray) -> np.ndarray:
        """What the descent minimises (:func:`over_capacity`)."""
        return over_capacity(self.space, choice, mode, self.objective)

    def propose(self, n: int, seen: Mapping[bytes, float | None]) -> Proposal | None:
        """Up to ``n`` genomes one-op descent ranks below a start, where the descent from
        the start that overflows least ends first; None once every start is a local
        optimum (no move of one op or copy holds fewer bytes over capacity)."""
        for key in self.starts(seen):
            if key in self._optima:
                continue
            c, m = self.descent.propose(*self.space.from_key(key), n, seen.keys())
            if len(c):
                return Proposal(choice=c, mode=m, labels=(LABEL,) * len(c))
            self._optima.add(key)
        return None

    def starts(self, seen: Mapping[bytes, float | None]) -> list[bytes]:
        """The keys of the :data:`REPAIR_STARTS` measured genomes and HEFT's start that
        overflow least, least first (and remember how much the first does)."""
        keys = list(dict.fromkeys([*seen, *self.space.keys(*heft_start(self.space))]))
        genomes = [self.space.from_key(k) for k in keys]
        ranks = self.rank(np.array([c for c, _ in genomes]), np.array([m for _, m in genomes]))
        best = heapq.nsmallest(REPAIR_STARTS, zip(ranks.tolist(), range(len(keys))))
        self.closest_over = best[0][0] - OVER if best and best[0][0] >= OVER else None
        return [keys[i] for r, i in best if np.isfinite(r)]
