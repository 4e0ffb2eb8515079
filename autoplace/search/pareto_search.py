"""The search over several objectives (``--objective latency,energy``): their front found,
not sampled.

:class:`ParetoSearch` fills each round from these, in order:

1. **seeds**: HEFT's placement; the least latency over every placement where branch and
   bound proves it (:func:`~autoplace.baselines.optimum.optimum`, on small spaces:
   :data:`EXACT_PLACEMENTS`), once; then per objective where steepest one-op descent in the
   simulator under that objective alone (:class:`~autoplace.search.descent.Descent`) ends,
   from the best measured by it (the baselines hold each unit alone and the greedy
   placement): each objective's one-op optimum, an end of the front;
2. **front moves**: the one-op moves (:func:`~autoplace.search.descent.move_list`) of the
   points of the measured front whose simulated figures no measured point weakly dominates
   (figures the front has already are no new point). First every move that *dominates* a
   front point: descent with a dominance acceptance test. Then the moves that widen the
   front, ranked by non-dominated sorting of their figures among the front's and each
   other's, then by the hypervolume each adds to the front, leaving :data:`EXPLORE_SHARE`
   of the round to 3;
3. **iterated local search**: a front point moved by 1 to :data:`KICK` random one-op moves,
   proposed as it is if no measured point weakly dominates it, else where steepest descent
   under a random weighted sum of the objectives (each scaled to [0, 1] over the front) ends;
   half of the time from the front's end of one objective, under it alone (which pushes the
   ends);
4. the rest of the front moves, then random placements that fit;
5. when the round is still short (the front's moves are measured, the descents end at
   measured points and random placements do not fit: densenet121 on ``soc`` stopped after
   475 of 1,024 trials), scalarised descents as in 3 from any measured point, moved by up to
   :data:`~autoplace.search.local_search.WANDER_KICK` random one-op moves, up to
   :data:`~autoplace.search.local_search.WANDER_TRIES` per candidate (labelled ``wander``,
   as the single-objective loop's last resort is): the job ends short of its trials only
   when those find nothing new either.

In the last rounds (the ``descent`` share of the trials: :meth:`ParetoSearch.finishing`) no
share is left to 3 and every candidate is first :meth:`~ParetoSearch.settled`: moved to
dominating one-op moves until none dominates it. Earlier rounds leave a point's dominating
moves to the next round's front moves (settling is a descent per candidate), so the front a
job ends with has no point a one-op move dominates, unless the budget ends before the
dominating moves found so far are measured.

Why hypervolume and not a random scalarisation per round to rank the moves: the simulator
predicts every figure exactly (where it is the measurer; elsewhere the learned figures come
near), so a candidate predicted dominated is a wasted trial, and
hypervolume credits a candidate with what it adds to the whole front, also in its non-convex
parts, where no weighted sum has its minimum (weighted sums find supported points only);
a weighted sum serves where a whole basin must be left (3).

The front it moves from is of the measured figures; a candidate's figures are the
simulator's, each corrected by a residual learned from the measurements once they differ
from it (:class:`~autoplace.search.learned_figures.LearnedFigures`: with the simulator as
the measurer, the simulator's); both compared to 12 significant digits
(:func:`~autoplace.records.front.significant`). Proposals are a function of what the job
measured, the rows its models were fitted on and whether it is finishing (the random draws
of 3 are seeded by the seed and the number of placements measured), so a resumed job
proposes what the uninterrupted one did.
"""

from __future__ import annotations

import numpy as np

from autoplace.baselines.optimum import optimum
from autoplace.measure.objective import LATENCY, Objectives
from autoplace.records.front import (
    contributions,
    nondominated,
    ranks,
    significant,
    weakly_dominated,
)
from autoplace.search.descent import (
    CHUNK,
    MAX_STEPS,
    Descent,
    apply_moves,
    kicked,
    move_list,
    predicted,
)
from autoplace.search.heft_start import heft_start
from autoplace.search.learned_figures import LearnedFigures
from autoplace.search.local_search import WANDER, WANDER_KICK, WANDER_TRIES
from autoplace.search.strategy import Proposal, SearchStrategy, figure_rows
from autoplace.space import SearchSpace

