"""HEFT (Topcuoglu et al., 2002), adapted to memory scopes and copy modes.

Classic HEFT ranks tasks by their *upward rank* (mean cost of the longest path to an exit)
and gives each, in decreasing rank, the processor on which it finishes earliest, inserting
it into the first idle gap long enough. The adaptation to autoplace's space:

- **processors** are an op's (unit, scope) choices; an op on choice ``c`` takes the
  simulator's op time ``w(v, c)`` and occupies ``c``'s unit;
- **communication**: an edge whose two ends sit in different scopes is a copy along the
  cheapest route of its mode. Each candidate mode is planned hop by hop on the resource that
  performs it (the host unit for ``sync``, each hop's DMA engine for ``async``), with
  insertion like the ops; the copy takes the mode that delivers earliest (ties: ``async``,
  which leaves the host free). Copies therefore compete for the host and DMA engines,
  which classic HEFT's contention-free links do not model;
- **mean costs for the rank**: ``w̄`` is the mean op time over the op's choices; ``c̄`` the
  mean over the two ends' choice pairs of the faster mode's copy time (0 for one scope);
- **identical idle units**: an op tries the units already in use, and of each class of
  identical units (``SearchSpace.unit_class``) only the first :data:`IDLE_PER_CLASS` idle
  ones: idle twins differ only in where they sit, and a mesh has thousands of them;
- **memory**: a scope is admissible for an op only if the bytes resident there (outputs of
  planned ops with an unplanned consumer, graph outputs, plus this op's output and staged
  inputs, and its weights if they are resident there; weights and graph inputs stay for the
  whole run) fit its capacity; if no choice is admissible, every choice is.

HEFT's own plan inserts ops into idle gaps, while the simulator (like a stream) runs each
resource's work in program order; the plan's makespan is thus only an estimate, and the
placement is measured like any other candidate.
"""

from __future__ import annotations

import bisect

import numpy as np

from autoplace.hardware.profile import COPY_MODES
from autoplace.space import ASYNC, SYNC, Placement, SearchSpace

#: scopes per end of an edge that :func:`mean_copy` averages over at most (evenly spaced)
MEAN_SCOPES = 64
#: idle units of one class an op may go to (besides the units already in use)
IDLE_PER_CLASS = 2


def upward_ranks(space: SearchSpace) -> np.ndarray:
    """``rank(v) = w̄(v) + max over edges v->w of (c̄(v, w) + rank(w))``."""
    real = space.real_choices()
    mean_w = np.where(real, space.c_dur, 0.0).sum(axis=1) / space.n_choices
    rank = np.zeros(space.n_ops)
    for v in reversed(range(space.n_ops)):
        tail = [mean_copy(space, k) + rank[space.dst[k]] for k in space.out_edges[v]]
        rank[v] = mean_w[v] + max(tail, default=0.0)
    return rank


def _scope_weights(space: SearchSpace, op: int) -> tuple[np.ndarray, np.ndarray]:
    """The scopes of op ``op``'s choices and how many choices each has (at most
    :data:`MEAN_SCOPES` of them, evenly spaced, on a big mesh)."""
    scopes, counts = np.unique(space.c_scope[op, :space.n_choices[op]], return_counts=True)
    if len(scopes) > MEAN_SCOPES:
        keep = np.linspace(0, len(scopes) - 1, MEAN_SCOPES).round().astype(np.int64)
        scopes, counts = scopes[keep], counts[keep]
    return scopes, counts


def mean_copy(space: SearchSpace, k: int) -> float:
    """Mean over the choice pairs of edge ``k``'s ends of the faster copy (0: same scope)."""
    a, wa = _scope_weights(space, space.src[k])
    b, wb = _scope_weights(space, space.dst[k])
    aa, bb = np.repeat(a, len(b)), np.tile(b, len(a))
    weight = np.repeat(wa, len(b)) * np.tile(wb, len(a))
    routes = space.routes
    secs = np.full(len(aa), np.inf)
    for m in range(len(COPY_MODES)):
        rid = routes.ids(aa, bb, np.full(len(aa), m))
        secs = np.minimum(secs, np.where(rid > 0, space.copy_seconds(np.full(len(rid), k), rid),
                                         np.inf))
    secs = np.where(aa == bb, 0.0, secs)
    ok = np.isfinite(secs)
    return float((secs[ok] * weight[ok]).sum() / weight[ok].sum()) if ok.any() else 0.0


class _Timelines:
    """Busy intervals of every resource, sorted and disjoint, with gap insertion."""

    def __init__(self, n: int):
        self.starts: list[list[float]] = [[] for _ in range(n)]
        self.ends: list[list[float]] = [[] for _ in range(n)]

    def earliest(self, res: int, ready: float, secs: float,
                 extra: list[tuple[int, float, float]]) -> float:
        """Earliest start >= ready of a ``secs`` slot on ``res`` (``extra``: tentative)."""
        starts, ends = self.starts[res], self.ends[res]
        pos = bisect.bisect_right(ends, ready)  # intervals ending by `ready` cannot block
        mine = [(s, e) for r, s, e in extra if r == res and e > ready]
        busy = sorted([*zip(starts[pos:], ends[pos:]), *mine]) if mine else None
        at, n = ready, len(starts)
        for idx in range(pos, n) if busy is None else range(len(busy)):
            s, e = (starts[idx], ends[idx]) if busy is None else busy[idx]
            if at + secs <= s:
                break
            at = max(at, e)
        return at

    def reserve(self, res: int, start: float, end: float) -> None:
        """Mark ``[start, end)`` busy on ``res`` (the caller found it free)."""
        if end <= start:
            return
        pos = bisect.bisect_left(self.starts[res], start)
        self.starts[res].insert(pos, start)
        self.ends[res].insert(pos, end)


