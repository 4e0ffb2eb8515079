"""The simulator's model, vectorised over a batch of placements with numpy.

Same semantics as the event-by-event reference in :mod:`autoplace.measure.simulator` (a test
checks they agree on random placements); it walks the ops once for the whole batch, so one
placement costs a few microseconds instead of a Python loop over every op and edge.
"""

from __future__ import annotations

import numpy as np

from autoplace.profile import COPY_MODES
from autoplace.space import SearchSpace

SYNC = COPY_MODES.index("sync")


class BatchModel:
    """Index tables of one graph on one profile, and the batched schedule over them."""

    def __init__(self, space: SearchSpace, durations: list[dict]):
        g, prof = space.graph, space.profile
        self.n, self.units = len(g.ops), [u.name for u in prof.units]
        self.scopes = [s.name for s in prof.scopes]
        self.capacity = np.array([s.capacity_bytes for s in prof.scopes], dtype=np.float64)
        self.power = np.array([u.power_w for u in prof.units])
        engines = sorted({c.engine for c in prof.copies})
        self.resources = self.units + engines
        self.host = self.units.index(prof.host)
        self._choice_tables(space, durations)
        self._route_tables(space, engines)
        self.src = np.array([e.src for e in g.edges], dtype=np.int64)
        self.dst = np.array([e.dst for e in g.edges], dtype=np.int64)
        self.nbytes = np.array([e.nbytes for e in g.edges], dtype=np.float64)
        self.out_bytes = np.array([op.output_bytes for op in g.ops], dtype=np.float64)
        self.in_edges = g.in_edges()
        self.has_consumers = np.array([bool(x) for x in g.out_edges()])

    def _choice_tables(self, space: SearchSpace, durations: list[dict]) -> None:
        width = max(len(c) for c in space.op_choices)
        self.c_unit = np.zeros((self.n, width), dtype=np.int64)
        self.c_scope = np.zeros((self.n, width), dtype=np.int64)
        self.c_dur = np.zeros((self.n, width))
        for i, choices in enumerate(space.op_choices):
            for j, (u, s) in enumerate(choices):
                self.c_unit[i, j] = self.units.index(u)
                self.c_scope[i, j] = self.scopes.index(s)
                self.c_dur[i, j] = durations[i][(u, s)]

    def _route_tables(self, space: SearchSpace, engines: list[str]) -> None:
        routes = [(a, b, m, r) for m in COPY_MODES for (a, b), r in space.routes[m].items()]
        self.hops = max((len(r) for *_, r in routes), default=1)
        nr, S = len(routes) + 1, len(self.scopes)  # route 0: "none"
        self.route_id = np.zeros((S, S, len(COPY_MODES)), dtype=np.int64)
        self.r_len = np.zeros(nr, dtype=np.int64)
        self.r_res = np.zeros((nr, self.hops), dtype=np.int64)
        self.r_lat = np.zeros((nr, self.hops))
        self.r_inv = np.zeros((nr, self.hops))
        self.r_dst = np.zeros((nr, self.hops), dtype=np.int64)
        for rid, (a, b, m, route) in enumerate(routes, start=1):
            mi = COPY_MODES.index(m)
            self.route_id[self.scopes.index(a), self.scopes.index(b), mi] = rid
            self.r_len[rid] = len(route)
            for h, p in enumerate(route):
                res = self.host if m == "sync" else len(self.units) + engines.index(p.engine)
                self.r_res[rid, h], self.r_lat[rid, h] = res, p.latency_s
                self.r_inv[rid, h] = 1.0 / p.bandwidth_bps
                self.r_dst[rid, h] = self.scopes.index(p.dst)

    def run(self, choice: np.ndarray, mode: np.ndarray) -> dict[str, np.ndarray]:
        """Simulate ``B`` placements: ``choice[B, ops]`` indices, ``mode[B, edges]`` (0 sync)."""
        st = BatchRun(self, choice, mode)
        for i in range(self.n):
            st.op(i)
        return st.finish_up()


