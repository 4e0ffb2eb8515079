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
- **memory**: a scope is admissible for an op only if the bytes resident there (outputs of
  planned ops with an unplanned consumer, graph outputs, plus this op's output and staged
  inputs) fit its capacity; if no choice is admissible, every choice is.

HEFT's own plan inserts ops into idle gaps, while the simulator (like a stream) runs each
resource's work in program order; the plan's makespan is thus only an estimate, and the
placement is measured like any other candidate.
"""

from __future__ import annotations

import bisect

import numpy as np

from autoplace.estimate import ASYNC, SYNC, SpaceTables
from autoplace.profile import COPY_MODES
from autoplace.space import Placement, SearchSpace


def upward_ranks(t: SpaceTables) -> np.ndarray:
    """``rank(v) = w̄(v) + max over edges v->w of (c̄(v, w) + rank(w))``."""
    mean_w = np.array([t.c_dur[i, :t.n_choices[i]].mean() for i in range(t.n_ops)])
    out_edges = t.space.graph.out_edges()
    rank = np.zeros(t.n_ops)
    for v in reversed(range(t.n_ops)):
        tail = [mean_copy(t, k) + rank[t.dst[k]] for k in out_edges[v]]
        rank[v] = mean_w[v] + max(tail, default=0.0)
    return rank


def mean_copy(t: SpaceTables, k: int) -> float:
    """Mean over the choice pairs of edge ``k``'s ends of the faster copy (0: same scope)."""
    a = t.c_scope[t.src[k], :t.n_choices[t.src[k]]]
    b = t.c_scope[t.dst[k], :t.n_choices[t.dst[k]]]
    rid = t.route_id[a[:, None], b[None, :]]  # [na, nb, modes]
    secs = np.where(rid > 0, t.r_lat[rid] + t.nbytes[k] * t.r_inv[rid], np.inf).min(axis=2)
    secs = np.where(a[:, None] == b[None, :], 0.0, secs)
    finite = secs[np.isfinite(secs)]
    return float(finite.mean()) if finite.size else 0.0


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

    def __init__(self, t: SpaceTables):
        self.t, self.g = t, t.space.graph
        self.in_edges, self.out_edges = self.g.in_edges(), self.g.out_edges()
        self.lines = _Timelines(t.n_resources)
        self.choice = [-1] * t.n_ops
        self.finish = [0.0] * t.n_ops
        self.modes: dict[int, int] = {}
        self.resident = np.zeros(len(t.scopes))

    def copy_plan(self, k: int, a: int, b: int, ready: float, extra: list) -> tuple:
        """(arrival, mode, hop reservations) of the fastest mode for edge ``k``, a -> b."""
        best = (np.inf, ASYNC, [])
        for mode in (ASYNC, SYNC):
            rid = self.t.route_id[a, b, mode]
            if not rid:
                continue
            at, hops = ready, []
            for h in range(self.t.r_hop_res.shape[1]):
                res = int(self.t.r_hop_res[rid, h])
                if res < 0:
                    break
                secs = self.t.r_hop_lat[rid, h] + self.t.nbytes[k] * self.t.r_hop_inv[rid, h]
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
        s = self.t.c_scope[v, j]
        need = self.resident[s] + self.t.out_bytes[v] + staged
        return need <= self.t.capacity[s]

    def place(self, v: int) -> None:
        """Give op ``v`` the admissible choice that finishes earliest, and book it."""
        options = [(j, *self.try_choice(v, j)) for j in range(self.t.n_choices[v])]
        admissible = [o for o in options if self.fits(v, o[0], o[4])] or options
        j, end, reservations, modes, _ = min(admissible, key=lambda o: (o[1], o[0]))
        for res, start, stop in reservations:
            self.lines.reserve(res, start, stop)
        self.choice[v], self.finish[v] = j, end
        self.modes.update(modes)
        self.resident[self.t.c_scope[v, j]] += self.t.out_bytes[v]
        for k in self.in_edges[v]:  # a producer's output is freed once all consumers are planned
            p = self.t.src[k]
            if all(self.choice[self.t.dst[q]] >= 0 for q in self.out_edges[p]):
                self.resident[self.t.c_scope[p, self.choice[p]]] -= self.t.out_bytes[p]


def heft(space: SearchSpace, t: SpaceTables | None = None) -> Placement:
    """The HEFT placement of ``space`` (see the module docstring for the adaptation)."""
    t = t or SpaceTables(space)
    rank = upward_ranks(t)
    planner = _Planner(t)
    for v in sorted(range(t.n_ops), key=lambda i: (-rank[i], i)):
        planner.place(v)
    ops = {op.name: space.op_choices[i][planner.choice[i]] for i, op in enumerate(space.graph.ops)}
    copies = {space.edge_names[k]: COPY_MODES[m] for k, m in sorted(planner.modes.items())}
    return Placement(ops=ops, copies=copies)
