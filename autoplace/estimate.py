"""Pure estimates of a search space: op times, copy routes as tables, a critical-path bound.

Shared by the simulator, the cost model's features, HEFT and the bounds; no scheduling here.
Every number is the one :mod:`autoplace.measure.simulator` uses (docs/simulator.md), laid out
as numpy tables indexed by (op, choice) and (scope, scope, mode) so that a batch of
placements can be evaluated without a Python loop over candidates.
"""

from __future__ import annotations

import numpy as np

from autoplace.graph import Op
from autoplace.profile import COPY_MODES
from autoplace.space import SearchSpace

SYNC, ASYNC = COPY_MODES.index("sync"), COPY_MODES.index("async")


def op_seconds(op: Op, unit, scope, default_scope) -> float:
    """Roofline time of ``op`` on ``unit`` writing ``scope``, plus the launch overhead.

    ``overhead + max(flops / throughput, internal_bytes / bw(scope) + external / bw(default))``
    where internal bytes are the op's reads from other ops plus its output. A kernel the
    unit's calibrated table knows (``unit.kernel_s[op.kernel_key]``) takes its measured
    time instead of the roofline, whatever the scope.
    """
    if unit.kernel_s:
        known = unit.kernel_s.get(op.kernel_key)
        if known is not None:
            return unit.launch_overhead_s + known
    compute = op.flops / unit.flops_per_s(op.kind)
    internal = op.bytes_read - op.external_bytes + op.output_bytes
    memory = internal / scope.bandwidth_bps + op.external_bytes / default_scope.bandwidth_bps
    return unit.launch_overhead_s + max(compute, memory)


class SpaceTables:
    """Index tables of one search space.

    - ``c_unit``, ``c_scope``, ``c_dur`` ``[ops, width]``: unit index, scope index and op
      time of each (op, choice); padding columns repeat choice 0 and ``n_choices`` says how
      many are real.
    - ``route_id[a, b, mode]``: the route of a copy from scope ``a`` to ``b`` (0: none);
      ``r_lat[r]`` and ``r_inv[r]`` its summed hop latencies and seconds per byte;
      ``r_hop_res[r, h]`` / ``r_hop_lat`` / ``r_hop_inv`` per hop (resource index -1 past
      the last hop). Resources are the units, then the DMA engines (``engines``).
    """

    def __init__(self, space: SearchSpace):
        g, prof = space.graph, space.profile
        self.space, self.n_ops, self.n_edges = space, len(g.ops), len(g.edges)
        self.units = [u.name for u in prof.units]
        self.scopes = [s.name for s in prof.scopes]
        self.engines = sorted({c.engine for c in prof.copies})
        self.host = self.units.index(prof.host)
        self.default_scope = self.scopes.index(prof.default_scope)
        self.capacity = np.array([s.capacity_bytes for s in prof.scopes], dtype=np.float64)
        self._choices(space)
        self._routes(space)
        self.src = np.array([e.src for e in g.edges], dtype=np.int64)
        self.dst = np.array([e.dst for e in g.edges], dtype=np.int64)
        self.nbytes = np.array([e.nbytes for e in g.edges], dtype=np.float64)
        self.out_bytes = np.array([op.output_bytes for op in g.ops], dtype=np.float64)

    def _choices(self, space: SearchSpace) -> None:
        prof = space.profile
        default = prof.scope(prof.default_scope)
        self.n_choices = np.array([len(c) for c in space.op_choices], dtype=np.int64)
        width = int(self.n_choices.max(initial=1))
        shape = (self.n_ops, width)
        self.c_unit = np.zeros(shape, dtype=np.int64)
        self.c_scope = np.zeros(shape, dtype=np.int64)
        self.c_dur = np.zeros(shape)
        for i, (op, choices) in enumerate(zip(space.graph.ops, space.op_choices)):
            for j in range(width):
                u, s = choices[j if j < len(choices) else 0]
                self.c_unit[i, j], self.c_scope[i, j] = self.units.index(u), self.scopes.index(s)
                self.c_dur[i, j] = op_seconds(op, prof.unit(u), prof.scope(s), default)

    def _routes(self, space: SearchSpace) -> None:
        routes = [(a, b, m, r) for m in COPY_MODES for (a, b), r in space.routes[m].items()]
        hops = max((len(r) for *_, r in routes), default=1)
        n, S = len(routes) + 1, len(self.scopes)
        self.route_id = np.zeros((S, S, len(COPY_MODES)), dtype=np.int64)
        self.r_lat, self.r_inv = np.zeros(n), np.zeros(n)
        self.r_hop_res = np.full((n, hops), -1, dtype=np.int64)
        self.r_hop_lat, self.r_hop_inv = np.zeros((n, hops)), np.zeros((n, hops))
        for rid, (a, b, m, route) in enumerate(routes, start=1):
            mi = COPY_MODES.index(m)
            self.route_id[self.scopes.index(a), self.scopes.index(b), mi] = rid
            for h, p in enumerate(route):
                res = (self.host if m == "sync"
                       else len(self.units) + self.engines.index(p.engine))
                self.r_hop_res[rid, h] = res
                self.r_hop_lat[rid, h], self.r_hop_inv[rid, h] = p.latency_s, 1 / p.bandwidth_bps
            self.r_lat[rid] = self.r_hop_lat[rid].sum()
            self.r_inv[rid] = self.r_hop_inv[rid].sum()

    @property
    def n_resources(self) -> int:
        """Units and DMA engines: the resources a schedule occupies."""
        return len(self.units) + len(self.engines)

    def fastest(self) -> np.ndarray:
        """Each op's shortest time over its choices."""
        real = np.arange(self.c_dur.shape[1]) < self.n_choices[:, None]
        return np.where(real, self.c_dur, np.inf).min(axis=1)

    def copy_seconds(self, a: int, b: int, mode: int, nbytes: float) -> float:
        """Unloaded time of a copy from scope ``a`` to ``b`` (``inf`` without a route)."""
        rid = self.route_id[a, b, mode]
        return float(self.r_lat[rid] + nbytes * self.r_inv[rid]) if rid else float("inf")


def critical_path_bound(t: SpaceTables) -> float:
    """Longest path through the graph with each op at its fastest and copies free.

    No placement can beat it: every op on a path starts after its predecessors end and
    takes at least its fastest time.
    """
    fastest, finish = t.fastest(), np.zeros(t.n_ops)
    preds = t.space.graph.in_edges()
    for i in range(t.n_ops):
        ready = max((finish[t.src[k]] for k in preds[i]), default=0.0)
        finish[i] = ready + fastest[i]
    return float(finish.max(initial=0.0))
