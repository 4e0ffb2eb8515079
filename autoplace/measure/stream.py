"""Many inferences in flight: the check on the simulator's throughput model.

The simulator gives a placement's *period* (the steady-state time per inference of a stream
of inputs) analytically: the work per inference of its busiest resource, a unit or a DMA
engine, or the longest op of a ``parallel`` unit (docs/simulator.md, "Throughput"). This
module simulates the stream itself, event by event: every inference is the same work items
(each op, each copy hop, as the reference schedule of one inference has them), and each
resource runs, whenever it is free, the ready item of the earliest inference (ties: program
order; a ``parallel`` unit runs as many items at once as it has ``cores``, any number without
them, but an item, an op, one inference at a time: each op keeps to one core, so the longest
sets a floor on the period). ``tests/measure/test_stream.py`` shows that the period measured
over the last inferences equals the analytic one on pipelines of several shapes and on a
parallel unit of 0 to 3 cores, and that with one inference in flight it is the latency.

Event by event in Python: a check, for small graphs and tests, not for the tuning loop.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Mapping
from dataclasses import dataclass

import numpy as np

from autoplace.measure.simulator import hop_times
from autoplace.space import Placement, SearchSpace


@dataclass(frozen=True)
class Work:
    """One item of an inference's work: ``seconds`` on ``resource`` once the items
    ``after`` (indices into the same inference's items) have ended."""

    resource: str
    seconds: float
    after: tuple[int, ...]


def work_items(space: SearchSpace, placement: Placement) -> list[Work]:
    """One inference's work items in program order: per op, the hops of its incoming copies
    (on the copy's DMA engine, or on the host unit when the copy is sync), then the op."""
    problem = space.check(placement)
    if problem:
        raise ValueError(f"cannot stream placement: {problem.detail}")
    if space.profile.blocks:
        raise ValueError(f"profile {space.profile.name}: the block model has no stream "
                         "simulation (its period is the slowest block or parallel op)")
    g, p, host = space.graph, placement, space.profile.host
    items: list[Work] = []
    op_item: list[int] = []
    for i, op in enumerate(g.ops):
        unit, scope = p.ops[op.name]
        after = []
        for k in space.in_edges[i]:
            src = g.edges[k].src
            src_scope, prev = p.ops[g.ops[src].name][1], op_item[src]
            if src_scope != scope:
                mode = p.copies[space.edge_names[k]]
                route = space.route(src_scope, scope, mode)
                for hop, secs in zip(route, hop_times(space, k, route)):
                    items.append(Work(host if mode == "sync" else hop.engine, secs, (prev,)))
                    prev = len(items) - 1
            after.append(prev)
        weights = p.weights.get(op.name, "streamed")
        items.append(Work(unit, space.seconds_of(i, unit, scope, weights), tuple(after)))
        op_item.append(len(items) - 1)
    return items


def _in_program_order(items: list[Work]) -> list[Work]:
    """The items, each also after the previous item of its resource: within one inference
    a resource runs its work in program order, as the reference schedule does."""
    last: dict[str, int] = {}
    out = []
    for j, item in enumerate(items):
        prev = last.get(item.resource)
        after = item.after if prev is None or prev in item.after else (*item.after, prev)
        out.append(Work(item.resource, item.seconds, after))
        last[item.resource] = j
    return out


class _Stream:
    """The state of a stream simulation: per inference, the items each item still waits
    for; per resource, its ready items (by inference, then program order) and how many it
    is running (at most one, or a parallel unit's cores; ``parallel[r] == 0``: no limit)."""

    def __init__(self, items: list[Work], parallel: dict[str, int], inferences: int,
                 record: list | None = None):
        self.items, self.parallel, self.record = items, parallel, record
        self.users: list[list[int]] = [[] for _ in items]
        for j, item in enumerate(items):
            for d in item.after:
                self.users[d].append(j)
        self.waiting: list[list[int]] = []
        self.left = np.zeros(inferences, dtype=np.int64)
        self.finish = np.zeros(inferences)
        self.ready: dict[str, list[tuple[int, int]]] = {}
        self.running: dict[str, int] = {}
        self.active: set[int] = set()  # items running (for some inference)
        self.events: list[tuple[float, int, int]] = []

    def admit(self, inference: int) -> None:
        self.waiting.append([len(item.after) for item in self.items])
        self.left[inference] = len(self.items)
        for j, item in enumerate(self.items):
            if not item.after:
                heapq.heappush(self.ready.setdefault(item.resource, []), (inference, j))

    def dispatch(self, t: float) -> None:
        """Start, on every resource with room, its most urgent ready items (one at a time;
        on a parallel unit up to its cores, or all of them)."""
        for res, queue in self.ready.items():
            room, held = self.parallel.get(res, 1), []
            while queue and (room == 0 or self.running.get(res, 0) < room):
                inference, j = heapq.heappop(queue)
                if j in self.active:  # an op runs one inference at a time
                    held.append((inference, j))
                    continue
                heapq.heappush(self.events, (t + self.items[j].seconds, inference, j))
                if self.record is not None:
                    self.record.append((res, t, t + self.items[j].seconds, inference, j))
                self.running[res] = self.running.get(res, 0) + 1
                self.active.add(j)
            for item in held:
                heapq.heappush(queue, item)

    def complete(self, t: float, inference: int, j: int) -> bool:
        """Item ``j`` of ``inference`` ends at ``t``; True if the inference is done."""
        self.running[self.items[j].resource] -= 1
        self.active.discard(j)
        for user in self.users[j]:
            self.waiting[inference][user] -= 1
            if not self.waiting[inference][user]:
                queue = self.ready.setdefault(self.items[user].resource, [])
                heapq.heappush(queue, (inference, user))
        self.left[inference] -= 1
        if self.left[inference]:
            return False
        self.finish[inference] = t
        return True


def stream_finishes(space: SearchSpace, placement: Placement, inferences: int,
                    window: int | None = None) -> np.ndarray:
    """When each of ``inferences`` inferences of a placement's stream ends; at most
    ``window`` are in flight (None: all start at once), the next one starting as one ends."""
    parallel = {u.name: u.cores for u in space.profile.units if u.execution == "parallel"}
    return run_stream(work_items(space, placement), inferences, window, parallel)


def run_stream(items: list[Work], inferences: int, window: int | None = None,
               parallel: Mapping[str, int] | Collection[str] = (),
               record: list | None = None) -> np.ndarray:
    """When each of ``inferences`` inferences, each the work ``items`` (in program order:
    each after the previous item of its resource), ends; at most ``window`` in flight.
    Resources in ``parallel`` run several items at once: as many as the mapping gives (0,
    or a resource merely listed: any number). ``record``: a list to append
    ``(resource, start, end, inference, item)`` to for every item run."""
    if inferences < 1 or (window is not None and window < 1):
        raise ValueError(f"inferences and window must be >= 1, got {inferences}, {window}")
    cores = dict(parallel) if isinstance(parallel, Mapping) else dict.fromkeys(parallel, 0)
    run = _Stream(_in_program_order(items), cores, inferences, record)
    admitted = min(inferences, window or inferences)
    for inference in range(admitted):
        run.admit(inference)
    t = 0.0
    run.dispatch(t)
    while run.events:
        t = run.events[0][0]
        while run.events and run.events[0][0] == t:
            _, inference, j = heapq.heappop(run.events)
            if run.complete(t, inference, j) and admitted < inferences:
                run.admit(admitted)
                admitted += 1
        run.dispatch(t)
    return run.finish


def stream_period(space: SearchSpace, placement: Placement, inferences: int = 64,
                  window: int | None = None) -> float:
    """The time per inference of a stream of ``inferences``, measured over its middle
    half (past the start, before the last ones run with the resources to themselves)."""
    if inferences < 4:
        raise ValueError(f"inferences must be >= 4 to measure a period, got {inferences}")
    return middle_period(stream_finishes(space, placement, inferences, window))


def middle_period(finish: np.ndarray) -> float:
    """Time per inference between the ends of the first and the third quarter of a
    stream's inferences."""
    finish = np.sort(finish)
    first, last = len(finish) // 4, 3 * len(finish) // 4
    return float((finish[last] - finish[first]) / (last - first))
