"""Evolutionary proposals over encoded placements, vectorised with numpy.

A *genome* is a placement encoded as a choice index per op and a preferred copy mode per
edge (0 ``sync``, 1 ``async``): the compiled space's encoding
(:class:`~autoplace.space.SearchSpace`). :class:`Genomes` mutates and crosses whole batches of
them at once; :func:`evolve` runs a few generations of mutation and selection against a
score (the cost model's prediction), as Ansor's evolutionary search does, so that many
candidates are ranked for each one measured.

Mutations (one per child, drawn by :data:`OPERATORS` weights; where they pick a unit of a
class of interchangeable units, they pick "one of the class's units the genome uses, or a
new one", each equally likely, not a unit id):

- ``point``: one op to a random choice;
- ``follow``: one op to the (unit, scope) of a random neighbour (removes a copy);
- ``segment``: a run of ops in program order to one (unit, scope) where each allows it;
- ``scope``: a run of ops in program order to one scope, each keeping its unit where the
  unit can use that scope (a stage moves into on-chip memory, or out of it);
- ``move``: every op on one unit to another unit (e.g. to an idle twin on a mesh);
- ``mode``: flip the preferred copy mode of 1-3 edges;
- ``cross``: a program-order range of ops (and their in-edges' modes) from a second parent.

Runs (``segment``, ``scope``) are log-uniformly 2 ops to half the graph long.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence

import numpy as np

from autoplace.space import SearchSpace

OPERATORS = {"point": 0.25, "follow": 0.15, "segment": 0.15, "scope": 0.1, "move": 0.1,
             "mode": 0.1, "cross": 0.15}


class Genomes:
    """Batch mutations of the genomes of one space."""

    def __init__(self, space: SearchSpace):
        self.space = space
        self.neighbours = _neighbours(space)

    # -- mutation ------------------------------------------------------------------------
    def mutate(self, choice: np.ndarray, mode: np.ndarray, parents: np.ndarray,
               rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """One child per entry of ``parents`` (row indices into ``choice``/``mode``)."""
        c, m = choice[parents].copy(), mode[parents].copy()
        names = list(OPERATORS)
        kind = rng.choice(len(names), size=len(parents), p=list(OPERATORS.values()))
        for k, name in enumerate(names):
            rows = np.flatnonzero(kind == k)
            if len(rows):
                getattr(self, f"_{name}")(c, m, rows, rng, choice, mode)
        return c, m

    def _point(self, c, m, rows, rng, *_):
        t = self.space
        i = rng.integers(0, t.n_ops, len(rows))
        pick = (rng.random(len(rows)) * t.n_choices[i]).astype(np.int64)
        if not t.symmetries:
            c[rows, i] = pick
            return
        units, scopes = self._classwise(c[rows], t.c_unit[i, pick], t.c_scope[i, pick], rng)
        want = t.choice_index(i, units, scopes, t.c_resident[i, pick])
        c[rows, i] = np.where(want >= 0, want, pick)

    def _classwise(self, parents: np.ndarray, units: np.ndarray, scopes: np.ndarray,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Target ``units`` (and ``scopes``) per row with each unit of an interchangeable
        class (``SearchSpace.symmetries``) redrawn as "one of the ``k`` units of the class
        the row uses, or a new one", each of the ``k + 1`` equally likely (a unit id would
        make "a new one" ``(m - k) / m`` likely). Rows are canonical: the class's units they
        use are its first ``k``."""
        t = self.space
        if not t.symmetries:
            return units, scopes
        on = t.c_unit[np.arange(t.n_ops), parents]
        for sym in t.symmetries:
            moved = sym.member[units] >= 0
            if not moved.any():
                continue
            k = sym.member[on].max(axis=1) + 1  # units of the class the row uses
            draw = np.minimum((rng.random(len(units)) * (k + 1)).astype(np.int64),
                              len(sym.units) - 1)
            units = np.where(moved, sym.units[draw], units)
            scopes = np.where(moved, sym.moved(draw, scopes), scopes)
        return units, scopes

    def _follow(self, c, m, rows, rng, *_):
        i = rng.integers(0, self.space.n_ops, len(rows))
        nb = self.neighbours[i, (rng.random(len(rows)) * self.neighbours.shape[1]).astype(int)]
        has = nb >= 0
        rows, i, nb = rows[has], i[has], nb[has]
        t = self.space
        want = self.space.choice_index(i, t.c_unit[nb, c[rows, nb]], t.c_scope[nb, c[rows, nb]])
        ok = want >= 0
        c[rows[ok], i[ok]] = want[ok]

    def _runs(self, rows: np.ndarray, rng: np.random.Generator):
        """A start op and a log-uniform length (2 .. half the graph) per row."""
        n = self.space.n_ops
        start = rng.integers(0, n, len(rows))
        top = np.log(max(n / 2, 2.0))
        length = np.exp(rng.uniform(np.log(2.0), top, len(rows))).round().astype(np.int64)
        return start, np.maximum(length, 1)

    def _apply_runs(self, c, rows, start, length, units, scopes) -> None:
        """Set each op of each run to its choice of (``units[row, op]``, ``scopes[row,
        op]``), where the op has one."""
        cols = np.arange(self.space.n_ops)
        r, col = np.nonzero((cols >= start[:, None]) & (cols < (start + length)[:, None]))
        self._set(c, rows, r, col, units[r, col], scopes[r, col])

    def _set(self, c, rows, r, col, units, scopes) -> None:
        """Op ``col`` of each row ``rows[r]`` to its choice of (``units``, ``scopes``),
        where it has one."""
        want = self.space.choice_index(col, units, scopes)
        ok = want >= 0
        c[rows[r[ok]], col[ok]] = want[ok]

    def _segment(self, c, m, rows, rng, *_):
        t = self.space
        start, length = self._runs(rows, rng)
        pick = (rng.random(len(rows)) * t.n_choices[start]).astype(np.int64)
        unit, scope = self._classwise(c[rows], t.c_unit[start, pick], t.c_scope[start, pick],
                                      rng)
        shape = (len(rows), t.n_ops)
        units = np.broadcast_to(unit[:, None], shape)
        scopes = np.broadcast_to(scope[:, None], shape)
        self._apply_runs(c, rows, start, length, units, scopes)

    def _scope(self, c, m, rows, rng, *_):
        t = self.space
        start, length = self._runs(rows, rng)
        scope = rng.integers(0, len(t.scopes), len(rows))
        units = t.c_unit[np.arange(t.n_ops), c[rows]]
        self._apply_runs(c, rows, start, length, units,
                         np.broadcast_to(scope[:, None], units.shape))

    def _move(self, c, m, rows, rng, *_):
        t = self.space
        i = rng.integers(0, t.n_ops, len(rows))
        pick = (rng.random(len(rows)) * t.n_choices[i]).astype(np.int64)
        src_unit = t.c_unit[i, c[rows, i]]
        unit, scope = self._classwise(c[rows], t.c_unit[i, pick], t.c_scope[i, pick], rng)
        r, col = np.nonzero(t.c_unit[np.arange(t.n_ops), c[rows]] == src_unit[:, None])
        self._set(c, rows, r, col, unit[r], scope[r])

    def _mode(self, c, m, rows, rng, *_):
        if not self.space.n_edges:
            return
        for _ in range(3):
            e = rng.integers(0, self.space.n_edges, len(rows))
            flip = rng.random(len(rows)) < 0.6
            m[rows[flip], e[flip]] ^= 1

    def _cross(self, c, m, rows, rng, choice, mode):
        t = self.space
        other = rng.integers(0, len(choice), len(rows))
        lo = rng.integers(0, t.n_ops, len(rows))
        hi = np.minimum(lo + rng.integers(1, max(t.n_ops // 2, 1) + 1, len(rows)), t.n_ops)
        cols = np.arange(t.n_ops)
        take = (cols >= lo[:, None]) & (cols < hi[:, None])
        c[rows] = np.where(take, choice[other], c[rows])
        take_e = (t.dst >= lo[:, None]) & (t.dst < hi[:, None])
        m[rows] = np.where(take_e, mode[other], m[rows])


def _neighbours(t: SearchSpace) -> np.ndarray:
    """Predecessors and successors of each op, padded with -1."""
    nb: list[list[int]] = [[] for _ in range(t.n_ops)]
    for s, d in zip(t.src, t.dst):
        nb[s].append(int(d))
        nb[d].append(int(s))
    width = max((len(x) for x in nb), default=1) or 1
    out = np.full((t.n_ops, width), -1, dtype=np.int64)
    for i, x in enumerate(nb):
        out[i, :len(x)] = x
    return out


#: Scores (lower is better) and a duplicate key per row of a batch of genomes (normalised),
#: given with their copy plan (``SearchSpace.copy_plan``), which scoring may reuse.
Score = Callable[[np.ndarray, np.ndarray, tuple], tuple[np.ndarray, list[bytes]]]


def evolve(genomes: Genomes, choice: np.ndarray, mode: np.ndarray, score: Score, *,
           children: int, generations: int, keep: int, rng: np.random.Generator,
           exclude: Sequence[Container[bytes]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Evolve the starting genomes against ``score``.

    Each generation mutates ``children`` parents drawn from the population (better ranks
    drawn more often) and keeps the ``keep`` best of distinct keys. Returns every genome
    scored whose key is new and in none of ``exclude``, best first, with its score.
    """
    space = genomes.space
    choice = space.canonical_choice(choice)  # relabellings of one placement are one key
    plan = space.copy_plan(choice, mode)
    mode = plan[1]
    pop = unique_best(choice, mode, *score(choice, mode, plan), ())
    pool, scored = [pop], set(space.keys(choice, mode))
    for _ in range(generations):
        weights = 1.0 / (np.arange(len(pop[0])) + 2.0)
        parents = rng.choice(len(pop[0]), size=children, p=weights / weights.sum())
        c, m = genomes.mutate(pop[0], pop[1], parents, rng)
        c = space.canonical_choice(c)
        plan = space.copy_plan(c, m)
        m = plan[1]
        new = _first_unseen(space.keys(c, m), scored)  # many children equal a parent
        c, m, plan = c[new], m[new], tuple(x[new] for x in plan)
        kids = unique_best(c, m, *score(c, m, plan), ())
        pool.append(kids)
        pop = unique_best(*(np.concatenate(x) for x in zip(pop[:3], kids[:3])),
                          pop[3] + kids[3], ())
        pop = (pop[0][:keep], pop[1][:keep], pop[2][:keep], pop[3][:keep])
    c, m, s = (np.concatenate(x) for x in zip(*(p[:3] for p in pool)))
    return unique_best(c, m, s, [k for p in pool for k in p[3]], exclude)[:3]


def _first_unseen(keys: list[bytes], seen: set[bytes]) -> np.ndarray:
    """Indices of the first occurrence of each key not in ``seen`` (which gains them)."""
    out = []
    for idx, key in enumerate(keys):
        if key not in seen:
            seen.add(key)
            out.append(idx)
    return np.array(out, dtype=np.int64)


def unique_best(c, m, s, keys: list[bytes], exclude: Sequence[Container[bytes]]):
    """Rows sorted by score (stable), the first of each key, keys in any of ``exclude``
    dropped (each looked up: the sets grow with the job, the pool does not)."""
    order = np.argsort(s, kind="stable")
    ranked = [keys[i] for i in order.tolist()]
    first = dict(zip(reversed(ranked), range(len(ranked) - 1, -1, -1)))  # key -> first rank
    ranks = list(first.values())
    for out in exclude:
        ranks = [r for r in ranks if ranked[r] not in out]
    keep = order[np.sort(np.array(ranks, dtype=np.int64))]
    return c[keep], m[keep], s[keep], [keys[i] for i in keep.tolist()]
