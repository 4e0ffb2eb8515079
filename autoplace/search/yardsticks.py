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

And one that is not a strategy of the loop but a search in the simulator alone, for as long
as the tuner ran (``anneal-wall`` in ``experiments/bench_search.py``): :func:`anneal`,
simulated annealing, hundreds of thousands of simulations where the tuner measures a
thousand placements.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from autoplace.hardware.profile import COPY_MODES
from autoplace.measure.batch import simulate_batch
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


@dataclass(frozen=True)
class Annealed:
    """What :func:`anneal` found: the best genome, its figure, where the best improved
    (``(seconds since the start, figure)``), and how many genomes it simulated."""

    choice: np.ndarray
    mode: np.ndarray
    value: float
    steps: list[tuple[float, float]]
    simulated: int


def anneal(space: SearchSpace, *, seconds: float | None = None, rounds: int | None = None,
           seed: int = 0, objective: Objective = LATENCY, chains: int = 128,
           hot: float = 0.2, cold: float = 1e-4) -> Annealed:
    """Simulated annealing in the simulator, for ``seconds`` of wall time or ``rounds``
    rounds (deterministic with ``seed``). ``chains`` chains start at HEFT's placement made to
    fit (:func:`heft_start`); each round moves each chain by one random move (an op to
    another of its choices, or a copy's mode changed) and keeps the move by Metropolis'
    rule at a temperature, relative to the start's figure, that falls geometrically from
    ``hot`` to ``cold`` over the time or rounds."""
    if (seconds is None) == (rounds is None) or not (seconds or rounds or 0) > 0:
        raise ValueError(f"anneal: give seconds > 0 or rounds > 0, one of them; got "
                         f"seconds={seconds!r}, rounds={rounds!r}")
    rng, t0 = np.random.default_rng(seed), time.perf_counter()
    choice, mode = (np.repeat(x, chains, axis=0) for x in heft_start(space))
    value = _figures(space, objective, choice, mode)
    scale = value[0] if np.isfinite(value[0]) else 1.0
    best = (choice[0].copy(), mode[0].copy(), float(value[0]))  # (chain 0 moves on)
    steps, done = [(0.0, best[2])], 0
    while (share := done / rounds if rounds is not None else
           (time.perf_counter() - t0) / seconds) < 1:
        C, M = _moved(space, choice, mode, rng)
        V = _figures(space, objective, C, M)
        temp = hot * (cold / hot) ** share * scale
        with np.errstate(invalid="ignore", over="ignore"):
            keep = (V <= value) | (rng.random(chains) < np.exp((value - V) / temp))
        choice[keep], mode[keep], value[keep] = C[keep], M[keep], V[keep]
        done, top = done + 1, int(np.argmin(value))
        if value[top] < best[2]:
            best = (choice[top].copy(), mode[top].copy(), float(value[top]))
            steps.append((time.perf_counter() - t0, best[2]))
    return Annealed(*best, steps, chains * (done + 1))


def _figures(space: SearchSpace, objective: Objective, choice: np.ndarray,
             mode: np.ndarray) -> np.ndarray:
    out = simulate_batch(space, choice, mode, per_unit=objective.per_unit)
    return objective.batch(space, out)


def _moved(space: SearchSpace, choice: np.ndarray, mode: np.ndarray,
           rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Each row moved by one random move: an op with more than one choice to another one,
    as often as such moves are among all moves, else a copy's mode changed."""
    C, M = choice.copy(), mode.copy()
    rows, extra, modes = np.arange(len(C)), space.n_choices - 1, len(COPY_MODES)
    op_moves, edge_moves = int(extra.sum()), space.n_edges * (modes - 1)
    on_op = rng.random(len(C)) * (op_moves + edge_moves) < op_moves
    op = rng.choice(space.n_ops, size=len(C), p=extra / max(op_moves, 1)) if op_moves else \
        np.zeros(len(C), dtype=np.int64)
    k = space.n_choices[op]
    step = 1 + (rng.random(len(C)) * np.maximum(k - 1, 1)).astype(np.int64)
    C[rows[on_op], op[on_op]] = (C[rows[on_op], op[on_op]] + step[on_op]) % k[on_op]
    if space.n_edges:
        e = rng.integers(space.n_edges, size=len(C))
        off = ~on_op
        turn = 1 + rng.integers(modes - 1, size=len(C))
        M[rows[off], e[off]] = (M[rows[off], e[off]] + turn[off]) % modes
    return C, M