class _Planner:
    """HEFT's list-scheduling phase over one space."""

    def __init__(self, t: SearchSpace):
        self.t = t
        self.in_edges, self.out_edges = t.in_edges, t.out_edges
        self.lines = _Timelines(t.n_resources)
        self.choice = [-1] * t.n_ops
        self.used: set[int] = set()
        classes = t.unit_class
        self.members = [np.flatnonzero(classes == c) for c in range(int(classes.max()) + 1)]
        self.finish = [0.0] * t.n_ops
        self.modes: dict[int, int] = {}
        self.resident = np.zeros(len(t.scopes))  # bytes held: weights, inputs, live outputs
        self.resident[t.default_scope] += t.io_bytes.sum()  # graph inputs and outputs

    def copy_plan(self, k: int, a: int, b: int, ready: float, extra: list) -> tuple:
        """(arrival, mode, hop reservations) of the fastest mode for edge ``k``, a -> b."""
        best = (np.inf, ASYNC, [])
        routes = self.t.routes
        for mode in (ASYNC, SYNC):
            rid = routes.id(a, b, mode)
            if not rid:
                continue
            at, hops = ready, []
            for h, secs in enumerate(self.t.hop_seconds(k, rid).tolist()):
                res = int(routes.hop_res[rid, h])
                start = self.lines.earliest(res, at, secs, extra + hops)
                at = start + secs
                hops.append((res, start, at))
            if at < best[0]:
                best = (at, mode, hops)
        return best

    def try_choice(self, v: int, j: int) -> tuple[float, list, dict, float]:
        """(finish, reservations, copy modes, staged bytes) of op ``v`` on choice ``j``."""
        t, scope = self.t, self.t.c_scope[v, j]
        ready, extra, modes, staged = 0.0, [], {}, 0.0
        for k in self.in_edges[v]:
            p = t.src[k]
            a = t.c_scope[p, self.choice[p]]
            if a == scope:
                ready = max(ready, self.finish[p])
                continue
            arrive, mode, hops = self.copy_plan(k, a, scope, self.finish[p], extra)
            ready, modes[k], staged = max(ready, arrive), mode, staged + t.nbytes[k]
            extra += hops
        unit, secs = int(t.c_unit[v, j]), float(t.c_dur[v, j])
        start = self.lines.earliest(unit, ready, secs, extra) if np.isfinite(ready) else ready
        return start + secs, extra + [(unit, start, start + secs)], modes, staged

    def fits(self, v: int, j: int, staged: float) -> bool:
        """Whether choice ``j``'s scope holds what is resident plus op ``v``'s buffers."""
        t, s = self.t, self.t.c_scope[v, j]
        need = self.resident[s] + t.activation_bytes(v, s) + staged
        if t.c_wscope[v, j] == s:
            need += t.weight_bytes[v]
        return need <= t.capacity[s] and (
            t.c_wscope[v, j] == s
            or self.resident[t.c_wscope[v, j]] + t.weight_bytes[v] <= t.capacity[t.c_wscope[v, j]])

    def candidates(self, v: int) -> np.ndarray:
        """Op ``v``'s choices on units in use or among each class's first idle units."""
        idle = [u for units in self.members
                for u in [x for x in units[:len(self.used) + IDLE_PER_CLASS]
                          if x not in self.used][:IDLE_PER_CLASS]]
        units = self.t.c_unit[v, :self.t.n_choices[v]]
        return np.flatnonzero(np.isin(units, [*self.used, *idle]))

    def place(self, v: int) -> None:
        """Give op ``v`` the admissible choice that finishes earliest, and book it."""
        options = [(j, *self.try_choice(v, j)) for j in self.candidates(v).tolist()]
        admissible = [o for o in options if self.fits(v, o[0], o[4])] or options
        j, end, reservations, modes, _ = min(admissible, key=lambda o: (o[1], o[0]))
        for res, start, stop in reservations:
            self.lines.reserve(res, start, stop)
        self.choice[v], self.finish[v] = j, end
        self.used.add(int(self.t.c_unit[v, j]))
        self.modes.update(modes)
        self.resident[self.t.c_scope[v, j]] += self.t.activation_bytes(v, self.t.c_scope[v, j])
        self.resident[self.t.c_wscope[v, j]] += self.t.weight_bytes[v]  # for the whole run
        for k in self.in_edges[v]:  # a producer's output is freed once all consumers are planned
            p = self.t.src[k]
            if all(self.choice[self.t.dst[q]] >= 0 for q in self.out_edges[p]):
                self.resident[self.t.c_scope[p, self.choice[p]]] -= self.t.out_bytes[p]


def heft_genome(space: SearchSpace) -> tuple[np.ndarray, np.ndarray]:
    """The HEFT placement of ``space`` as a genome (see the module docstring)."""
    rank = upward_ranks(space)
    planner = _Planner(space)
    for v in sorted(range(space.n_ops), key=lambda i: (-rank[i], i)):
        planner.place(v)
    mode = np.zeros(space.n_edges, dtype=np.int64)
    for k, m in planner.modes.items():
        mode[k] = m
    return np.array(planner.choice, dtype=np.int64), mode


def heft(space: SearchSpace) -> Placement:
    """The HEFT placement of ``space`` by name."""
    return space.decode(*heft_genome(space))
