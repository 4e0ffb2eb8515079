"""Buffers in their scopes: one pool per memory scope, sized as the simulator counts it.

Every tensor a schedule writes (an op's outputs, a copy hop's destination) gets a buffer in
the scope the placement names, carved from that scope's pool. A buffer takes over the
storage of one whose writer and readers all ended, in the simulated timing
(:class:`~autoplace.space.schedule.Timing`), before its own writer starts: the simulator's
rule for peak memory. Storage the schedule itself frees before the writer (its last users
are work the writer waits for, or follows on the same resource) is taken first; then new
storage, while the scope's pool stays within its capacity; only then storage freed by work
the schedule does not order before the writer, and the reuse adds that wait
(:attr:`PoolPlan.waits`): a buffer is overwritten only after its last reader and its copies
are done, in every run, whatever the real timing. A scope whose buffers need more than its
capacity is refused (:class:`PoolError`) before anything runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from autoplace.space.schedule import Schedule, Timing

MIB = 1 << 20


class PoolError(ValueError):
    """A scope's buffers do not fit its capacity; the message names the scope."""


def ancestors(schedule: Schedule) -> list[int]:
    """Per work item, the bit set of the work that happens before it (``after``,
    ``follows``, and the work before it on its resource when that resource runs in order)."""
    prev_on: dict[int, int] = {}
    for resource, items in schedule.order.items():
        if resource not in schedule.unordered:
            for a, b in zip(items, items[1:]):
                prev_on[b] = a
    out: list[int] = []
    for i, w in enumerate(schedule.work):
        preds = [*w.after, *w.follows, *([prev_on[i]] if i in prev_on else [])]
        bits = 0
        for p in preds:
            bits |= out[p] | (1 << p)
        out.append(bits)
    return out


#: every buffer starts at a multiple of this many bytes (a cache line; what TVM's own
#: allocations are aligned to)
ALIGN = 64


