"""Random-mutation hill climbing: the naive search the tuner must beat at an equal budget.

It starts where the tuner starts (the baselines the loop measures, and HEFT's placement,
proposed first as the tuner's evolution does). Each candidate is then one random move
(:func:`~autoplace.search.descent.move_list`: an op to another of its choices, or a
crossing edge's copy mode flipped) from the fastest placement measured so far, and a
faster one becomes the new starting point. No model, no population:
what a user would write in an afternoon, and the yardstick of ``experiments/bench_search.py``
(``--sampler hill``).
"""

from __future__ import annotations

import numpy as np

from autoplace.heft import heft_genome
from autoplace.search.descent import apply_moves, move_list
from autoplace.search.strategy import Proposal, SearchStrategy
from autoplace.space import SearchSpace

LABEL = "hill"
#: moves drawn per candidate wanted (some are measured already, or equal to another)
DRAWS = 4


class HillClimbing(SearchStrategy):
    """Propose random one-move neighbours of the best measured placement."""

    def __init__(self, space: SearchSpace, *, seed: int = 0):
        super().__init__()
        self.space, self.rng = space, np.random.default_rng(seed)
        self.best: tuple[float, np.ndarray, np.ndarray] | None = None
        self.measured: set[bytes] = set()
        self._heft_genome: tuple[np.ndarray, np.ndarray] | None = None

    def propose(self, n: int) -> Proposal:
        heft = self._heft()
        if heft is not None:
            return heft
        space = self.space
        if self.best is None:  # nothing measured yet: random placements
            choice, mode = space.canonical(*space.random_genomes(n, self.rng))
        else:
            _, start, start_mode = self.best
            ops, values = move_list(space, start, start_mode)
            pick = self.rng.choice(len(ops), size=min(len(ops), DRAWS * n), replace=False) \
                if len(ops) else np.zeros(0, dtype=np.int64)
            choice, mode = apply_moves(space, start, start_mode, ops[pick], values[pick])
        keep, seen = [], set(self.measured)
        for i, key in enumerate(space.keys(choice, mode)):
            if key not in seen and len(keep) < n:
                seen.add(key)
                keep.append(i)
        return Proposal(choice=choice[keep], mode=mode[keep], labels=(LABEL,) * len(keep))

    def _heft(self) -> Proposal | None:
        """HEFT's placement, while it is not measured."""
        if self._heft_genome is None:
            self._heft_genome = self.space.canonical(*(x[None, :] for x in
                                                       heft_genome(self.space)))
        choice, mode = self._heft_genome
        if self.space.keys(choice, mode)[0] in self.measured:
            return None
        return Proposal(choice=choice, mode=mode, labels=("heft",))

    def observe(self, proposal: Proposal, latency: np.ndarray) -> None:
        if not len(proposal):
            return
        choice, mode = self.space.canonical(proposal.choice, proposal.mode)
        self.measured.update(self.space.keys(choice, mode))
        ok = np.flatnonzero(~np.isnan(latency))
        if len(ok):
            i = ok[np.argmin(latency[ok])]
            if self.best is None or latency[i] < self.best[0]:
                self.best = (float(latency[i]), choice[i].copy(), mode[i].copy())

    def state(self) -> dict:
        return {"rng": self.rng.bit_generator.state}

    def restore(self, state: dict) -> None:
        self.rng.bit_generator.state = state["rng"]
