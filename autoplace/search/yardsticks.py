"""Naive searches the tuner must beat at an equal budget: the yardsticks of
``experiments/bench_hill.py`` and ``experiments/bench_search.py``.

Both start where the tuner starts (the baselines the loop measures, then HEFT's placement,
proposed first as the tuner's evolution does) and use no model of their own:

- ``--sampler hill``, random-mutation hill climbing: each candidate is one random move
  (:func:`~autoplace.search.descent.move_list`: an op to another of its choices, or a
  crossing edge's copy mode flipped) from the fastest placement measured so far, and a
  faster one becomes the new starting point; what a user would write in an afternoon;
- ``--sampler steepest``, steepest descent from the best measured placement: where
  descent in the simulator ends (:class:`~autoplace.search.descent.Descent`), then its best
  first moves; it runs dry at a one-op local optimum.
"""

from __future__ import annotations

import numpy as np

from autoplace.measure.objective import LATENCY, Objective
from autoplace.search.descent import Descent, apply_moves, move_list, predicted
from autoplace.search.heft_start import heft_start
from autoplace.search.strategy import Proposal, SearchStrategy, fastest
from autoplace.space import SearchSpace

#: moves drawn per candidate wanted (some are measured already, or equal to another)
DRAWS = 4


class _FromTheBest(SearchStrategy):
    """HEFT first, then candidates around the best measured placement (:meth:`around`)."""

    label = ""

    def __init__(self, space: SearchSpace, *, seed: int = 0, objective: Objective = LATENCY):
        super().__init__()
        self.space, self.rng, self.objective = space, np.random.default_rng(seed), objective
        self.best: tuple[float, np.ndarray, np.ndarray] | None = None
        self.measured: set[bytes] = set()

    def propose(self, n: int) -> Proposal:
        heft = self._heft()
        if heft is not None:
            return heft
        if self.best is None:  # nothing measured yet: random placements
            choice, mode = self.space.canonical(*self.space.random_genomes(n, self.rng))
        else:
            choice, mode = self.around(self.best[1], self.best[2], n)
        keep, seen = [], set(self.measured)
        for i, key in enumerate(self.space.keys(choice, mode)):
            if key not in seen and len(keep) < n:
                seen.add(key)
                keep.append(i)
        return Proposal(choice=choice[keep], mode=mode[keep], labels=(self.label,) * len(keep))

    def around(self, choice: np.ndarray, mode: np.ndarray,
               n: int) -> tuple[np.ndarray, np.ndarray]:
        """Canonical candidates from the best measured genome (measured ones are dropped)."""
        raise NotImplementedError

    def _heft(self) -> Proposal | None:
        """HEFT's placement, made to fit (:func:`heft_start`), while it is not measured."""
        choice, mode = heft_start(self.space)
        if self.space.keys(choice, mode)[0] in self.measured:
            return None
        return Proposal(choice=choice, mode=mode, labels=("heft",))

    def observe(self, proposal: Proposal, latency: np.ndarray) -> None:
        if not len(proposal):
            return
        choice, mode = self.space.canonical(proposal.choice, proposal.mode)
        self.measured.update(self.space.keys(choice, mode))
        self.best = fastest(self.best, choice, mode, latency)

    def state(self) -> dict:
        return {"rng": self.rng.bit_generator.state}

    def restore(self, state: dict) -> None:
        self.rng.bit_generator.state = state["rng"]


class HillClimbing(_FromTheBest):
    """Random one-move neighbours of the best measured placement."""

    label = "hill"

    def around(self, choice, mode, n):
        ops, values = move_list(self.space, choice, mode)
        pick = self.rng.choice(len(ops), size=min(len(ops), DRAWS * n), replace=False) \
            if len(ops) else np.zeros(0, dtype=np.int64)
        return apply_moves(self.space, choice, mode, ops[pick], values[pick])


class SteepestDescent(_FromTheBest):
    """Where steepest descent in the simulator from the best measured placement ends, then
    its best first moves; nothing at a one-op local optimum."""

    label = "steepest"

    def __init__(self, space: SearchSpace, *, seed: int = 0, objective: Objective = LATENCY):
        super().__init__(space, seed=seed, objective=objective)
        self.descent = Descent(space, predict=lambda c, m: predicted(space, c, m, objective),
                               stable=True)

    def around(self, choice, mode, n):
        return self.descent.propose(choice, mode, n, self.measured)
