"""The exact optimum over the simulator's model (branch and bound) and a lower bound.

**Branch and bound.** The simulator runs every resource's work in program order, so the
schedule of the first ``k`` ops (and the copies into them) does not depend on the ops after
them: a prefix's finish times are final. The search extends prefixes one op at a time in
program order, over every (unit, scope) choice and every copy mode of the new op's
crossing in-edges, simulating all extensions of a level at once with the batched model. A
prefix is dropped when

- a copy it needs has no route, or a scope's peak is over capacity counting every buffer
  only until its last consumer *in the prefix* (a lower bound of the final peak), or
- ``max(finish(p) + tail(p))`` over its ops reaches the incumbent, where ``tail(p)`` is the
  longest path after ``p`` with every op at its fastest and copies free.

With no pruning this is exhaustive enumeration; ``limit`` bounds the rows of a level and
``work`` the total (rows x ops simulated); a search that would exceed either gives up
(``Optimum.proven`` is False).

**Lower bound** for any graph: the larger of the critical path (each op at its fastest,
copies free) and the optimum of the LP relaxation of unit loads (ops split fractionally
over the units that accept them, each part at that unit's fastest scope). "Fastest" counts
only the choices whose scope can hold the op's inputs, output and (resident) weights at once:
they are all live while it runs, so no feasible placement uses another.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from autoplace.hardware.profile import COPY_MODES
from autoplace.measure.batch import fitting as fits_profile
from autoplace.measure.batch import simulate_batch
from autoplace.space import Placement, PlacementError, SearchSpace

if TYPE_CHECKING:
    from autoplace.measure.objective import Objectives

CHUNK = 50_000  # rows simulated at once


@dataclass(frozen=True, kw_only=True)
class Optimum:
    """The best placement found, and whether it is proven optimal."""

    latency_s: float
    placement: Placement | None
    proven: bool
    nodes: int  # prefixes simulated


@dataclass(frozen=True, kw_only=True)
class Bound:
    """A lower bound on the latency of every placement, and its two parts."""

    critical_path_s: float
    load_s: float

    @property
    def latency_s(self) -> float:
        """The bound: the larger of its parts."""
        return max(self.critical_path_s, self.load_s)


def lower_bound(space: SearchSpace) -> Bound:
    """Max of the critical-path bound and the LP bound on unit loads (see module doc)."""
    t = space
    fastest = fitting_fastest(t)
    return Bound(critical_path_s=float((fastest + _tails(t, fastest)).max(initial=0.0)),
                 load_s=load_bound(t))


def fitting(t: SearchSpace) -> np.ndarray:
    """``[ops, width]``: the real choices whose scope holds the op's inputs and output, and
    its weights when they are resident there."""
    in_bytes = np.zeros(t.n_ops)
    np.add.at(in_bytes, t.dst, t.nbytes)
    real = np.arange(t.c_dur.shape[1]) < t.n_choices[:, None]
    need = (in_bytes + t.out_bytes)[:, None] + np.where(t.c_wscope == t.c_scope,
                                                        t.weight_bytes[:, None], 0.0)
    fits = real & (need <= t.capacity[t.c_scope])
    return np.where(fits.any(axis=1)[:, None], fits, real)  # none fits: the op fails anyway


def fitting_fastest(t: SearchSpace) -> np.ndarray:
    """Each op's shortest time over its :func:`fitting` choices."""
    return np.where(fitting(t), t.c_dur, np.inf).min(axis=1)


def load_bound(t: SearchSpace) -> float:
    """``min M`` s.t. ops split over units (``sum_u x[v,u] = 1``), each load ``<= M``."""
    from scipy.optimize import linprog

    n_units, fits = len(t.units), fitting(t)
    best = np.full((t.n_ops, n_units), np.inf)
    for v in range(t.n_ops):
        for j in np.flatnonzero(fits[v]):
            u = t.c_unit[v, j]
            best[v, u] = min(best[v, u], t.c_dur[v, j])
    pairs = [(v, u) for v in range(t.n_ops) for u in range(n_units) if np.isfinite(best[v, u])]
    n = len(pairs)
    if not n:
        return 0.0
    eq = np.zeros((t.n_ops, n + 1))
    ub = np.zeros((n_units, n + 1))
    ub[:, n] = -1.0
    for col, (v, u) in enumerate(pairs):
        eq[v, col] = 1.0
        ub[u, col] = best[v, u]
    cost = np.zeros(n + 1)
    cost[n] = 1.0
    res = linprog(cost, A_ub=ub, b_ub=np.zeros(n_units), A_eq=eq, b_eq=np.ones(t.n_ops),
                  bounds=(0, None), method="highs")
    return float(res.x[n]) * (1 - 1e-9) if res.status == 0 else 0.0