#: scalarised descents tried per round at most, per candidate wanted
SCALARISED_TRIES = 2
#: share of a round left to scalarised descents by the moves that widen the front
EXPLORE_SHARE = 0.25
#: random one-op moves at most before a scalarised descent
KICK = 4
#: branch and bound is tried for a seed on spaces of at most this many placements
#: (``SearchSpace.log10_size``; seed_te on soc: 10^4.8), and may simulate :data:`EXACT_WORK`
#: op-rows (0.6 M there); on squeezenet it would give up after 5 s
EXACT_PLACEMENTS, EXACT_WORK = 10**6, 2e6


class ParetoSearch(SearchStrategy):
    """Finds the front of several objectives (module docstring); ``learn``: correct the
    simulator's figures by residuals learned from the measurements
    (:class:`~autoplace.search.learned_figures.LearnedFigures`; else the simulator's
    alone)."""

    descends = True

    def __init__(self, space: SearchSpace, objective: Objectives, *, seed: int,
                 learn: bool = True):
        super().__init__()
        self.space, self.objective, self.seed = space, objective, seed
        self.k = len(objective.members)
        self.measured: set[bytes] = set()  # every key observed, failed or not
        self.keys: list[bytes] = []  # of the valid ones, in order observed ...
        self.F = np.zeros((0, self.k))  # ... their measured figures
        #: what a candidate's figures are taken to be: the simulator's, corrected by a
        #: learned residual once measurements differ from them
        self.model = LearnedFigures(space, objective, seed=seed, learn=learn)
        self._moves: dict[bytes, tuple] = {}  # front point -> its moves (see _neighbours)
        self._finishing = False  # the last rounds: moves that improve on the front first
        self._exact_tried = False  # branch and bound runs once per job (a seed)

    # -- observing ---------------------------------------------------------------------------
    def observe(self, proposal: Proposal, latency: np.ndarray) -> None:
        if not len(proposal):
            return
        values = figure_rows(latency, len(proposal), self.k)
        choice, mode = self.space.canonical(proposal.choice, proposal.mode)
        keys = self.space.keys(choice, mode)
        known = set(self.keys)
        rows = [i for i in np.flatnonzero(~np.isnan(values).any(axis=1)).tolist()
                if keys[i] not in known and not known.add(keys[i])]
        self.measured.update(keys)
        if rows:
            self.keys += [keys[i] for i in rows]
            self.F = np.vstack([self.F, significant(values[rows])])
            if self.model.observe(choice[rows], mode[rows], values[rows]):
                self._moves.clear()  # (their figures changed)

    def simulate(self, choice: np.ndarray, mode: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each genome's figures ``[rows, objectives]`` as :attr:`model` takes them (to 12
        significant digits: float noise makes no new point) and whether it is feasible
        (fits, within the limits)."""
        F, ok = [np.zeros((0, self.k))], [np.zeros(0, dtype=bool)]
        for i in range(0, len(choice), CHUNK):
            got = self.model.figures(choice[i:i + CHUNK], mode[i:i + CHUNK])
            F.append(got[0])
            ok.append(got[1])
        return significant(np.concatenate(F)), np.concatenate(ok)

    def _figure(self, j: int):
        """Descent's prediction of objective ``j`` (infinite where infeasible): the
        simulator's until a residual is learned, then :meth:`simulate`'s."""
        member = self.objective.members[j]
        if not self.model.active:
            return lambda c, m: predicted(self.space, c, m, member)

        def figure(choice: np.ndarray, mode: np.ndarray) -> np.ndarray:
            F, ok = self.simulate(choice, mode)
            return np.where(ok, F[:, j], np.inf)
        return figure

    def front(self) -> np.ndarray:
        """Rows of :attr:`F` on the measured front (of equal figures, the first measured)."""
        return np.flatnonzero(nondominated(self.F))

    # -- proposing ---------------------------------------------------------------------------
    def propose(self, n: int) -> Proposal:
        """HEFT's placement and the seeds, then the front moves (those that dominate their
        point all, those that widen it leaving :data:`EXPLORE_SHARE` of the round), then
        scalarised descents, then the rest of the front moves, then random placements."""
        front = {self.keys[i] for i in self.front().tolist()}  # (moves kept of these only)
        self._moves = {k: v for k, v in self._moves.items() if k in front}
        taken: set[bytes] = set()
        parts = [self._heft(taken)]
        explore = 0 if self._finishing else int(np.ceil(n * EXPLORE_SHARE))
        steps = (self._seeds, lambda room, taken: self._front_moves(room, taken, explore),
                 self._scalarised, self._front_moves, self._random, self._wander)
        for step in steps:
            room = n - sum(len(p) for p in parts)
            if room <= 0:
                break
            parts.append(step(room, taken))
        return _joined(parts)

    def _new(self, key: bytes, taken: set[bytes]) -> bool:
        """Whether ``key`` is neither measured nor proposed this round (then it is)."""
        if key in self.measured or key in taken:
            return False
        taken.add(key)
        return True

    def _take(self, choice: np.ndarray, mode: np.ndarray, taken: set[bytes]):
        """A candidate (in the last rounds :meth:`settled`), if new (:meth:`_new`); else
        None."""
        if self._finishing:
            choice, mode = self.settled(choice, mode)
        return (choice, mode) if self._new(self.space.keys(choice[None, :], mode[None, :])[0],
                                           taken) else None

    def settled(self, choice: np.ndarray, mode: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The genome moved, one op at a time, to a move that dominates it (of those, the
        one whose figures fall most, each relative to its own), until none does: no one-op
        move of it dominates it by its figures, so a point the last rounds add to the
        front is no point a move dominates, whatever the budget left."""
        F, ok = self.simulate(choice[None, :], mode[None, :])
        here = F[0]
        for _ in range(MAX_STEPS if ok[0] else 0):
            key = self.space.keys(choice[None, :], mode[None, :])[0]
            ops, vals, _, G, feasible = self._neighbours(key)
            better = np.flatnonzero(feasible & (G <= here).all(axis=1) & (G < here).any(axis=1))
            if not len(better):
                break
            scale = np.where(here != 0, np.abs(here), 1.0)
            i = better[np.argmin(((G[better] - here) / scale).sum(axis=1))]
            (choice, mode), here = self._apply(key, ops[i], vals[i]), G[i]
        return choice, mode

    def _heft(self, taken: set[bytes]) -> Proposal:
        choice, mode = heft_start(self.space)
        keep = self._new(self.space.keys(choice, mode)[0], taken)
        return _proposal(choice[:int(keep)], mode[:int(keep)], ("heft",) * int(keep),
                         self.space)

    def _seeds(self, n: int, taken: set[bytes]) -> Proposal:
        """Per objective, where descent under it alone ends from the best measured by it,
        if not measured (module docstring, 1)."""
        C, M, labels = [], [], []
        if not self._exact_tried and len(self.F):
            self._exact_tried = True
            got = self._exact(taken)
            if got is not None:
                C.append(got[0]), M.append(got[1]), labels.append("seed:exact")
        for j in range(self.k):
            if not len(self.F) or len(C) == n:
                break
            best = _best_by(self.F, j)
            choice, mode = self.space.from_key(self.keys[best])
            descent = Descent(self.space, predict=self._figure(j))
            got = self._take(*descent.descend(choice, mode, self.F[best, j]), taken)
            if got is not None:
                C.append(got[0]), M.append(got[1])
                labels.append(f"seed:{self.objective.plain[j].name}")
        return _proposal(np.array(C), np.array(M), tuple(labels), self.space)

    def _exact(self, taken: set[bytes]):
        """The placement of least latency, if branch and bound proves one below the least
        measured within :data:`EXACT_WORK`, it keeps the limits and is new; else None."""
        names = [m.name for m in self.objective.plain]
        if LATENCY.name not in names or self.space.log10_size > np.log10(EXACT_PLACEMENTS):
            return None
        j = names.index(LATENCY.name)
        best = float(self.F[_best_by(self.F, j), j])
        found = optimum(self.space, bound=best, work=EXACT_WORK)
        if not found.proven or found.placement is None:
            return None
        choice, mode = self.space.encode([found.placement])
        choice, mode = self.space.canonical(choice, mode)
        return self._take(choice[0], mode[0], taken) if self.simulate(choice, mode)[1][0] \
            else None

    def _front_moves(self, n: int, taken: set[bytes], leave: int = 0) -> Proposal:
        """The moves of front points new to the front: those that dominate their point
        first, then by non-dominated rank and hypervolume added, those leaving ``leave``
        of the ``n`` (module docstring, 2)."""
        points = self.front()
        moves, F, better = self._candidates(points, taken)
        rows = []
        if len(F):
            rank = ranks(F, self.F[points])
            gain = np.zeros(len(F))
            gain[rank == 0] = contributions(F[rank == 0], self.F[points])
            want = max(min(n, int(better.sum())), n - leave)
            for i in np.lexsort((-gain, rank, ~better)).tolist():
                if len(rows) == want:
                    break
                if (got := self._take(*self._apply(*moves[i]), taken)) is not None:
                    rows.append(got)
        return _proposal(np.array([c for c, _ in rows]), np.array([m for _, m in rows]),
                         ("front",) * len(rows), self.space)

    def _candidates(self, points: np.ndarray, taken: set[bytes]) -> tuple:
        """``(moves, figures, better)`` of the moves of front ``points`` (each ``(key of
        the point, op, value)``: :func:`move_list`'s) that are feasible, unmeasured, not
        weakly dominated by a measured point and of figures no other candidate has;
        ``better``: it dominates a front point (the one it moves from, or another of which
        it is a move too)."""
        if not len(points):  # (nothing measured fits yet)
            return [], np.zeros((0, self.k)), np.zeros(0, dtype=bool)
        front_F = self.F[points]
        parts = [(p, *self._neighbours(self.keys[p])) for p in points.tolist()]
        src = np.concatenate([np.full(len(x[1]), x[0]) for x in parts])
        ops, vals, keys, F, ok = (np.concatenate([x[i] for x in parts]) for i in range(1, 6))
        rows, seen = [], set()
        for i in np.flatnonzero(ok.astype(bool) & ~weakly_dominated(F, front_F)).tolist():
            if keys[i] not in self.measured and keys[i] not in taken and keys[i] not in seen:
                seen.add(keys[i])
                rows.append(i)
        _, first = np.unique(F[rows].reshape(-1, self.k), axis=0, return_index=True)
        rows = [rows[i] for i in np.sort(first).tolist()]  # equal figures: the first
        F = F[rows].reshape(-1, self.k)
        better = ((F[:, None, :] <= front_F[None]).all(axis=2)  # (a move of two points:
                  & (F[:, None, :] < front_F[None]).any(axis=2)).any(axis=1)  # either)
        return [(self.keys[src[i]], int(ops[i]), int(vals[i])) for i in rows], F, better

    def _neighbours(self, key: bytes) -> tuple:
        """``(ops, values, keys, figures, feasible)`` of the one-op moves from a genome
        (kept while it is on the front and the figures' models are not refitted)."""
        if key not in self._moves:
            choice, mode = self.space.from_key(key)
            ops, vals = move_list(self.space, choice, mode)
            C, M = apply_moves(self.space, choice, mode, ops, vals)
            F, ok = self.simulate(C, M)
            keys = np.empty(len(C), dtype=object)
            keys[:] = self.space.keys(C, M)
            self._moves[key] = (ops, vals, keys, F, ok)
        return self._moves[key]

    def _apply(self, key: bytes, op: int, value: int) -> tuple[np.ndarray, np.ndarray]:
        choice, mode = self.space.from_key(key)
        C, M = apply_moves(self.space, choice, mode, np.array([op]), np.array([value]))
        return C[0], M[0]

    def _scalarised(self, n: int, taken: set[bytes], *, wander: bool = False) -> Proposal:
        """From random front points moved by 1 to :data:`KICK` random one-op moves: the
        moved genome where no measured point weakly dominates it, else where descent under
        a random weighted sum of the scaled objectives ends; half of the time, from the
        front's end of one objective and under it alone (module docstring, 3). ``wander``:
        the other half from any measured point, by up to :data:`WANDER_KICK` moves, up to
        :data:`WANDER_TRIES` per candidate (5)."""
        points = self.front()
        if not len(points):
            return _proposal(np.zeros((0, 0)), np.zeros((0, 0)), (), self.space)
        rng = np.random.default_rng([self.seed, len(self.measured)] + [2] * wander)
        lo, hi = self.F[points].min(axis=0), self.F[points].max(axis=0)
        span = np.where(hi > lo, hi - lo, 1.0)
        tries, most = (WANDER_TRIES, WANDER_KICK) if wander else (SCALARISED_TRIES, KICK)
        anywhere = np.arange(len(self.F)) if wander else points
        C, M, labels = [], [], []
        for _ in range(tries * n):
            start = anywhere[rng.integers(len(anywhere))]
            w = rng.dirichlet(np.ones(self.k))
            if rng.random() < 0.5:  # one objective alone, from its end of the front
                j = rng.integers(self.k)
                w = np.eye(self.k)[j]
                start = points[_best_by(self.F[points], j)]
            start = self.keys[start]
            choice, mode = kicked(self.space, *self.space.from_key(start), rng, most)
            F, ok = self.simulate(choice[None, :], mode[None, :])
            label = WANDER if wander else "kick"
            if not ok[0] or weakly_dominated(F, self.F[points])[0]:
                descent = Descent(self.space, predict=lambda c, m, w=w:
                                  self._weighted(c, m, w, lo, span))
                choice, mode = descent.descend(choice, mode, self._weighted(
                    choice[None, :], mode[None, :], w, lo, span)[0])
                label = WANDER if wander else "scalarised"
                if not self.simulate(choice[None, :], mode[None, :])[1][0]:
                    continue  # (moved where nothing fits: no move fits either)
            if (got := self._take(choice, mode, taken)) is not None:
                C.append(got[0]), M.append(got[1]), labels.append(label)
            if len(C) == n:
                break
        return _proposal(np.array(C), np.array(M), tuple(labels), self.space)

    def _wander(self, n: int, taken: set[bytes]) -> Proposal:
        """The last resort of a short round (module docstring, 5)."""
        return self._scalarised(n, taken, wander=True)

    def _weighted(self, choice, mode, w, lo, span) -> np.ndarray:
        F, ok = self.simulate(choice, mode)
        return np.where(ok, ((F - lo) / span) @ w, np.inf)

    def _random(self, n: int, taken: set[bytes]) -> Proposal:
        """Random genomes that are feasible and new (the last resort of a round)."""
        rng = np.random.default_rng([self.seed, len(self.measured), 1])
        choice, mode = self.space.canonical(*self.space.random_genomes(32 * n, rng))
        _, ok = self.simulate(choice, mode)
        rows = []
        for i in np.flatnonzero(ok).tolist():
            if len(rows) < n and (got := self._take(choice[i], mode[i], taken)) is not None:
                rows.append(got)
        return _proposal(np.array([c for c, _ in rows]), np.array([m for _, m in rows]),
                         ("random",) * len(rows), self.space)

    def finishing(self) -> None:
        """The last rounds: no share of a round is left to scalarised descents while front
        moves remain, those that dominate their point first."""
        self._finishing = True

    def state(self) -> dict:
        """Its seed and the rows its model was last fitted on: its proposals are a function
        of those and of what it observed."""
        return {"seed": self.seed, "fitted_rows": self.model.fitted_rows}

    def restore(self, state: dict) -> None:
        if sorted(state) != ["fitted_rows", "seed"]:
            raise ValueError(f"a ParetoSearch state is its seed and fitted rows, got "
                             f"{sorted(state)}")
        self.seed = int(state["seed"])
        if int(state["fitted_rows"]) != self.model.fitted_rows:
            self.model.refit(int(state["fitted_rows"]))
            self._moves.clear()


def _best_by(F: np.ndarray, j: int) -> int:
    """The row least by column ``j``, of equals the least by the other columns in order."""
    others = [F[:, i] for i in range(F.shape[1]) if i != j]
    return int(np.lexsort([*others[::-1], F[:, j]])[0])


def _proposal(choice, mode, labels: tuple[str, ...], space: SearchSpace) -> Proposal:
    n = len(labels)
    return Proposal(choice=np.asarray(choice, dtype=np.int64).reshape(n, space.n_ops),
                    mode=np.asarray(mode, dtype=np.int64).reshape(n, space.n_edges),
                    labels=labels)


def _joined(parts: list[Proposal]) -> Proposal:
    return Proposal(choice=np.concatenate([p.choice for p in parts]),
                    mode=np.concatenate([p.mode for p in parts]),
                    labels=tuple(x for p in parts for x in p.labels))
