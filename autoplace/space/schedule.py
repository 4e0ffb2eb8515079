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
"""

from __future__ import annotations

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