def _aligned(n: int) -> int:
    return -(-max(n, 1) // ALIGN) * ALIGN


@dataclass
class Segment:
    """A run of a scope's arena: a live buffer, or free space whose last tenants'
    ``users`` a new tenant must wait for (None on a live pinned buffer: never freed)."""

    offset: int
    nbytes: int
    live: bool
    users: frozenset[int] | None = frozenset()


@dataclass
class Request:
    """A buffer to place: its scope, size, writer and readers (work indices); a pinned one
    (graph results, weights) never gives its storage back."""

    scope: str
    nbytes: int
    writer: int
    readers: list[int] = field(default_factory=list)
    pinned: bool = False


class Arena:
    """One scope's memory as segments in address order: best fit, coalesced on free."""

    def __init__(self) -> None:
        self.segments: list[Segment] = []

    @property
    def nbytes(self) -> int:
        return self.segments[-1].offset + self.segments[-1].nbytes if self.segments else 0

    def release(self, done) -> None:
        """Free every live, unpinned segment whose users are all ``done``; merge free
        neighbours (the merged space waits for all their users)."""
        merged: list[Segment] = []
        for seg in self.segments:
            if seg.live and seg.users is not None and done(seg.users):
                seg.live = False
            if merged and not seg.live and not merged[-1].live:
                last = merged[-1]
                last.nbytes += seg.nbytes
                last.users = last.users | seg.users
            else:
                merged.append(seg)
        self.segments = merged

    def allocate(self, nbytes: int, users: frozenset[int] | None, *,
                 unordered: Callable[[frozenset[int]], bool] | None = None,
                 may_grow: Callable[[int], bool] | None = None) -> tuple[int, frozenset[int]]:
        """(offset, the earlier tenants' users to wait for) of a new live segment: the
        best-fitting free space, else the free tail grown, else new space at the end.
        Given ``unordered`` (whether the writer would have to wait for some of a space's
        users), free space it need not wait for comes first, then new space where
        ``may_grow(bytes)`` allows it, and only then space it must wait for."""
        need = _aligned(nbytes)
        fits = [n for n, s in enumerate(self.segments) if not s.live and s.nbytes >= need]
        calm = [n for n in fits if unordered is None or not unordered(self.segments[n].users)]
        spare = may_grow is not None and may_grow(need)
        tail = self.segments[-1] if self.segments and not self.segments[-1].live else None
        if calm:
            n = min(calm, key=lambda k: self.segments[k].nbytes)
        elif fits and not spare:
            n = min(fits, key=lambda k: self.segments[k].nbytes)
        elif tail is not None and not fits and (
                not spare or unordered is None or not unordered(tail.users)):
            n = len(self.segments) - 1
            tail.nbytes = need  # grow the free tail
        else:
            self.segments.append(Segment(offset=self.nbytes, nbytes=need, live=False))
            n = len(self.segments) - 1
        gap = self.segments[n]
        rest = Segment(offset=gap.offset + need, nbytes=gap.nbytes - need, live=False,
                       users=gap.users)
        self.segments[n:n + 1] = [Segment(offset=gap.offset, nbytes=need, live=True,
                                          users=users)] + ([rest] if rest.nbytes else [])
        return gap.offset, gap.users


class PoolPlan:
    """Places each request at an offset of its scope's arena; ``bytes_by_scope`` is each
    arena's size. Requests come in the order their writers start (pinned ones first,
    writer -1). Given the scopes' ``capacity``, a writer takes new space rather than space
    whose last users it would have to wait for, while its scope's pool stays within its
    capacity (a wait between units' workers costs a wake-up; two branches' buffers would
    otherwise make each wait for the other at every kernel)."""

    def __init__(self, timing: Timing, capacity: dict[str, int] | None = None):
        self.capacity = capacity
        self.ancestors = ancestors(timing.schedule)
        self.start, self.end = timing.start, timing.end
        self.arenas: dict[str, Arena] = {}
        #: bytes a scope holds outside its arena (the graph's weights, which stay where
        #: the program keeps them)
        self.held: dict[str, int] = {}
        #: (work, writer): a writer that must wait for work whose results it overwrites
        self.waits: set[tuple[int, int]] = set()

    def _done_before(self, writer: int):
        before = self.ancestors[writer]
        start, end, anc = self.start[writer], self.end, self.ancestors
        return lambda users: all(before >> u & 1 or (end[u] <= start and not anc[u] >> writer & 1)
                                 for u in users)

    def place(self, req: Request) -> tuple[str, int]:
        """(scope, byte offset) of ``req``'s buffer."""
        arena = self.arenas.setdefault(req.scope, Arena())
        if req.writer >= 0:
            arena.release(self._done_before(req.writer))
        users = None if req.pinned else frozenset({req.writer, *req.readers})
        offset, earlier = arena.allocate(req.nbytes, users, **self._preferences(req, arena))
        if req.writer >= 0:
            before = self.ancestors[req.writer]
            self.waits.update((u, req.writer) for u in earlier if not before >> u & 1)
        return req.scope, offset

    def _preferences(self, req: Request, arena: Arena) -> dict:
        """How ``req``'s writer picks its space (:meth:`Arena.allocate`): none without
        capacities or a writer."""
        if self.capacity is None or req.writer < 0:
            return {}
        before, room = self.ancestors[req.writer], self.capacity[req.scope]
        held = self.held.get(req.scope, 0)
        return {"unordered": lambda users: any(not before >> u & 1 for u in users),
                "may_grow": lambda need: held + arena.nbytes + need <= room}

    def hold(self, scope: str, nbytes: int) -> None:
        """Count ``nbytes`` in ``scope`` for the whole run, outside its arena."""
        self.held[scope] = self.held.get(scope, 0) + nbytes

    @property
    def arena_bytes(self) -> dict[str, int]:
        """The size of each scope's arena (what is allocated)."""
        return {scope: arena.nbytes for scope, arena in self.arenas.items()}

    @property
    def bytes_by_scope(self) -> dict[str, int]:
        """What each scope holds: its arena and what it holds outside it."""
        out = dict(self.held)
        for scope, n in self.arena_bytes.items():
            out[scope] = out.get(scope, 0) + n
        return out

    def check(self, capacity: dict[str, int]) -> None:
        """Refuse a scope whose pool exceeds its capacity (bytes)."""
        for scope, need in self.bytes_by_scope.items():
            if need > capacity[scope]:
                raise PoolError(f"scope {scope!r}: the runtime's buffers need "
                                f"{need / MIB:.2f} MiB, its capacity is "
                                f"{capacity[scope] / MIB:.2f} MiB")
