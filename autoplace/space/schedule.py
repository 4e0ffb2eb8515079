"""The schedule of a placement: what each resource runs, in which order, after what.

One home for the order that docs/simulator.md defines and both executors follow: the
simulator (:mod:`autoplace.measure.simulator`) times it, the runtime
(:mod:`autoplace.runtime`) runs it on real units. Every resource (a unit, or a DMA engine)
runs its work in program order: the ops in the graph's topological order, each op's incoming
copies just before it, hop after hop along the copy's route. A ``sync`` copy is done by the
host unit (it holds that unit), an ``async`` one by each hop's DMA engine. A piece of work
starts once its resource has finished the work before it and the work it reads is done
(``after``): independent ops on different units, and async copies, overlap. Units pinned to
a CPU in common (the profile's ``cpus``) do not overlap: a unit's work also waits for the
work before it, in program order, of every unit that shares one of its CPUs (``follows``).

A ``parallel`` unit runs each op as soon as it is ready, whatever its order
(:attr:`Schedule.unordered`).

Where a code generator builds several ops of a unit as one *region* (docs/offload.md),
:func:`with_regions` makes each region one piece of work (``kind == "region"``): it reads
what its ops read from outside it, its results are there when it ends, and the copies
between its own ops are no more (its values are its own).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, replace

from autoplace.space.compiled import SearchSpace
from autoplace.space.placement import Placement
from autoplace.space.routes import Route


@dataclass(frozen=True, kw_only=True)
class Work:
    """One piece of work: an op on its unit, or one hop of an edge's copy.

    ``op`` is the op run (``kind == "op"``) or the op the copy feeds; ``edge`` and ``hop``
    name the copy (edge index, hop index along its route); ``src`` and ``dst`` are the
    scopes read and written (an op's own scope, twice); ``after`` the indices of the work
    whose results this one reads; ``follows`` the work it waits for because its unit shares
    a CPU with another's.
    """

    kind: str
    resource: str
    op: int
    src: str
    dst: str
    after: tuple[int, ...]
    edge: int = -1
    hop: int = 0
    mode: str = ""
    #: work of other units that shares a CPU with this one's unit and comes before it
    follows: tuple[int, ...] = ()
    #: a region's ops (``kind == "region"``; ``op`` is the last of them)
    ops: tuple[int, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Schedule:
    """A placement's work in program order, and each resource's share of it."""

    work: tuple[Work, ...]
    #: resource -> indices into ``work``, in the order it runs them
    order: dict[str, tuple[int, ...]]
    #: resources that run each piece of work once it is ready, in no fixed order
    unordered: frozenset[str]
    #: per op: the index of its work
    op_work: tuple[int, ...]
    #: per op, per in-edge (space.in_edges order): the work whose result it reads (the
    #: producer's op, or the last hop of the edge's copy)
    reads: tuple[tuple[int, ...], ...]

    def routes(self) -> dict[int, list[int]]:
        """Edge index -> its copy's hops (work indices, in route order)."""
        out: dict[int, list[int]] = {}
        for i, w in enumerate(self.work):
            if w.kind == "copy":
                out.setdefault(w.edge, []).append(i)
        return out


@dataclass(frozen=True, kw_only=True)
class Timing:
    """A schedule with when each piece of its work starts and ends (seconds), as the
    simulator times it (``Simulator.timing``)."""

    schedule: Schedule
    start: tuple[float, ...]
    end: tuple[float, ...]

    def to_dict(self) -> dict:
        """JSON form (docs/runtime.md, "The artefact"): each piece of work with its
        resource, what it reads (``after``, indices) and its simulated start and end;
        each resource's order."""
        work = [{"kind": w.kind, "resource": w.resource, "op": w.op, "src": w.src,
                 "dst": w.dst, "after": list(w.after),
                 **({"edge": w.edge, "hop": w.hop, "mode": w.mode} if w.kind == "copy"
                    else {}),
                 **({"ops": list(w.ops)} if w.kind == "region" else {}),
                 "start_s": s, "end_s": e}
                for w, s, e in zip(self.schedule.work, self.start, self.end)]
        return {"work": work, "order": {r: list(v) for r, v in self.schedule.order.items()},
                "unordered": sorted(self.schedule.unordered)}


def schedule_of(space: SearchSpace, placement: Placement) -> Schedule:
    """The schedule of a placement the space accepts (``space.check`` is None)."""
    g, host = space.graph, space.profile.host
    work: list[Work] = []
    op_work: list[int] = []
    reads: list[tuple[int, ...]] = []
    for i, op in enumerate(g.ops):
        unit, scope = placement.ops[op.name]
        sources = []
        for k in space.in_edges[i]:
            src = g.edges[k].src
            src_scope = placement.ops[g.ops[src].name][1]
            last = op_work[src]
            if src_scope != scope:
                mode = placement.copies[space.edge_names[k]]
                route = space.route(src_scope, scope, mode)
                last = _hops(work, route, mode, host, i, k, last)
            sources.append(last)
        reads.append(tuple(sources))
        op_work.append(len(work))
        work.append(Work(kind="op", resource=unit, op=i, src=scope, dst=scope,
                         after=tuple(dict.fromkeys(sources))))
    return _with_order(space, _sharing(space, work), op_work, reads)


def _sharing(space: SearchSpace, work: list[Work]) -> list[Work]:
    """``work`` with each piece's ``follows``: the last earlier work (program order) on
    each CPU its unit is pinned to, done by another unit."""
    ptr, idx, index = space.slot_ptr, space.slot_idx, space.profile.unit_index
    last_on: dict[int, int] = {}
    out = []
    for i, w in enumerate(work):
        u = index.get(w.resource)
        slots = idx[ptr[u]:ptr[u + 1]].tolist() if u is not None else []
        follows = {last_on[s] for s in slots if s in last_on
                   and work[last_on[s]].resource != w.resource}
        for s in slots:
            last_on[s] = i
        out.append(replace(w, follows=tuple(sorted(follows))) if follows else w)
    return out


def _hops(work: list[Work], route: Route, mode: str, host: str, op: int, edge: int,
          last: int) -> int:
    """Append the hops of edge ``edge``'s copy after work ``last``; the last hop's index."""
    for j, hop in enumerate(route):
        work.append(Work(kind="copy", resource=host if mode == "sync" else hop.engine,
                         op=op, src=hop.src, dst=hop.dst, after=(last,), edge=edge, hop=j,
                         mode=mode))
        last = len(work) - 1
    return last


def _with_order(space: SearchSpace, work: list[Work], op_work: list[int],
                reads: list[tuple[int, ...]]) -> Schedule:
    order: dict[str, list[int]] = {}
    for i, w in enumerate(work):
        order.setdefault(w.resource, []).append(i)
    unordered = frozenset(u.name for u in space.profile.units if u.execution == "parallel")
    return Schedule(work=tuple(work), order={r: tuple(v) for r, v in order.items()},
                    unordered=unordered, op_work=tuple(op_work), reads=tuple(reads))


def with_regions(space: SearchSpace, timing: Timing,
                 regions: Sequence[Sequence[int]]) -> Timing:
    """``timing``'s schedule with each of ``regions`` (ops of one unit) run as one piece of
    work, from its first op's simulated start to its last op's end. The work is put in an
    order its dependencies allow, keeping program order where they leave it free (a region
    at its last op)."""
    s, edges = timing.schedule, space.graph.edges
    group = {op: g for g, ops in enumerate(regions) for op in ops}
    node: list = []
    for i, w in enumerate(s.work):
        g = group.get(w.op)
        inside = g is not None and (w.kind == "op" or group.get(edges[w.edge].src) == g)
        node.append(("region", g) if inside else ("work", i))
    members: dict = {}
    for i, key in enumerate(node):
        members.setdefault(key, []).append(i)
    order = _topological(s, node, members)
    index = {key: n for n, key in enumerate(order)}
    work = []
    for key in order:
        after = {index[node[a]] for i in members[key] for a in s.work[i].after} - {index[key]}
        work.append(_merged(s, s.work[members[key][0]], sorted(after), regions, key))
    op_work = tuple(index[node[i]] for i in s.op_work)
    reads = tuple(tuple(dict.fromkeys(index[node[r]] for r in rs if index[node[r]] != op_work[k]))
                  for k, rs in enumerate(s.reads))
    merged = _with_order(space, _sharing(space, work), list(op_work), list(reads))
    return Timing(schedule=merged,
                  start=tuple(min(timing.start[i] for i in members[k]) for k in order),
                  end=tuple(max(timing.end[i] for i in members[k]) for k in order))


def _topological(s: Schedule, node: list, members: dict) -> list:
    """The nodes (work, or regions) in an order their reads allow: the earliest ready by
    its last member's place in program order."""
    needs = {key: {node[a] for i in items for a in s.work[i].after} - {key}
             for key, items in members.items()}
    waiting = {key: len(n) for key, n in needs.items()}
    users: dict = {}
    for key, n in needs.items():
        for dep in n:
            users.setdefault(dep, []).append(key)
    ready = [(members[k][-1], k) for k, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        _, key = heapq.heappop(ready)
        out.append(key)
        for user in users.get(key, []):
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, (members[user][-1], user))
    if len(out) != len(members):
        raise ValueError("regions whose reads make a cycle cannot run as one piece of work")
    return out


def _merged(s: Schedule, first: Work, after: list[int],
            regions: Sequence[Sequence[int]], key: tuple) -> Work:
    """The piece of work of a node: a region (on the unit of its ops, in its last op's
    scope), or the one work item (``first``) reading what it reads in the new order."""
    if key[0] == "work":
        return replace(first, after=tuple(after), follows=())
    ops = tuple(sorted(regions[key[1]]))
    last = s.work[s.op_work[ops[-1]]]
    return Work(kind="region", resource=last.resource, op=ops[-1], src=last.src,
                dst=last.dst, after=tuple(after), ops=ops)
