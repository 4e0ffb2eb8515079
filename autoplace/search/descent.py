"""One-op local descent: make the best placement a local optimum before the search stops.

A *move* changes one thing of a genome: one op's choice (unit, scope, weight placement) or
one copy's mode. From the best measured genome, :class:`Descent` ranks every move with a
free model: the simulator when it is the measurer, otherwise (a costly measurer: the host,
boards through RPC) the job's cost model, the simulator plus the residual it learned from
the measurements (``predict``), so that only what the model predicts faster is measured.
It descends in that model (steepest move after steepest move) until
no move is predicted faster, and proposes where that ends, then the best first moves; never
one the job measured. Measuring them and descending again from the new best ends at a genome
none of whose moves is predicted faster: under the simulator, a one-op local optimum, found
with one measurement per descent rather than one per step. Proposals are a function of what
the job measured (no random state), so a resumed job descends as the uninterrupted one did.

In the same last rounds, a strategy's candidate predicted faster than the best is first
descended from in the simulator too (:meth:`Descent.polish`), so a new best found there is a
local optimum as well, not one the budget leaves no round to descend from.

Spaces with more moves than :data:`MAX_MOVES` (a mesh of thousands of PEs) rank a subset:
every copy flip and a deterministic sample of op moves.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import NamedTuple

import numpy as np

from autoplace.measure.batch import simulate_batch
from autoplace.measure.objective import LATENCY, Objective
from autoplace.space import SearchSpace

#: moves ranked per step at most (the batch simulator takes ~20k per second on a big graph)
MAX_MOVES = 20_000
#: steps of one descent in the simulator at most
MAX_STEPS = 200
#: rows simulated at a time: a chunk's copy plan and outputs small enough for the allocator
#: to reuse freed memory (4,096 rows of densenet121 took 25 MB of fresh pages per chunk)
CHUNK = 512
LABEL = "descent"
#: kicked descents tried per call of :meth:`Descent.kick` at most
KICKS = 16
#: rankings of every move from a start that :class:`Descent` keeps (with a stable model)
KEPT_RANKINGS = 2


def move_list(space: SearchSpace, choice: np.ndarray, mode: np.ndarray,
              limit: int = MAX_MOVES) -> tuple[np.ndarray, np.ndarray]:
    """The moves from a genome as ``(ops, values)``: op ``ops[j]`` to choice ``values[j]``,
    or, where ``ops[j]`` is -1, a flip of crossing edge ``values[j]``'s copy mode. At most
    ``limit``: every copy flip and a fixed sample of the op moves, drawn by position in the
    list of them without making the list (on a mesh of thousands of PEs it has millions)."""
    lead = np.setdiff1d(np.arange(space.n_ops), space.colocated[0])  # a group moves with
    counts = space.n_choices[lead] - 1  # its leader; each op to each of its other choices
    cross = np.flatnonzero(space.copy_plan(choice[None, :], mode[None, :])[0][0])
    room, total = max(limit - len(cross), 0), int(counts.sum())
    at = np.arange(total) if total <= room else \
        np.sort(np.random.default_rng(total).choice(total, room, replace=False))
    ends = np.cumsum(counts)
    k = np.searchsorted(ends, at, side="right")  # which op's moves position ``at`` is in
    ops = lead[k]
    alt = at - (ends[k] - counts[k])  # 0 .. n_choices-2 per op
    alt = alt + (alt >= choice[ops])  # skip the op's own choice
    return np.concatenate([ops, np.full(len(cross), -1)]), np.concatenate([alt, cross])


def apply_moves(space: SearchSpace, choice: np.ndarray, mode: np.ndarray, ops: np.ndarray,
                values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The genome with each move of :func:`move_list` applied, a row per move (normalised)."""
    mode = space.normalize(choice[None, :], mode[None, :])[0]  # (a canonical genome)
    C = np.repeat(choice[None, :], len(ops), axis=0)
    M = np.repeat(mode[None, :], len(ops), axis=0)
    op_rows, flip_rows = np.flatnonzero(ops >= 0), np.flatnonzero(ops < 0)
    C[op_rows, ops[op_rows]] = values[op_rows]
    M[flip_rows, values[flip_rows]] ^= 1
    return space.canonical(C, M)


