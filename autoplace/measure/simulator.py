"""A deterministic event-driven model of a hardware profile (see docs/simulator.md).

Every resource (a unit, or a DMA engine) executes its work in program order: the ops in the
graph's topological order, each op's incoming copies just before it. A piece of work starts
when its resource is free and its inputs are ready, so independent ops on different units
and async copies on DMA engines overlap, while sync copies hold the host unit.

:class:`Simulator` measures batches with the compiled model of :mod:`autoplace.measure.batch`
and keeps, in :meth:`Simulator.simulate`, the event-by-event reference written from the rules
of docs/simulator.md: it names what is wrong with a placement and records timelines, and a
test checks that the two agree.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from autoplace.hardware.profile import COPY_MODES
from autoplace.measure.base import Event, Measurer, MeasureResult
from autoplace.measure.batch import BatchOutput, simulate_batch
from autoplace.measure.blocks import BlockReference
from autoplace.measure.energy import inference_energy
from autoplace.space import Placement, PlacementError, SearchSpace
from autoplace.space.problem import ErrorKind
from autoplace.space.schedule import Schedule, Timing, Work, schedule_of

MIB = 1 << 20


def hop_times(space: SearchSpace, k: int, route) -> list[float]:
    """Each hop's time for edge ``k`` over ``route``: modelled, or scaled to sum to the
    edge's measured transfer time (spread evenly over a route the model says takes none)."""
    nbytes = space.graph.edges[k].nbytes
    modelled = [hop.seconds(nbytes) for hop in route]
    measured = space.graph.edges[k].transfer_us
    if measured is None:
        return modelled
    total, measured = sum(modelled), measured * 1e-6
    if total <= 0:
        return [measured / len(modelled)] * len(modelled)
    return [s * (measured / total) for s in modelled]


class _Run:
    """State of one simulated execution (resources' free times, buffers, timeline)."""

    def __init__(self, space: SearchSpace, placement: Placement, record: bool):
        self.space, self.p, self.record = space, placement, record
        self.free: dict[str, float] = {}
        self.busy: dict[str, float] = {}  # per unit
        self.load: dict[str, float] = {}  # per resource that runs one thing at a time
        self.longest = 0.0  # the longest piece of work on a parallel unit
        self.units = set(space.units)
        self.parallel = {u.name for u in space.profile.units if u.execution == "parallel"}
        ptr, idx = space.slot_ptr, space.slot_idx
        #: per unit pinned to CPUs, the CPU slots its work also loads (for the period)
        self.slots = {name: [f"cpu slot {s}" for s in idx[ptr[u]:ptr[u + 1]]]
                      for u, name in enumerate(space.units) if ptr[u + 1] > ptr[u]}
        self.handover = {u.name: u.handover_s for u in space.profile.units if u.handover_s}
        self.copy_bytes = {"sync": 0, "async": 0}
        self.buffers: list[list] = []  # [scope, nbytes, alloc_t, free_t]
        self.events: list[Event] = []
        self.start: list[float] = []  # per piece of scheduled work
        self.schedule: Schedule | None = None

    def ready(self, item: int, end: list[float]) -> float:
        """When schedule work ``item`` starts: once its resource is free (a ``parallel``
        unit always is) and the work it reads (``after``) and follows has ended; if it was
        still waiting for work of another resource then, its resource's hand-over after
        that work's end."""
        work = self.schedule.work
        resource = work[item].resource
        own = 0.0 if resource in self.parallel else self.free.get(resource, 0.0)
        other = 0.0
        for a in (*work[item].after, *work[item].follows):
            if work[a].resource == resource:
                own = max(own, end[a])
            else:
                other = max(other, end[a])
        return own if other <= own else other + self.handover.get(resource, 0.0)

    def occupy(self, resource: str, ready: float, secs: float) -> tuple[float, float]:
        """Run ``secs`` of work on ``resource`` once ``ready`` and the resource is free (a
        ``parallel`` unit always is)."""
        start = ready if resource in self.parallel else max(ready, self.free.get(resource, 0.0))
        end = start + secs
        self.free[resource] = end
        self.tally(resource, secs)
        return start, end

    def tally(self, resource: str, secs: float) -> None:
        """Count ``secs`` of work on ``resource`` (for busy times and the period)."""
        if resource in self.units:
            self.busy[resource] = self.busy.get(resource, 0.0) + secs
        if resource in self.parallel:
            self.longest = max(self.longest, secs)
        else:
            self.load[resource] = self.load.get(resource, 0.0) + secs
        for slot in self.slots.get(resource, ()):
            self.load[slot] = self.load.get(slot, 0.0) + secs

    @property
    def period(self) -> float:
        """The steady-state time per inference of a stream of inputs: the busiest
        resource's work, a parallel unit's longest piece of work, or its work over its
        cores."""
        pooled = (self.busy.get(u.name, 0.0) / u.cores for u in self.space.profile.units
                  if u.cores and u.name in self.parallel)
        return max(self.longest, max(self.load.values(), default=0.0), max(pooled, default=0.0))

    def copy(self, k: int, hops: list[Work], end: list[float], items: list[int]
             ) -> tuple[list, float]:
        """Run the hops of edge ``k``'s copy (schedule work ``items``) on their resources:
        its final buffer and its first hop's end."""
        space, name = self.space, self.space.edge_names[k]
        mode, nbytes = hops[0].mode, space.graph.edges[k].nbytes
        self.copy_bytes[mode] += nbytes
        route = tuple(space.profile.copy_index[h.src, h.dst] for h in hops)
        prev, first_end = None, None
        for item, hop, secs in zip(items, hops, hop_times(space, k, route)):
            start, t = self.occupy(hop.resource, self.ready(item, end), secs)
            self.start[item], end[item] = start, t
            first_end = t if first_end is None else first_end
            if prev is not None:
                prev[3] = t  # an intermediate buffer lives until the next hop is done
            prev = [hop.dst, nbytes, start, None]
            self.buffers.append(prev)
            if self.record:
                self.events.append(Event(kind="copy", name=name, resource=hop.resource,
                                         start=start, end=t, mode=mode, src=hop.src,
                                         dst=hop.dst))
        return prev, first_end