class BatchRun:
    """Per-batch arrays of one run; ``op(i)`` schedules op ``i`` (in order) for every row."""

    def __init__(self, m: BatchModel, choice: np.ndarray, mode: np.ndarray):
        B, ops = choice.shape
        self.m, self.mode, self.rows = m, mode, np.arange(B)
        cols = np.arange(ops)
        self.unit = m.c_unit[cols, choice]
        self.scope = m.c_scope[cols, choice]
        self.dur = m.c_dur[cols, choice]
        self.free = np.zeros((B, len(m.resources)))
        self.busy = np.zeros((B, len(m.units)))
        self.finish = np.zeros((B, ops))
        self.last_use = np.zeros((B, ops))
        self.copy_bytes = np.zeros((B, len(COPY_MODES)))
        self.no_route = np.zeros(B, dtype=bool)
        self.bufs: list[tuple] = []  # (scope[B], bytes[B], alloc[B], free[B] array to fill)
        self.out_alloc = np.zeros((B, ops))

    def occupy(self, res: np.ndarray, ready: np.ndarray, secs: np.ndarray, active):
        start = np.maximum(ready, self.free[self.rows, res])
        end = start + secs
        self.free[self.rows, res] = np.where(active, end, self.free[self.rows, res])
        return start, end

    def copy(self, k: int, i: int, cross: np.ndarray) -> np.ndarray:
        m, p, r = self.m, self.m.src[k], self.rows
        rid = m.route_id[self.scope[:, p], self.scope[:, i], self.mode[:, k]]
        self.no_route |= cross & (rid == 0)
        t = self.finish[:, p].copy()
        is_sync = self.mode[:, k] == SYNC
        self.copy_bytes[r, self.mode[:, k]] += np.where(cross, m.nbytes[k], 0.0)
        prev_free = None
        for h in range(m.hops):
            active = cross & (h < m.r_len[rid])
            if not active.any():
                break
            secs = m.r_lat[rid, h] + m.nbytes[k] * m.r_inv[rid, h]
            start, end = self.occupy(m.r_res[rid, h], t, secs, active)
            self.busy[r, m.host] += np.where(active & is_sync, secs, 0.0)
            if h == 0:
                self.last_use[:, p] = np.where(active, np.maximum(self.last_use[:, p], end),
                                               self.last_use[:, p])
            else:
                prev_free[active] = end[active]
            prev_free = np.full(len(r), np.nan)
            self.bufs.append((m.r_dst[rid, h], np.where(active, m.nbytes[k], 0.0), start,
                              prev_free))
            t = np.where(active, end, t)
        return t

    def op(self, i: int) -> None:
        m, r = self.m, self.rows
        ready = np.zeros(len(r))
        same = []
        n_before = len(self.bufs)
        for k in m.in_edges[i]:
            p = m.src[k]
            cross = self.scope[:, p] != self.scope[:, i]
            arrive = self.copy(k, i, cross) if cross.any() else self.finish[:, p]
            ready = np.maximum(ready, arrive)
            same.append((p, ~cross))
        start, end = self.occupy(self.unit[:, i], ready, self.dur[:, i], True)
        self.busy[r, self.unit[:, i]] += self.dur[:, i]
        self.finish[:, i], self.out_alloc[:, i] = end, start
        for p, mask in same:
            self.last_use[:, p] = np.where(mask, np.maximum(self.last_use[:, p], end),
                                           self.last_use[:, p])
        for *_, free in self.bufs[n_before:]:
            np.copyto(free, end, where=np.isnan(free))  # final hops live until the op ends

    def finish_up(self) -> dict[str, np.ndarray]:
        m = self.m
        makespan = self.finish.max(axis=1) if m.n else np.zeros(len(self.rows))
        out_free = np.where(m.has_consumers, np.maximum(self.last_use, self.finish),
                            makespan[:, None])
        scope = np.concatenate([self.scope] + [b[0][:, None] for b in self.bufs], axis=1)
        nbytes = np.concatenate([np.broadcast_to(m.out_bytes, self.scope.shape)]
                                + [b[1][:, None] for b in self.bufs], axis=1)
        alloc = np.concatenate([self.out_alloc] + [b[2][:, None] for b in self.bufs], axis=1)
        free = np.concatenate([out_free] + [b[3][:, None] for b in self.bufs], axis=1)
        return {
            "latency": makespan, "busy": self.busy, "copy_bytes": self.copy_bytes,
            "peak": _peaks(scope, nbytes, alloc, free, len(m.scopes)),
            "energy": self.busy @ m.power, "no_route": self.no_route,
        }


def _peaks(scope, nbytes, alloc, free, n_scopes: int) -> np.ndarray:
    """Peak live bytes per (row, scope); frees sort before allocations at equal times.

    One stable sort per row by scope, then time, with the free events placed first so they
    win ties: every scope's allocations and frees cancel, so a single running sum restarts
    from zero at each scope's first event.
    """
    times = np.concatenate([free, alloc], axis=1)
    span = times.max(initial=0.0) * 2.0 + 1.0
    where = np.concatenate([scope, scope], axis=1)
    order = np.argsort(where * span + times, axis=1, kind="stable")
    live = np.cumsum(np.take_along_axis(np.concatenate([-nbytes, nbytes], axis=1), order,
                                        axis=1), axis=1)
    where = np.take_along_axis(where, order, axis=1)
    peaks = np.zeros((len(times), n_scopes))
    for s in range(n_scopes):
        peaks[:, s] = np.where(where == s, live, 0.0).max(axis=1, initial=0.0)
    return peaks