def kicked(space: SearchSpace, choice: np.ndarray, mode: np.ndarray,
           rng: np.random.Generator, most: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """The genome after 1 to ``most`` random one-op moves (the kick of an iterated local
    search: out of a one-op local optimum, to descend from again)."""
    for _ in range(1 + rng.integers(most)):
        ops, vals = move_list(space, choice, mode)
        if not len(ops):
            break
        j = rng.integers(len(ops))
        C, M = apply_moves(space, choice, mode, ops[j:j + 1], vals[j:j + 1])
        choice, mode = C[0], M[0]
    return choice, mode


def moves(space: SearchSpace, choice: np.ndarray, mode: np.ndarray,
          limit: int = MAX_MOVES) -> tuple[np.ndarray, np.ndarray]:
    """Every genome one move from ``(choice, mode)`` (normalised, without repeats): each op
    to each of its other choices, each crossing edge to the other copy mode; at most
    ``limit``, keeping all copy flips and a fixed sample of op moves."""
    return _moves(space, choice, mode, limit)[:2]


def _moves(space: SearchSpace, choice: np.ndarray, mode: np.ndarray,
           limit: int = MAX_MOVES) -> tuple[np.ndarray, np.ndarray, list[bytes], tuple]:
    """:func:`moves`, the key of each, and the moves themselves (:func:`move_list`)."""
    mode = space.normalize(choice[None, :], mode[None, :])[0]
    ops, values = move_list(space, choice, mode, limit)
    C, M = apply_moves(space, choice, mode, ops, values)
    C, M, keys, keep = _distinct(space, choice, mode, C, M)
    return C, M, keys, (ops[keep], values[keep])


def _distinct(space: SearchSpace, choice: np.ndarray, mode: np.ndarray, C: np.ndarray,
              M: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[bytes], np.ndarray]:
    """The rows of moves ``C, M`` from the normalised ``(choice, mode)`` without repeats
    or the start, their keys, and which rows they are."""
    keys = space.keys(C, M)
    first = dict.fromkeys(space.keys(choice[None, :], mode[None, :]), -1)  # the start: out
    for i, k in enumerate(keys):
        first.setdefault(k, i)
    keep = np.fromiter((i for i in first.values() if i >= 0), dtype=np.int64)
    return C[keep], M[keep], [keys[i] for i in keep.tolist()], keep


def predicted(space: SearchSpace, choice: np.ndarray, mode: np.ndarray,
              objective: Objective = LATENCY) -> np.ndarray:
    """The simulator's seconds per inference (``objective``) of each genome; infinite where
    it does not fit the profile (a scope over capacity, a copy without a route, a stream
    that does not fit). Simulated :data:`CHUNK` rows at a time (the copy plan of 20,000
    moves alone is tens of MB)."""
    return np.concatenate([np.zeros(0)] + [
        objective.batch(space, simulate_batch(space, choice[i:i + CHUNK],
                                              mode[i:i + CHUNK],
                                              per_unit=objective.per_unit))
        for i in range(0, len(choice), CHUNK)])


class Ranking(NamedTuple):
    """Every move from a start, ranked: the start's prediction, and per move (without
    repeats) its genome, key, prediction and the move itself (:func:`move_list`)."""

    here: float
    choice: np.ndarray
    mode: np.ndarray
    keys: list[bytes]
    pred: np.ndarray
    moves: tuple[np.ndarray, np.ndarray]


class Descent:
    """Descends from the best genome in the free model and proposes where it ends
    (module docstring)."""

    def __init__(self, space: SearchSpace, max_steps: int = MAX_STEPS,
                 predict: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
                 stable: bool | None = None):
        self.space, self.max_steps = space, max_steps
        #: genomes -> predicted latency (inf where one does not fit); default the simulator
        self.predict = predict or (lambda choice, mode: predicted(space, choice, mode))
        #: whether ``predict`` gives a genome the same figure every time (the simulator; a
        #: cost model refitted between rounds does not): then the moves of the last starts
        #: and their predictions are kept for the next round that starts there, and so are
        #: those of where a descent ended (the usual next start: it is then the best)
        self.stable = predict is None if stable is None else stable
        self._rankings: dict[bytes, Ranking] = {}

    def propose(self, choice: np.ndarray, mode: np.ndarray, n: int,
                measured: Collection[bytes]) -> tuple[np.ndarray, np.ndarray]:
        """Up to ``n`` unmeasured genomes predicted faster than ``(choice, mode)``: where
        steepest descent in the simulator from it ends, then its best first moves; none
        when it is a one-op local optimum under the simulator."""
        here, C, M, keys, pred, (ops, values) = self._ranked(choice, mode)
        fresh = np.array([k not in measured for k in keys], dtype=bool)
        better = np.flatnonzero((pred < here) & fresh)
        first = better[np.argsort(pred[better], kind="stable")]
        if not len(first):
            return C[:0], M[:0]
        faster = np.flatnonzero(pred < here)  # (the first step's: descent goes on from it)
        rest = faster[faster != first[0]]
        end = self.descend(C[first[0]], M[first[0]], pred[first[0]], (ops[rest], values[rest]))
        end_key = self.space.keys(end[0][None, :], end[1][None, :])[0]
        rows = [end] if end_key not in measured else []
        rows += [(C[i], M[i]) for i in first.tolist() if keys[i] != end_key][: n - len(rows)]
        return np.array([r[0] for r in rows]), np.array([r[1] for r in rows])

    def _ranked(self, choice: np.ndarray, mode: np.ndarray) -> Ranking:
        """Every move of a start, ranked (kept for the next call from the same start when
        :attr:`stable`)."""
        start = self.space.keys(choice[None, :], mode[None, :])[0]
        if start in self._rankings:
            return self._rankings[start]
        C, M, keys, moved = _moves(self.space, choice, mode)
        out = Ranking(self.predict(choice[None, :], mode[None, :])[0], C, M, keys,
                      self.predict(C, M), moved)
        self._keep(start, out)
        return out

    def _keep(self, start: bytes, ranking: Ranking) -> None:
        """Keep a start's ranking (:meth:`_ranked`), the last :data:`KEPT_RANKINGS` only."""
        if self.stable:
            self._rankings.pop(start, None)
            self._rankings[start] = ranking
            while len(self._rankings) > KEPT_RANKINGS:
                del self._rankings[next(iter(self._rankings))]

    def polish(self, choice: np.ndarray, mode: np.ndarray, bound: float,
               fixed: np.ndarray, measured: Collection[bytes]) -> tuple[np.ndarray, np.ndarray,
                                                              np.ndarray]:
        """Rows predicted faster than ``bound`` (the best's prediction), unless ``fixed``,
        replaced by where descent from them ends, if that is neither measured nor another
        row; the others as they are. Returns the rows and which of them changed."""
        C, M = (x.copy() for x in self.space.canonical(choice, mode))
        changed = np.zeros(len(C), dtype=bool)
        pred = self.predict(C, M)
        taken = set(self.space.keys(C, M))  # (and ``measured``, not copied)
        for i in np.flatnonzero((pred < bound) & ~fixed):
            c, m = self.descend(C[i], M[i], pred[i])
            key = self.space.keys(c[None, :], m[None, :])[0]
            if key not in taken and key not in measured:
                C[i], M[i], changed[i] = c, m, True
                taken.add(key)
        return C, M, changed

    def kick(self, choice: np.ndarray, mode: np.ndarray, measured: Collection[bytes],
             rng: np.random.Generator, tries: int = KICKS) -> tuple[np.ndarray, np.ndarray]:
        """Iterated local search from a one-op local optimum ``(choice, mode)``: where
        descent from it moved by 1 to 4 random one-op moves (:func:`kicked`) ends, as one
        row, for the first of ``tries`` kicks that ends unmeasured and predicted below it;
        no row if none does."""
        here = self.predict(choice[None, :], mode[None, :])[0]
        for _ in range(tries):
            c, m = kicked(self.space, choice, mode, rng)
            c, m = self.descend(c, m, self.predict(c[None, :], m[None, :])[0])
            c, m = c[None, :], m[None, :]
            if self.space.keys(c, m)[0] not in measured and self.predict(c, m)[0] < here:
                return c, m
        return choice[None, :][:0], mode[None, :][:0]

    def _keep_end(self, choice: np.ndarray, mode: np.ndarray, latency: float,
                  C: np.ndarray, M: np.ndarray, pred: np.ndarray, moved: tuple) -> None:
        """Keep the full ranking that ended a descent at ``(choice, mode)`` as
        :meth:`_ranked` would make it (the same moves, in the same order)."""
        if self.stable:
            start = self.space.keys(choice[None, :], mode[None, :])[0]
            C, M, keys, keep = _distinct(self.space, choice, mode, C, M)
            self._keep(start, Ranking(latency, C, M, keys, pred[keep],
                                      (moved[0][keep], moved[1][keep])))

    def descend(self, choice: np.ndarray, mode: np.ndarray, latency: float,
                promising: tuple[np.ndarray, np.ndarray] | None = None,
                ) -> tuple[np.ndarray, np.ndarray]:
        """Steepest descent in the model from ``(choice, mode)`` (predicted ``latency``)
        until no move is faster, or :attr:`max_steps` moves. After ranking every move, the
        next steps rank only the moves that were faster then (applied to the new genome);
        every move is ranked again when none of those is, and the descent ends only when
        that full ranking finds none faster. ``promising``: the moves (:func:`move_list`)
        to rank first, if known (``(choice, mode)`` is a step of a descent that found them
        faster)."""
        space = self.space
        mode = space.normalize(choice[None, :], mode[None, :])[0]
        for _ in range(self.max_steps):
            full = promising is None or not len(promising[0])
            ops, vals = move_list(space, choice, mode) if full else promising
            C, M = apply_moves(space, choice, mode, ops, vals)
            pred = self.predict(C, M)
            faster = np.flatnonzero(pred < latency)
            if not len(faster):
                if full:  # a local optimum: its ranking is the next round's, if it starts here
                    self._keep_end(choice, mode, latency, C, M, pred, (ops, vals))
                    break
                promising = None
                continue
            i = faster[np.argmin(pred[faster])]
            rest = faster[faster != i]
            promising = (ops[rest], vals[rest])
            choice, mode, latency = C[i], M[i], pred[i]
        return choice, mode