def _tails(t: SearchSpace, fastest: np.ndarray) -> np.ndarray:
    """Longest path after each op (exclusive) with ops at ``fastest`` and free copies."""
    outs = t.out_edges
    tail = np.zeros(t.n_ops)
    for v in reversed(range(t.n_ops)):
        tail[v] = max((fastest[t.dst[k]] + tail[t.dst[k]] for k in outs[v]), default=0.0)
    return tail


class _Search:
    """Level-by-level branch and bound (see the module docstring)."""

    def __init__(self, space: SearchSpace, incumbent: float, limit: int, work: float):
        self.space, self.t, self.limit, self.work = space, space, limit, work
        self.best, self.best_rows = incumbent, None
        self.tail = _tails(space, fitting_fastest(space))
        self.in_edges = space.in_edges
        self.nodes = 0

    def extend(self, choice: np.ndarray, mode: np.ndarray, k: int):
        """Every child of the prefixes: op ``k``'s choices x its in-edges' copy modes."""
        t, ins = self.t, self.in_edges[k]
        n_new = int(t.n_choices[k])
        combos = list(itertools.product(range(len(COPY_MODES)), repeat=len(ins)))
        combos = np.array(combos, dtype=np.int64).reshape(len(combos), len(ins))
        fan = n_new * len(combos)
        if len(choice) * fan > self.limit:
            return None, None
        parent = np.repeat(np.arange(len(choice)), fan)
        choice = np.concatenate(
            [choice[parent], np.tile(np.repeat(np.arange(n_new), len(combos)), len(choice))
             [:, None]], axis=1)
        mode = mode[parent]
        mode[:, ins] = np.tile(combos, (len(parent) // max(len(combos), 1), 1))
        scope = t.c_scope[np.arange(k + 1), choice]
        for e in ins:  # a mode on an edge that needs no copy is meaningless: keep one row
            mode[scope[:, t.src[e]] == scope[:, k], e] = 0
        # one row per distinct prefix: its choices and every copy mode so far (rows of one
        # parent differ only in the new op's; rows of two parents may then coincide)
        _, first = np.unique(np.concatenate([choice, mode], axis=1), axis=0,
                             return_index=True)
        first.sort()
        return choice[first], mode[first]

    def level(self, choice: np.ndarray, mode: np.ndarray, k: int):
        """Simulate the rows of level ``k`` (ops ``[0, k]``) and keep the promising ones."""
        keep = np.zeros(len(choice), dtype=bool)
        pad = np.zeros((1, self.t.n_ops - k - 1), dtype=np.int64)  # ops not placed yet
        for lo in range(0, len(choice), CHUNK):
            c, m = choice[lo:lo + CHUNK], mode[lo:lo + CHUNK]
            full = np.concatenate([c, np.repeat(pad, len(c), axis=0)], axis=1)
            out = simulate_batch(self.space, full, m, prefix=k + 1, finish=True)
            self.nodes += len(c)
            ok = fits_profile(self.space, out)
            if k == self.t.n_ops - 1:
                self._improve(ok, out.latency, c, m)
            bound = (out.finish + self.tail[None, :k + 1]).max(axis=1)
            keep[lo:lo + len(c)] = ok & (bound < self.best)
        return choice[keep], mode[keep]

    def _improve(self, ok, lat, c, m) -> None:
        lat = np.where(ok, lat, np.inf)
        b = int(np.argmin(lat))
        if lat[b] < self.best:
            self.best, self.best_rows = float(lat[b]), (c[b].copy(), m[b].copy())

    def run(self) -> bool:
        """Search every level; False if a level outgrew the limit."""
        choice = np.zeros((1, 0), dtype=np.int64)
        mode = np.zeros((1, self.t.n_edges), dtype=np.int64)
        for k in range(self.t.n_ops):
            choice, mode = self.extend(choice, mode, k)
            if choice is None or len(choice) * (k + 1) > self.work:
                return False
            self.work -= len(choice) * (k + 1)
            choice, mode = self.level(choice, mode, k)
            if not len(choice):
                break
        return True


def optimum(space: SearchSpace, *, incumbent: Placement | None = None,
            bound: float | None = None, limit: int = 3_000_000, work: float = 1e9) -> Optimum:
    """The minimum latency over every placement of ``space`` by branch and bound.

    ``incumbent`` (e.g. the HEFT placement) and ``bound`` (a latency known to be reachable,
    e.g. the best a search measured) seed the pruning; ``limit`` caps the prefixes of a
    level and ``work`` the op-rows simulated in all (past either, the answer is the best
    known, with ``proven=False``). When nothing beats
    the seeds, the answer is their latency, with the incumbent's placement if it is the one
    that reaches it (else None).
    """
    seed_s = _latency(space, incumbent) if incumbent is not None else np.inf
    start = min(seed_s, np.inf if bound is None else bound)
    search = _Search(space, start * (1 + 1e-12), limit, work)
    proven = search.run()
    if search.best_rows is None:
        placement = incumbent if incumbent is not None and seed_s <= start else None
        return Optimum(latency_s=float(start), placement=placement, proven=proven,
                       nodes=search.nodes)
    placement = space.decode(*search.best_rows)
    return Optimum(latency_s=search.best, placement=placement, proven=proven,
                   nodes=search.nodes)


def enumerated_front(space: SearchSpace, objectives: Objectives,
                     limit: int = 1 << 20) -> np.ndarray:
    """The exact front of ``objectives`` over every placement of ``space`` (each op's every
    choice, each copy's every mode; those that do not fit left out): ``[points,
    objectives]``, each point once (to :data:`~autoplace.records.front.DIGITS` significant
    digits), ordered by the first objective. ValueError naming the count when the space has
    more than ``limit`` placements."""
    from autoplace.records.front import nondominated, significant

    choice, mode = every_genome(space, limit)
    parts = [np.zeros((0, len(objectives.members)))]
    for lo in range(0, len(choice), CHUNK):
        out = simulate_batch(space, choice[lo:lo + CHUNK], mode[lo:lo + CHUNK])
        parts.append(objectives.figures(out)[objectives.feasible(space, out)])
    F = significant(np.vstack(parts))
    return np.unique(F[nondominated(F)], axis=0)


def every_genome(space: SearchSpace, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """Every placement of ``space`` once, as genomes: each op's every choice, and for each,
    every mode of the copies it makes (an edge whose ends share a scope makes none);
    ValueError naming the count when there are more than ``limit``."""
    ops = math.prod(int(k) for k in space.n_choices)
    if ops > limit:
        raise ValueError(f"{space.graph.name} on {space.profile.name}: {ops:,} op choices, "
                         f"more than the {limit:,} placements enumerated at most")
    C = np.array(list(itertools.product(*(range(int(k)) for k in space.n_choices))))
    ends = [space.normalize(C, np.full((len(C), space.n_edges), m))
            for m in range(len(COPY_MODES))]
    free = np.any([e != ends[0] for e in ends[1:]], axis=0).reshape(len(C), space.n_edges)
    count = int((len(COPY_MODES) ** free.sum(axis=1)).sum())
    if count > limit:
        raise ValueError(f"{space.graph.name} on {space.profile.name}: {count:,} placements, "
                         f"more than the {limit:,} enumerated at most")
    rows_c, rows_m = [C[:0]], [np.zeros((0, space.n_edges), dtype=np.int64)]
    for pattern in np.unique(free, axis=0):
        same = C[(free == pattern).all(axis=1)]
        bits = np.array(list(itertools.product(range(len(COPY_MODES)),
                                               repeat=int(pattern.sum()))), dtype=np.int64)
        modes = np.zeros((len(bits), space.n_edges), dtype=np.int64)
        modes[:, pattern] = bits.reshape(len(bits), -1)
        rows_c.append(np.repeat(same, len(modes), axis=0))
        rows_m.append(np.tile(modes, (len(same), 1)))
    return np.concatenate(rows_c), np.concatenate(rows_m)


def _latency(space: SearchSpace, placement: Placement) -> float:
    """Simulated latency of one placement (inf if it does not fit)."""
    try:
        choice, mode = space.encode([placement])
    except PlacementError:
        return np.inf
    if space.check(placement):
        return np.inf
    out = simulate_batch(space, choice, mode)
    return float(out.latency[0]) if fits_profile(space, out)[0] else np.inf
