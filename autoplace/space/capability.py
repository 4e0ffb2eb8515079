"""Which unit may run which op, and how fast: by op kind (a unit's ``accepts``), or by
composite pattern (a unit's pattern table over the graph's ``matches``).

A unit with a pattern table runs an op only where a match of one of its patterns covers
the op; it runs it at that pattern's rate (``gflops[pattern]``, else ``gflops.default``),
the best of them where several match. A match over several ops (a composite TVM's fusion
split into kernels) runs on such a unit whole or not at all: :func:`composites` gives the
space what it needs to keep its ops together there.

Work is per unit *with* a pattern table (a few), never per (op, unit) in Python: a mesh
has a hundred thousand units.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autoplace.graph import OP_KINDS, Match, OpGraph
from autoplace.hardware.profile import Profile


def _kind_index(graph: OpGraph) -> list[int]:
    return [OP_KINDS.index(op.kind) for op in graph.ops]


def _tables(profile: Profile) -> list[tuple[int, list]]:
    """``(unit index, unit)`` of each unit with a pattern table."""
    return [(u, unit) for u, unit in enumerate(profile.units) if unit.patterns]


def _matches_of(graph: OpGraph, unit) -> list[Match]:
    """The graph's matches of ``unit``'s pattern table."""
    return [m for m in graph.matches if m.pattern in unit.patterns]


def by_kind(graph: OpGraph, profile: Profile) -> np.ndarray:
    """``[ops, units]`` bool: whether the unit runs the op's kind (its ``accepts``)."""
    table = np.array([[u.accepts_kind(k) for k in OP_KINDS] for u in profile.units],
                     dtype=bool).reshape(len(profile.units), len(OP_KINDS))
    return table[:, _kind_index(graph)].T


def capable(graph: OpGraph, profile: Profile) -> np.ndarray:
    """``[ops, units]`` bool: whether the unit may run the op (by kind or by pattern)."""
    out = by_kind(graph, profile)
    for u, unit in _tables(profile):
        for m in _matches_of(graph, unit):
            out[list(m.ops), u] = True
    return out


def flops_per_s(graph: OpGraph, profile: Profile) -> np.ndarray:
    """``[ops, units]``: the rate (FLOP/s) of each op on each unit, NaN where it cannot run
    there; a pattern unit's is that of the best of its patterns that match the op."""
    table = np.array([[u.flops_per_s(k) if u.accepts_kind(k) else np.nan for k in OP_KINDS]
                      for u in profile.units]).reshape(len(profile.units), len(OP_KINDS))
    out = table[:, _kind_index(graph)].T.copy()
    for u, unit in _tables(profile):
        for m in _matches_of(graph, unit):
            out[list(m.ops), u] = np.fmax(out[list(m.ops), u], unit.flops_per_s(m.pattern))
    return out


def joules_per_flop(graph: OpGraph, profile: Profile, c_unit: np.ndarray) -> np.ndarray:
    """``[ops, choices]``: the active energy per FLOP of each op on the unit of each choice
    (``c_unit``): its kind's, or on a pattern unit the pattern's whose rate it runs at; 0
    where the unit gives none (its energy is then ``power_w`` x busy time)."""
    table = np.array([[u.joules_per_flop(k) for k in OP_KINDS] for u in profile.units],
                     dtype=np.float64).reshape(len(profile.units), len(OP_KINDS))
    out = table[c_unit, np.array(_kind_index(graph), dtype=np.int64)[:, None]]
    for u, unit in _tables(profile):
        best: dict[int, tuple[float, float]] = {}  # op -> (rate, J/FLOP) of its best match
        for m in _matches_of(graph, unit):
            rate = unit.flops_per_s(m.pattern)
            for i in m.ops:
                if i not in best or rate > best[i][0]:
                    best[i] = (rate, unit.joules_per_flop(m.pattern))
        for i, (_, joules) in best.items():
            out[i, c_unit[i] == u] = joules
    return out


@dataclass(frozen=True)
class Composites:
    """Op pairs of multi-op matches: follower ``followers[k]`` is on the unit of its
    match's first op ``leaders[k]`` whenever either of them is on a unit in
    ``units[k]`` (a unit that runs the follower, or the leader, only as that composite)."""

    followers: np.ndarray
    leaders: np.ndarray
    units: np.ndarray  # [pairs, units] bool
    patterns: tuple[str, ...]  # the match's pattern, per pair


def _only_as(graph: OpGraph, unit, m: Match) -> set[int]:
    """The ops of multi-op match ``m`` that ``unit`` (with a pattern table) runs only as a
    multi-op match: no single-op match of its table covers them."""
    single = {x.ops[0] for x in _matches_of(graph, unit) if len(x.ops) == 1}
    return set(m.ops) - single


def composites(graph: OpGraph, profile: Profile) -> Composites:
    """The :class:`Composites` of the graph's multi-op matches on pattern units."""
    rows = {}  # (follower, leader, pattern) -> units
    for u, unit in _tables(profile):
        for m in (m for m in _matches_of(graph, unit) if len(m.ops) > 1):
            only = _only_as(graph, unit, m)
            for f in m.ops[1:]:
                if f in only or m.ops[0] in only:
                    rows.setdefault((f, m.ops[0], m.pattern), set()).add(u)
    units = np.zeros((len(rows), len(profile.units)), dtype=bool)
    for k, us in enumerate(rows.values()):
        units[k, list(us)] = True
    keys = list(rows)
    return Composites(followers=np.array([k[0] for k in keys], dtype=np.int64),
                      leaders=np.array([k[1] for k in keys], dtype=np.int64),
                      units=units, patterns=tuple(k[2] for k in keys))
