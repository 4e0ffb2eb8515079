"""Which unit may run which op, and how fast: by op kind (a unit's ``accepts``), or by
composite pattern (a unit's pattern table over the graph's ``matches``).

A unit with a pattern table runs an op only where a match of one of its patterns covers
the op; it runs it at that pattern's rate (``gflops[pattern]``, else ``gflops.default``),
the best of them where several match. A match over several ops (a composite TVM's fusion
split into kernels) runs on such a unit whole or not at all: :func:`composites` gives the
space what it needs to keep its ops together there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autoplace.graph import OP_KINDS, OpGraph
from autoplace.hardware.profile import Profile


def _table_matches(graph: OpGraph, profile: Profile) -> list[list[list]]:
    """``[op][unit]``: the matches covering the op whose pattern is in the unit's table."""
    out = [[[] for _ in profile.units] for _ in graph.ops]
    for m in graph.matches:
        for u, unit in enumerate(profile.units):
            if m.pattern in unit.patterns:
                for i in m.ops:
                    out[i][u].append(m)
    return out


def _kind_index(graph: OpGraph) -> list[int]:
    return [OP_KINDS.index(op.kind) for op in graph.ops]


def by_kind(graph: OpGraph, profile: Profile) -> np.ndarray:
    """``[ops, units]`` bool: whether the unit runs the op's kind (its ``accepts``)."""
    table = np.array([[u.accepts_kind(k) for k in OP_KINDS] for u in profile.units],
                     dtype=bool).reshape(len(profile.units), len(OP_KINDS))
    return table[:, _kind_index(graph)].T


def capable(graph: OpGraph, profile: Profile) -> np.ndarray:
    """``[ops, units]`` bool: whether the unit may run the op (by kind or by pattern)."""
    kinds = by_kind(graph, profile)
    matched = _table_matches(graph, profile)
    by_pattern = np.array([[bool(ms) for ms in row] for row in matched], dtype=bool)
    return kinds | by_pattern.reshape(kinds.shape)


def flops_per_s(graph: OpGraph, profile: Profile) -> np.ndarray:
    """``[ops, units]``: the rate (FLOP/s) of each op on each unit, NaN where it cannot run
    there; a pattern unit's is that of the best of its patterns that match the op."""
    table = np.array([[u.flops_per_s(k) if u.accepts_kind(k) else np.nan for k in OP_KINDS]
                      for u in profile.units]).reshape(len(profile.units), len(OP_KINDS))
    out = table[:, _kind_index(graph)].T.copy()
    for u, unit in enumerate(profile.units):
        for m in (m for m in graph.matches if m.pattern in unit.patterns):
            rate = unit.flops_per_s(m.pattern)
            out[list(m.ops), u] = np.fmax(out[list(m.ops), u], rate)
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


def _only_as(m, i: int, u: int, matched, kinds: np.ndarray) -> bool:
    """Whether unit ``u`` runs op ``i`` only as (multi-op) match ``m``."""
    return not kinds[i, u] and all(len(x.ops) > 1 for x in matched[i][u]) and \
        m in matched[i][u]


def composites(graph: OpGraph, profile: Profile) -> Composites:
    """The :class:`Composites` of the graph's multi-op matches on pattern units."""
    matched = _table_matches(graph, profile)
    kinds, rows = by_kind(graph, profile), []
    for m in (m for m in graph.matches if len(m.ops) > 1):
        lead = m.ops[0]
        for f in m.ops[1:]:
            units = [_only_as(m, f, u, matched, kinds) or _only_as(m, lead, u, matched, kinds)
                     for u in range(len(profile.units))]
            if any(units):
                rows.append((f, lead, units, m.pattern))
    n = len(profile.units)
    return Composites(followers=np.array([r[0] for r in rows], dtype=np.int64),
                      leaders=np.array([r[1] for r in rows], dtype=np.int64),
                      units=np.array([r[2] for r in rows], dtype=bool).reshape(-1, n),
                      patterns=tuple(r[3] for r in rows))