class Simulator(Measurer):
    """The default measurer: fast, deterministic, needs no TVM.

    ``timeline=True`` also returns each result's timeline (from the reference path).
    """

    name = "simulator"
    free = True

    def __init__(self, space: SearchSpace, *, timeline: bool = False):
        self.space, self.timeline = space, timeline
        self.graph, self.profile = space.graph, space.profile
        self._blocks = BlockReference(space) if space.profile.blocks else None

    def measure(self, placements: Sequence[Placement]) -> list[MeasureResult]:
        if self.timeline:
            return [self.simulate(p) for p in placements]
        rows, genomes = [], []
        for n, p in enumerate(placements):
            try:
                genomes.append(self.space.encode([p]))
                rows.append(n)
            except PlacementError:
                pass
        results: list[MeasureResult | None] = [None] * len(placements)
        if rows:
            choice = np.concatenate([g[0] for g in genomes])
            mode = np.concatenate([g[1] for g in genomes])
            consistent = self._copies_match(choice, mode, [placements[n] for n in rows])
            out = simulate_batch(self.space, choice, mode)
            for b, n in enumerate(rows):
                if consistent[b] and not out.no_route[b] and not out.not_contiguous[b]:
                    results[n] = self.result(out, b)
        # the reference path names the op, edge or scopes that are wrong
        return [r if r is not None else self.simulate(p) for r, p in zip(results, placements)]

    def measure_encoded(self, choice: np.ndarray, mode: np.ndarray,
                        placements: Sequence[Placement]) -> list[MeasureResult]:
        """:meth:`measure` on rows the space encoded (so their copies are the crossing
        edges): the batch kernel on the rows as given; the reference path only for rows
        without a route, which it names."""
        if self.timeline or not len(placements):
            return self.measure(placements)
        out = simulate_batch(self.space, choice, mode)
        return [self.simulate(p) if out.no_route[b] or out.not_contiguous[b]
                else self.result(out, b)
                for b, p in enumerate(placements)]

    def _copies_match(self, choice: np.ndarray, mode: np.ndarray,
                      placements: list[Placement]) -> np.ndarray:
        """Rows whose copies are exactly the crossing edges, in a mode with a route."""
        cross, used, rid = self.space.copy_plan(choice, mode)
        n_copies = np.array([len(p.copies) for p in placements])
        return (used == mode).all(axis=1) & (cross.sum(axis=1) == n_copies) & \
            ((rid > 0) | ~cross).all(axis=1)

    def result(self, out: BatchOutput, b: int) -> MeasureResult:
        """The measurement of row ``b`` of a batch output."""
        space = self.space
        busy = out.busy[b]
        peaks = {space.scopes[s]: int(out.peak[b, s]) for s in np.flatnonzero(out.peak[b])}
        result = MeasureResult(
            latency_s=float(out.latency[b]),
            unit_busy_s={space.units[u]: float(busy[u]) for u in np.flatnonzero(busy)},
            copy_bytes={c: int(v) for c, v in zip(COPY_MODES, out.copy_bytes[b])},
            peak_bytes=peaks, energy_j=float(out.energy[b]),
        )
        weights = {space.scopes[s]: int(out.weights[b, s]) for s in np.flatnonzero(out.weights[b])}
        result = self._stream_check(result, float(out.period[b]), weights)
        return self._capacity_check(result, peaks, weights, int(out.io))

    def _stream_check(self, result: MeasureResult, period: float,
                      weights: dict[str, int]) -> MeasureResult:
        """The result with its period, if every scope holds its buffers twice over (a
        double-buffered stream: :func:`~autoplace.measure.batch.streaming_peak`)."""
        for name, peak in result.peak_bytes.items():
            if 2 * peak - weights.get(name, 0) > self.profile.scope(name).capacity_bytes:
                return result
        return dataclasses.replace(result, period_s=period)

    def _capacity_check(self, result: MeasureResult, peaks: dict[str, int],
                        weights: dict[str, int], io: int) -> MeasureResult:
        """The result, failed with ``OUT_OF_MEMORY`` naming the first scope (in profile
        order) whose peak is over its capacity, and what it holds: weights, graph inputs
        and outputs (default scope) and activations at their peak."""
        index = self.profile.scope_index
        for name in sorted(peaks, key=index.__getitem__):
            peak, scope = peaks[name], self.profile.scope(name)
            over = peak - scope.capacity_bytes
            if over > 0:
                held = weights.get(name, 0)
                ins = io if name == self.profile.default_scope else 0
                detail = (f"scope {name!r} peak {peak / MIB:.2f} MiB exceeds capacity "
                          f"{scope.capacity_bytes / MIB:.2f} MiB by {over} bytes (weights "
                          f"{held} B, graph inputs and outputs {ins} B, activations "
                          f"{peak - held - ins} B)")
                return dataclasses.replace(result, error=ErrorKind.OUT_OF_MEMORY, detail=detail)
        return result

    # -- the reference ---------------------------------------------------------------------
    def simulate(self, placement: Placement, *, timeline: bool | None = None) -> MeasureResult:
        """Simulate one placement event by event (the reference of docs/simulator.md)."""
        problem = self.space.check(placement) or (self._blocks and self._blocks.check(placement))
        if problem:
            return MeasureResult.refused(problem)
        run = _Run(self.space, placement, self.timeline if timeline is None else timeline)
        latency = self._blocks.schedule(run) if self._blocks else self._schedule(run)
        return self._result(run, latency)

    def timing(self, placement: Placement) -> Timing:
        """The placement's schedule with when each piece of its work starts and ends in the
        simulation (the reference path; a placement it refuses is a PlacementError)."""
        problem = self.space.check(placement)
        if problem:
            raise PlacementError(problem.detail)
        if self._blocks:
            raise PlacementError("a profile with block units has no per-op schedule")
        run = _Run(self.space, placement, False)
        self._schedule(run)
        return Timing(schedule=run.schedule, start=tuple(run.start), end=tuple(run.end))

    def _schedule(self, run: _Run) -> float:
        """Time the placement's schedule (:func:`autoplace.space.schedule.schedule_of`)."""
        g, p, space = self.graph, run.p, self.space
        sched = run.schedule = schedule_of(space, p)
        routes, end = sched.routes(), [0.0] * len(sched.work)
        run.start, run.end = [0.0] * len(sched.work), end
        outputs: list[list] = []
        last_use = [0.0] * len(g.ops)
        for i, op in enumerate(g.ops):
            item = sched.op_work[i]
            unit, scope = sched.work[item].resource, sched.work[item].dst
            staged = []
            for k, source in zip(space.in_edges[i], sched.reads[i]):
                if sched.work[source].kind != "op":
                    hops = routes[k]
                    buf, read_done = run.copy(k, [sched.work[h] for h in hops], end, hops)
                    staged.append(buf)
                    src = g.edges[k].src
                    last_use[src] = max(last_use[src], read_done)
            weights = p.weights.get(op.name, "streamed")
            start, end[item] = run.occupy(unit, run.ready(item, end),
                                          self.space.seconds_of(i, unit, scope, weights))
            run.start[item] = start
            result = scope == self.profile.default_scope and not space.out_edges[i]
            outputs.append([scope, 0 if result else op.output_bytes, start, None])
            for k, source in zip(space.in_edges[i], sched.reads[i]):
                if sched.work[source].kind == "op":
                    last_use[g.edges[k].src] = max(last_use[g.edges[k].src], end[item])
            for buf in staged:
                buf[3] = end[item]
            if run.record:
                run.events.append(Event(kind="op", name=op.name, resource=unit, start=start,
                                        end=end[item], src=scope, dst=scope))
        finish = [end[w] for w in sched.op_work]
        makespan = max(finish, default=0.0)
        for i, buf in enumerate(outputs):
            buf[3] = max(last_use[i], finish[i]) if space.out_edges[i] else makespan
        run.buffers.extend(outputs)
        return makespan

    def held(self, placement: Placement) -> dict[str, int]:
        """Bytes each scope holds for the whole run: weights, graph inputs and outputs."""
        return self._with_io(*self._held(placement))

    def _with_io(self, weights: dict[str, int], io: int) -> dict[str, int]:
        out = dict(weights)
        out[self.profile.default_scope] = out.get(self.profile.default_scope, 0) + io
        return {s: b for s, b in out.items() if b}

    def _held(self, placement: Placement) -> tuple[dict[str, int], int]:
        """Weight bytes per scope (resident: the op's scope; streamed: the default one)
        and the bytes of graph inputs and outputs (default scope): held for the whole run."""
        weights: dict[str, int] = {}
        for op in self.graph.ops:
            if op.weight_bytes:
                resident = placement.weights.get(op.name) == "resident"
                where = placement.ops[op.name][1] if resident else self.profile.default_scope
                weights[where] = weights.get(where, 0) + op.weight_bytes
        return weights, int(self.space.io_bytes.sum())

    def _energy(self, placement: Placement, busy: np.ndarray, latency: float) -> float:
        """Joules of the inference (:func:`autoplace.measure.energy.inference_energy`)."""
        choice, mode = self.space.encode([placement])
        cross, _, rid = self.space.copy_plan(choice, mode)
        return float(inference_energy(self.space, choice, cross, rid, busy[None, :],
                                      np.array([latency]))[0])

    def _result(self, run: _Run, latency: float) -> MeasureResult:
        peaks = _peaks(run.buffers)
        weights, io = self._held(run.p)
        held = self._with_io(weights, io)
        peaks = {s: peaks.get(s, 0) + held.get(s, 0) for s in {*peaks, *held}
                 if peaks.get(s, 0) + held.get(s, 0) > 0}
        busy = np.array([run.busy.get(u, 0.0) for u in self.space.units])
        result = MeasureResult(
            latency_s=latency, unit_busy_s={u: b for u, b in run.busy.items() if b > 0},
            copy_bytes=run.copy_bytes, peak_bytes=peaks,
            energy_j=self._energy(run.p, busy, latency),
            timeline=tuple(sorted(run.events, key=lambda e: (e.start, e.end, e.resource))),
        )
        result = self._stream_check(result, run.period, weights)
        return self._capacity_check(result, peaks, weights, io)


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
