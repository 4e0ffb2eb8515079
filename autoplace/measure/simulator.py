"""A deterministic event-driven model of a hardware profile (see docs/simulator.md).

Every resource (a unit, or a DMA engine) executes its work in program order: the ops in the
graph's topological order, each op's incoming copies just before it. A piece of work starts
when its resource is free and its inputs are ready, so independent ops on different units
and async copies on DMA engines overlap, while sync copies hold the host unit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from autoplace.estimate import op_seconds
from autoplace.graph import OpGraph
from autoplace.measure.base import ErrorKind, Event, Measurer, MeasureResult
from autoplace.measure.batch import BatchModel
from autoplace.profile import COPY_MODES, Profile
from autoplace.space import Placement, SearchSpace

MIB = 1 << 20
_MODE_INDEX = {m: i for i, m in enumerate(COPY_MODES)}
_MODE_SET = frozenset(COPY_MODES)
__all__ = ["Simulator", "op_seconds"]  # op_seconds lives in autoplace.estimate


class _Run:
    """State of one simulated execution (resources' free times, buffers, timeline)."""

    def __init__(self, sim: Simulator, placement: Placement, record: bool):
        self.sim, self.p, self.record = sim, placement, record
        self.free: dict[str, float] = {}
        self.busy: dict[str, float] = {u.name: 0.0 for u in sim.profile.units}
        self.copy_bytes = {"sync": 0, "async": 0}
        self.buffers: list[list] = []  # [scope, nbytes, alloc_t, free_t]
        self.events: list[Event] = []

    def occupy(self, resource: str, ready: float, secs: float) -> tuple[float, float]:
        start = max(ready, self.free.get(resource, 0.0))
        end = start + secs
        self.free[resource] = end
        if resource in self.busy:
            self.busy[resource] += secs
        return start, end

    def copy(self, k: int, src: str, dst: str, ready: float) -> tuple[float, list, float]:
        """Schedule the copy of edge ``k``: its arrival time, final buffer, first hop's end."""
        sim, name = self.sim, self.sim.space.edge_names[k]
        mode, nbytes = self.p.copies[name], sim.graph.edges[k].nbytes
        self.copy_bytes[mode] += nbytes
        prev, t, first_end = None, ready, None
        for hop in sim.space.route(src, dst, mode):
            res = sim.profile.host if mode == "sync" else hop.engine
            start, t = self.occupy(res, t, hop.seconds(nbytes))
            first_end = t if first_end is None else first_end
            if prev is not None:
                prev[3] = t  # an intermediate buffer lives until the next hop is done
            prev = [hop.dst, nbytes, start, None]
            self.buffers.append(prev)
            if self.record:
                self.events.append(Event(kind="copy", name=name, resource=res, start=start,
                                         end=t, mode=mode, src=hop.src, dst=hop.dst))
        return t, prev, first_end


class Simulator(Measurer):
    """The default measurer: fast, deterministic, needs no TVM.

    ``timeline=True`` also returns each result's timeline (slower).
    """

    name = "simulator"

    def __init__(self, graph: OpGraph, profile: Profile, *, timeline: bool = False,
                 space: SearchSpace | None = None):
        self.graph, self.profile, self.timeline = graph, profile, timeline
        self.space = space or SearchSpace(graph, profile)
        self._in_edges = graph.in_edges()
        self._out_count = [len(x) for x in graph.out_edges()]
        default = profile.scope(profile.default_scope)
        self._dur = [
            {(u, s): op_seconds(op, profile.unit(u), profile.scope(s), default)
             for u, s in choices}
            for op, choices in zip(graph.ops, self.space.op_choices)
        ]

        self._index = [{c: j for j, c in enumerate(cs)} for cs in self.space.op_choices]
        self._op_names = [op.name for op in graph.ops]
        self._edge_pos = {name: k for k, name in enumerate(self.space.edge_names)}
        self._edge_set = self._edge_pos.keys()
        self._batch = BatchModel(self.space, self._dur)

    def measure(self, placements: Sequence[Placement]) -> list[MeasureResult]:
        if self.timeline:
            return [self.simulate(p) for p in placements]
        encoded = [self._encode(p) for p in placements]
        rows = [n for n, enc in enumerate(encoded) if enc is not None]
        results = [None if enc else self.simulate(p) for p, enc in zip(placements, encoded)]
        if rows:
            choice = np.array([encoded[n][0] for n in rows], dtype=np.int64)
            mode = np.array([encoded[n][1] for n in rows], dtype=np.int64)
            mode = mode.reshape(len(rows), len(self.graph.edges))
            consistent = self._copies_match(choice, mode)
            out = self._batch.run(choice, np.maximum(mode, 0))
            out = {k: v.tolist() for k, v in out.items()}  # python floats, once per batch
            for b, n in enumerate(rows):
                fine = consistent[b] and not out["no_route"][b]
                # the reference path names the op, edge or scopes that are wrong
                results[n] = self._from_batch(out, b) if fine else self.simulate(placements[n])
        return results

    def fits(self, choice: np.ndarray, mode: np.ndarray) -> np.ndarray:
        """Per row (choice index per op, copy mode per edge; 0 sync), whether the placement
        fits every scope's capacity and has a route for every copy: what no measurer
        would fail before building it."""
        if not len(choice):
            return np.zeros(0, dtype=bool)
        out = self._batch.run(choice, np.maximum(mode, 0))
        over = np.floor(out["peak"]) > self._batch.capacity  # as the capacity check counts
        return ~over.any(axis=1) & ~out["no_route"]

    def _encode(self, p: Placement) -> tuple[list[int], list[int]] | None:
        """Choice index per op and mode index per edge (-1: no copy); None if malformed."""
        ops, copies = p.ops, p.copies
        if (len(ops) != len(self._op_names) or not copies.keys() <= self._edge_set
                or not set(copies.values()) <= _MODE_SET):
            return None
        try:
            choice = [idx[ops[name]] for idx, name in zip(self._index, self._op_names)]
        except KeyError:
            return None
        mode = [-1] * len(self._edge_pos)
        for name, m in copies.items():
            mode[self._edge_pos[name]] = _MODE_INDEX[m]
        return choice, mode

    def _copies_match(self, choice: np.ndarray, mode: np.ndarray) -> np.ndarray:
        """Rows whose copies are exactly the edges that cross scopes."""
        scope = self._batch.c_scope[np.arange(choice.shape[1]), choice]
        cross = scope[:, self._batch.src] != scope[:, self._batch.dst]
        return (cross == (mode >= 0)).all(axis=1)

    def _from_batch(self, out: dict, b: int) -> MeasureResult:
        m = self._batch
        peaks = {s: int(v) for s, v in zip(m.scopes, out["peak"][b]) if v > 0}
        result = MeasureResult(
            latency_s=out["latency"][b], unit_busy_s=dict(zip(m.units, out["busy"][b])),
            copy_bytes={c: int(v) for c, v in zip(COPY_MODES, out["copy_bytes"][b])},
            peak_bytes=peaks, energy_j=out["energy"][b],
        )
        return self._capacity_check(result, peaks)

    def _capacity_check(self, result: MeasureResult, peaks: dict[str, int]) -> MeasureResult:
        for s in self.profile.scopes:
            over = peaks.get(s.name, 0) - s.capacity_bytes
            if over > 0:
                detail = (f"scope {s.name!r} peak {peaks[s.name] / MIB:.2f} MiB exceeds capacity "
                          f"{s.capacity_bytes / MIB:.2f} MiB by {over} bytes")
                return dataclasses.replace(result, error=ErrorKind.OUT_OF_MEMORY, detail=detail)
        return result

    def simulate(self, placement: Placement, *, timeline: bool | None = None) -> MeasureResult:
        """Simulate one placement."""
        problem = self.space.check(placement)
        if problem:
            kind = ErrorKind.NO_COPY_PATH if "no copy path" in problem else ErrorKind.INVALID
            return MeasureResult.failure(kind, problem)
        run = _Run(self, placement, self.timeline if timeline is None else timeline)
        latency = self._schedule(run)
        return self._result(run, latency)

    def _schedule(self, run: _Run) -> float:
        g, p = self.graph, run.p
        finish: list[float] = []
        outputs: list[list] = []
        last_use = [0.0] * len(g.ops)
        for i, op in enumerate(g.ops):
            unit, scope = p.ops[op.name]
            ready, staged = 0.0, []
            for k in self._in_edges[i]:
                src = g.edges[k].src
                src_scope = p.ops[g.ops[src].name][1]
                if src_scope == scope:
                    arrive = finish[src]
                else:
                    arrive, buf, read_done = run.copy(k, src_scope, scope, finish[src])
                    staged.append(buf)
                    last_use[src] = max(last_use[src], read_done)
                ready = max(ready, arrive)
            start, end = run.occupy(unit, ready, self._dur[i][(unit, scope)])
            finish.append(end)
            outputs.append([scope, op.output_bytes, start, None])
            for k in self._in_edges[i]:
                if p.ops[g.ops[g.edges[k].src].name][1] == scope:
                    last_use[g.edges[k].src] = max(last_use[g.edges[k].src], end)
            for buf in staged:
                buf[3] = end
            if run.record:
                run.events.append(Event(kind="op", name=op.name, resource=unit, start=start,
                                        end=end, src=scope, dst=scope))
        makespan = max(finish, default=0.0)
        for i, buf in enumerate(outputs):
            buf[3] = max(last_use[i], finish[i]) if self._out_count[i] else makespan
        run.buffers.extend(outputs)
        return makespan

    def _result(self, run: _Run, latency: float) -> MeasureResult:
        peaks = _peaks(run.buffers)
        energy = sum(run.busy[u.name] * u.power_w for u in self.profile.units)
        result = MeasureResult(
            latency_s=latency, unit_busy_s=run.busy, copy_bytes=run.copy_bytes,
            peak_bytes=peaks, energy_j=energy,
            timeline=tuple(sorted(run.events, key=lambda e: (e.start, e.end, e.resource))),
        )
        return self._capacity_check(result, peaks)


def _peaks(buffers: list[list]) -> dict[str, int]:
    """Peak live bytes per scope; a buffer freed at t is reusable by one allocated at t."""
    events: dict[str, list[tuple[float, int]]] = {}
    for scope, nbytes, alloc, free in buffers:
        ev = events.setdefault(scope, [])
        ev.append((alloc, nbytes))
        ev.append((free, -nbytes))
    peaks = {}
    for scope, ev in events.items():
        ev.sort(key=lambda x: (x[0], x[1]))  # frees (negative) first at equal times
        live = peak = 0
        for _, d in ev:
            live += d
            peak = max(peak, live)
        if peak > 0:
            peaks[scope] = peak
    return peaks
