"""The search space: per op a (unit, output scope), per crossing edge a copy mode.

A :class:`Placement` is the value the whole tool passes around. It is plain data, serialises
to JSON and back, and can be written by hand, e.g. the first seed thread's
``s[C].map_to = cpu1`` becomes ``{"C": "cpu1", "D": "accelerator1"}``
(scopes and copy modes optional, see :meth:`SearchSpace.from_user`).

Semantics (the simulator and the TVM build share them): an op runs on its unit, reads its
inputs from and writes its output to its scope. An edge whose producer's scope differs from
the consumer's scope needs a copy, along the cheapest route of copy paths that all support
the chosen mode (``sync``: the host unit copies; ``async``: each hop's DMA engine copies).
"""

from __future__ import annotations

import heapq
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from autoplace.graph import OpGraph
from autoplace.profile import COPY_MODES, CopyPath, Profile, ProfileError
from autoplace.profile_io import check_graph

#: A route is the sequence of copy paths a copy takes from one scope to another.
Route = tuple[CopyPath, ...]


class PlacementError(ValueError):
    """A placement does not fit the graph and profile; the message names the op or edge."""


@dataclass(frozen=True, kw_only=True)
class Placement:
    """Op name -> (unit, scope); crossing edge name ("src->dst") -> copy mode."""

    ops: Mapping[str, tuple[str, str]]
    copies: Mapping[str, str]

    def to_dict(self) -> dict:
        return {
            "ops": {k: {"unit": u, "scope": s} for k, (u, s) in self.ops.items()},
            "copies": dict(self.copies),
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> Placement:
        """Inverse of :meth:`to_dict` (full form only; see ``SearchSpace.from_user``)."""
        try:
            ops = {k: (str(v["unit"]), str(v["scope"])) for k, v in d["ops"].items()}
            copies = {str(k): str(v) for k, v in d.get("copies", {}).items()}
        except (KeyError, TypeError, AttributeError) as exc:
            raise PlacementError(f"not a placement: missing or malformed {exc}") from None
        return cls(ops=ops, copies=copies)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Placement:
        try:
            return cls.from_dict(json.loads(text))
        except json.JSONDecodeError as exc:
            raise PlacementError(f"placement is not JSON: {exc}") from None

    def units_used(self) -> set[str]:
        return {u for u, _ in self.ops.values()}


def _cheapest_routes(profile: Profile, mode: str) -> dict[tuple[str, str], Route]:
    """All-pairs cheapest routes over paths supporting ``mode`` (cost: latency + 1 MB)."""
    out: dict[str, list[CopyPath]] = {}
    for p in profile.copies:
        if mode in p.modes:
            out.setdefault(p.src, []).append(p)
    routes: dict[tuple[str, str], Route] = {}
    for src in (s.name for s in profile.scopes):
        best = {src: 0.0}
        heap: list[tuple[float, int, str, Route]] = [(0.0, 0, src, ())]
        tie = 0
        while heap:
            cost, _, at, route = heapq.heappop(heap)
            if cost > best.get(at, math.inf):
                continue
            if at != src:
                routes.setdefault((src, at), route)
            for p in out.get(at, ()):
                c = cost + p.seconds(1 << 20)
                if c < best.get(p.dst, math.inf):
                    best[p.dst] = c
                    tie += 1
                    heapq.heappush(heap, (c, tie, p.dst, route + (p,)))
    return routes


class SearchSpace:
    """The choices of one graph on one profile.

    ``op_choices[i]`` lists the (unit, scope) pairs op ``i`` may take: units that accept its
    kind, scopes they may write. ``edge_modes[k]`` lists the copy modes edge ``k`` could
    need over all choices; an edge with two or more is a search parameter.
    """

    def __init__(self, graph: OpGraph, profile: Profile):
        check_graph(profile, graph)
        self.graph = graph
        self.profile = profile
        self.op_choices: list[list[tuple[str, str]]] = [self._choices(op) for op in graph.ops]
        self.routes: dict[str, dict[tuple[str, str], Route]] = {
            m: _cheapest_routes(profile, m) for m in COPY_MODES
        }
        self.edge_modes = [self._possible_modes(k) for k in range(len(graph.edges))]
        self.edge_names = [graph.edge_name(k) for k in range(len(graph.edges))]

    def _choices(self, op) -> list[tuple[str, str]]:
        res = [
            (u.name, s)
            for u in self.profile.units
            if u.accepts_kind(op.kind)
            for s in self.profile.scopes_of(u.name)
        ]
        if not res:  # only for profiles built in code: the loader rejects scope-less units
            raise ProfileError(f"{self.profile.source}: no unit accepting op {op.name!r} "
                               "can write any scope")
        return res

    def _possible_modes(self, k: int) -> list[str]:
        e = self.graph.edges[k]
        src_scopes = {s for _, s in self.op_choices[e.src]}
        dst_scopes = {s for _, s in self.op_choices[e.dst]}
        pairs = [(a, b) for a in src_scopes for b in dst_scopes if a != b]
        return [m for m in COPY_MODES if any(p in self.routes[m] for p in pairs)]

    # -- size ----------------------------------------------------------------------------
    @property
    def log10_size(self) -> float:
        """log10 of the number of distinct placements (op choices x free copy modes)."""
        ops = sum(math.log10(len(c)) for c in self.op_choices)
        return ops + sum(math.log10(len(m)) for m in self.edge_modes if len(m) > 1)

    # -- routes --------------------------------------------------------------------------
    def modes_between(self, src: str, dst: str) -> list[str]:
        """Copy modes with a route from scope ``src`` to scope ``dst``."""
        return [m for m in COPY_MODES if (src, dst) in self.routes[m]]

    def route(self, src: str, dst: str, mode: str) -> Route:
        return self.routes[mode][(src, dst)]

    # -- building placements -------------------------------------------------------------
    def decode(self, op_choice: Sequence[int], mode_pref: Mapping[int, str]) -> Placement:
        """Placement from a choice index per op and a preferred mode per edge.

        A preferred mode the needed route does not support is repaired to one it does;
        an edge with no route at all keeps the preference (the placement then fails
        :meth:`check` with "no copy path", which the search records as infeasible).
        """
        g = self.graph
        ops = {op.name: self.op_choices[i][op_choice[i]] for i, op in enumerate(g.ops)}
        copies = {}
        for k, e in enumerate(g.edges):
            src, dst = ops[g.ops[e.src].name][1], ops[g.ops[e.dst].name][1]
            if src == dst:
                continue
            avail = self.modes_between(src, dst)
            want = mode_pref.get(k, self.edge_modes[k][0] if self.edge_modes[k] else "sync")
            copies[self.edge_names[k]] = want if want in avail or not avail else avail[-1]
        return Placement(ops=ops, copies=copies)

    def uniform(self, unit: str) -> Placement | None:
        """Every op on ``unit`` in its home scope, or None if the unit rejects an op."""
        scope = self.profile.home_scope(unit)
        if any((unit, scope) not in c for c in self.op_choices):
            return None
        return Placement(ops={op.name: (unit, scope) for op in self.graph.ops}, copies={})

    def from_user(self, spec: Mapping) -> Placement:
        """A hand-written placement, defaults filled in, validated.

        ``spec`` maps op name -> unit name or {"unit": ..., "scope": ...}; it may also be
        {"ops": {...}, "copies": {"C->D": "async"}}. Ops left out run on the host unit;
        a scope left out is the unit's home scope; a copy mode left out is ``async`` where
        the route supports it, else ``sync``.
        """
        ops_spec = spec.get("ops", spec) if isinstance(spec.get("ops"), Mapping) else spec
        copies_spec = spec.get("copies", {}) if ops_spec is not spec else {}
        ops = {}
        for op in self.graph.ops:
            v = ops_spec.get(op.name, self.profile.host)
            unit = v if isinstance(v, str) else v.get("unit", self.profile.host)
            scope = None if isinstance(v, str) else v.get("scope")
            ops[op.name] = (unit, scope or self._home_or_first(unit))
        unknown = sorted(set(ops_spec) - set(ops))
        if unknown:
            raise PlacementError(f"graph {self.graph.name} has no op {unknown[0]!r}")
        copies = {}
        for k, e in enumerate(self.graph.edges):
            src, dst = ops[self.graph.ops[e.src].name][1], ops[self.graph.ops[e.dst].name][1]
            if src != dst:
                avail = self.modes_between(src, dst) or ["sync"]
                copies[self.edge_names[k]] = copies_spec.get(self.edge_names[k], avail[-1])
        copies.update({k: v for k, v in copies_spec.items() if k not in copies})
        placement = Placement(ops=ops, copies=copies)
        self.validate(placement)
        return placement

    def _home_or_first(self, unit: str) -> str:
        try:
            return self.profile.home_scope(unit)
        except (KeyError, IndexError):
            return "?"

    # -- validation ----------------------------------------------------------------------
    def check(self, placement: Placement) -> str | None:
        """What is wrong with ``placement`` on this graph and profile, or None."""
        g = self.graph
        if set(placement.ops) != {op.name for op in g.ops}:
            missing = sorted({op.name for op in g.ops} - set(placement.ops))
            extra = sorted(set(placement.ops) - {op.name for op in g.ops})
            return f"op {(missing or extra)[0]!r} is {'missing' if missing else 'not in the graph'}"
        for i, op in enumerate(g.ops):
            unit, scope = placement.ops[op.name]
            if (unit, scope) not in self.op_choices[i]:
                return self._explain_choice(op, unit, scope)
        need = set()
        for k, e in enumerate(g.edges):
            src, dst = placement.ops[g.ops[e.src].name][1], placement.ops[g.ops[e.dst].name][1]
            if src != dst:
                need.add(self.edge_names[k])
                problem = self._check_copy(self.edge_names[k], src, dst, placement.copies)
                if problem:
                    return problem
        extra = sorted(set(placement.copies) - need)
        return f"edge {extra[0]!r} needs no copy (same scope or no such edge)" if extra else None

    def _explain_choice(self, op, unit: str, scope: str) -> str:
        names = [u.name for u in self.profile.units]
        if unit not in names:
            return f"op {op.name!r}: unknown unit {unit!r} (profile has {names})"
        if not self.profile.unit(unit).accepts_kind(op.kind):
            return f"op {op.name!r}: unit {unit!r} does not accept kind {op.kind!r}"
        return f"op {op.name!r}: unit {unit!r} cannot write scope {scope!r}"

    def _check_copy(self, name: str, src: str, dst: str, copies: Mapping[str, str]) -> str | None:
        mode = copies.get(name)
        avail = self.modes_between(src, dst)
        if not avail:
            return f"edge {name!r}: no copy path from scope {src!r} to {dst!r}"
        if mode is None:
            return f"edge {name!r}: copy {src}->{dst} needs a mode, one of {avail}"
        if mode not in avail:
            return f"edge {name!r}: copy {src}->{dst} supports {avail}, got {mode!r}"
        return None

    def validate(self, placement: Placement) -> None:
        """Raise :class:`PlacementError` if ``placement`` does not fit."""
        problem = self.check(placement)
        if problem:
            where = f"graph {self.graph.name}, profile {self.profile.name}"
            raise PlacementError(f"{problem} ({where})")
