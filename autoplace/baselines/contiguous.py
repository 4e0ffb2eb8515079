"""Contiguous splits for the block model: the graph's inseparable blocks in a topological order,
and the split of that order over a class of block units with the smallest period.

The block model (docs/simulator.md) asks each ``block`` unit to run one contiguous set of ops;
a range of a topological order always is one. :func:`best_split` gives each unit of the
profile's biggest class of interchangeable block units (``SearchSpace.symmetries``) at most
one range of :func:`inseparable_blocks` and the host the rest, minimising the stream's period
(docs/simulator.md, "Throughput"): the busiest block unit's load (its ops, plus each input
from outside once per producer and each output read outside once, as the block model charges
them) or the host's work over its cores. It is a dynamic program over positions x units used,
bisected on the period, exact for that model on that order when every edge out of an op costs
the same (Tarnawski et al.'s instances; ``tests/baselines/test_contiguous.py`` checks it against
every such split of small graphs); a unit's memory holds its ops' weights and twice (a stream double
buffers) their outputs. It is what their throughput DP computes on a topological order instead
of over every downward-closed set.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autoplace.graph import topological_order
from autoplace.space import Placement, SearchSpace

#: above this many inseparable blocks the split's tables (blocks squared) are not built
MAX_BLOCKS = 2000
_ASYNC = 1  # the copy mode the split's placements use (async where the route allows)


def inseparable_blocks(space: SearchSpace) -> list[np.ndarray]:
    """The ops in blocks that one unit must run together: each co-location group, merged
    with the groups it reaches and that reach it (so the blocks form a DAG), in a
    topological order of that DAG (the block holding the first op in program order first
    among the ready ones)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    rep = np.arange(space.n_ops)
    followers, leaders = space.colocated
    rep[followers] = leaders
    n = space.n_ops
    graph = csr_matrix((np.ones(space.n_edges), (rep[space.src], rep[space.dst])), shape=(n, n))
    _, comp = connected_components(graph, directed=True, connection="strong")
    comp = comp[rep]
    first: dict[int, int] = {}
    for i, c in enumerate(comp.tolist()):
        first.setdefault(c, i)  # each component's first op in program order: its priority
    order = topological_order(first, zip(comp[space.src].tolist(), comp[space.dst].tolist()))
    return [np.flatnonzero(comp == c) for c in order]


@dataclass(frozen=True)
class _Order:
    """The blocks of a split and, per op, its block's position and its two choices."""

    blocks: list[np.ndarray]
    pos: np.ndarray  # op -> position of its block
    on_unit: np.ndarray  # op -> its choice on the class's first unit (-1: none)
    on_host: np.ndarray  # op -> its choice on the host


#: what a split minimises: the stream's period, or the chained latency (:func:`best_split`)
GOALS = ("period", "latency")


def best_split(space: SearchSpace, goal: str = "period") -> Placement | None:
    """The split of :func:`inseparable_blocks` into ranges over the biggest class of
    interchangeable block units and the host with the least ``goal``: ``"period"``, the
    stream's period (exact for the block model on that order, module docstring), or
    ``"latency"``, the sum of every range's load and every host op's time (one inference's
    latency if nothing ran in parallel: a seed for the latency objective, not its optimum).
    None without such a class, when the host cannot run every op, or above
    :data:`MAX_BLOCKS` blocks."""
    return best_splits(space, (goal,))[goal]


def best_splits(space: SearchSpace, goals=GOALS) -> dict[str, Placement | None]:
    """:func:`best_split` for each of ``goals``, the loads tabulated once."""
    bad = [g for g in goals if g not in GOALS]
    if bad:
        raise ValueError(f"goal must be 'period' or 'latency', got {bad[0]!r}")
    units = _block_class(space)
    order = _order(space, units) if units else None
    if order is None:
        return dict.fromkeys(goals)
    loads = _Loads.of(space, order, units[0])
    return {g: _placement(space, order, units, loads.split(len(units)) if g == "period"
                          else loads.chain(len(units))) for g in goals}


def _placement(space: SearchSpace, order: _Order, units: list[int],
               ranges: list[tuple[int, int]]) -> Placement:
    """Range ``k`` of blocks on ``units[k]`` in its home scope, the rest on the host."""
    choice = order.on_host.copy()
    for k, (a, b) in enumerate(ranges):
        ops = np.concatenate(order.blocks[a:b])
        choice[ops] = space.choice_index(ops, [units[k]] * len(ops),
                                         [_home(space, units[k])] * len(ops), [1] * len(ops))
    return space.decode(choice, np.full(space.n_edges, _ASYNC, dtype=np.int64))


def _block_class(space: SearchSpace) -> list[int]:
    block = [sym.units for sym in space.symmetries
             if space.profile.units[sym.units[0]].execution == "block"]
    return list(max(block, key=len)) if block else []


def _home(space: SearchSpace, unit: int) -> int:
    prof = space.profile
    return prof.scope_index[prof.home_scope(space.units[unit])]


def _order(space: SearchSpace, units: list[int]) -> _Order | None:
    blocks = inseparable_blocks(space)
    if len(blocks) > MAX_BLOCKS:
        return None
    pos = np.empty(space.n_ops, dtype=np.int64)
    for q, ops in enumerate(blocks):
        pos[ops] = q
    ops = np.arange(space.n_ops)
    on_host = space.choice_index(ops, [space.host] * space.n_ops,
                                 [_home(space, space.host)] * space.n_ops)
    if (on_host < 0).any():
        return None
    on_unit = space.choice_index(ops, [units[0]] * space.n_ops,
                                 [_home(space, units[0])] * space.n_ops, [1] * space.n_ops)
    return _Order(blocks, pos, on_unit, on_host)


@dataclass(frozen=True)
class _Loads:
    """``load[a, b]``: a unit's load running blocks ``[a, b)`` (inf where it cannot: an op
    it does not run, or memory it lacks); per block, the host's work and longest op."""

    load: np.ndarray
    host_work: np.ndarray
    host_longest: np.ndarray
    cores: float

    @classmethod
    def of(cls, space: SearchSpace, order: _Order, unit: int) -> _Loads:
        m, ops = len(order.blocks), np.arange(space.n_ops)
        fast = np.where(order.on_unit >= 0, space.c_dur[ops, np.maximum(order.on_unit, 0)],
                        np.inf)
        slow = space.c_dur[ops, order.on_host]
        load = _span(np.bincount(order.pos, fast, m)) + _edge_loads(space, order, unit)
        need = _span(np.bincount(order.pos, space.weight_bytes + 2 * space.out_bytes, m))
        load = np.where(need <= space.capacity[_home(space, unit)], load, np.inf)
        longest = np.zeros(m)
        np.maximum.at(longest, order.pos, slow)
        cores = float(space.profile.units[space.host].cores)
        return cls(load, np.bincount(order.pos, slow, m), longest, cores)

    def split(self, k: int) -> list[tuple[int, int]]:
        """The ranges of blocks, at most ``k``, the units run (the host runs the rest)."""
        lo, hi = 0.0, self._host_period()
        if not self._fits(lo, k)[0]:
            for _ in range(60):  # bisection to a relative 1e-12 of the all-host period
                mid = 0.5 * (lo + hi)
                lo, hi = (lo, mid) if self._fits(mid, k)[0] else (mid, hi)
                if hi - lo <= 1e-12 * hi:
                    break
        return self._fits(hi, k)[1]

    def chain(self, k: int) -> list[tuple[int, int]]:
        """The ranges of blocks, at most ``k``, with the least sum of their loads and the
        host's work on the rest."""
        return _least(self.host_work, self.load, k)[1]

    def _host_period(self) -> float:
        """The period with every block on the host."""
        pooled = self.host_work.sum() / self.cores if self.cores > 0 else 0.0
        return float(max(pooled, self.host_longest.max(initial=0.0)))

    def _fits(self, period: float, k: int) -> tuple[bool, list[tuple[int, int]]]:
        """Whether some split reaches ``period`` (ranges of loads up to it, the least host
        work over its cores no more than it), and its ranges."""
        per_core = self.host_work / self.cores if self.cores > 0 else np.zeros_like(
            self.host_work)
        host = np.where(self.host_longest <= period, per_core, np.inf)
        least, ranges = _least(host, np.where(self.load <= period, 0.0, np.inf), k)
        return least <= period * (1 + 1e-12), ranges


def _least(host: np.ndarray, cost: np.ndarray, k: int) -> tuple[float, list[tuple[int, int]]]:
    """The least sum over blocks of ``host[q]`` for each block on the host and ``cost[a, b]``
    for each range ``[a, b)`` on a unit, with at most ``k`` ranges, and those ranges:
    ``g[b, j]`` covers blocks ``[0, b)`` with ``j`` ranges."""
    m = len(host)
    g = np.full((m + 1, k + 1), np.inf)
    g[0, 0] = 0.0
    back = np.full((m + 1, k + 1), -1, dtype=np.int64)  # -1: block b-1 on the host
    for b in range(1, m + 1):
        g[b] = g[b - 1] + host[b - 1]
        total = g[:b, :k] + cost[:b, b, None]
        start = total.argmin(axis=0)
        value = total[start, np.arange(k)]
        better = value < g[b, 1:]
        g[b, 1:][better] = value[better]
        back[b, 1:][better] = start[better]
    j = int(g[m].argmin())
    return float(g[m, j]), _ranges(back, m, j) if np.isfinite(g[m, j]) else []


def _ranges(back: np.ndarray, m: int, j: int) -> list[tuple[int, int]]:
    out, b = [], m
    while b > 0:
        a = back[b, j]
        if a < 0:
            b -= 1
            continue
        out.append((int(a), b))
        b, j = int(a), j - 1
    return out[::-1]


def _span(per_block: np.ndarray) -> np.ndarray:
    """``out[a, b]`` = sum of ``per_block[a:b]`` (``a < b``; inf elsewhere, and where one of
    them is inf)."""
    m = len(per_block)
    finite = np.isfinite(per_block)
    c = np.concatenate([[0.0], np.cumsum(np.where(finite, per_block, 0.0))])
    bad = np.concatenate([[0], np.cumsum(~finite)])
    ok = (np.arange(m + 1)[None, :] > np.arange(m + 1)[:, None]) & (bad[None, :] == bad[:, None])
    return np.where(ok, c[None, :] - c[:, None], np.inf)


def _edge_loads(space: SearchSpace, order: _Order, unit: int) -> np.ndarray:
    """``out[a, b]``: what a unit running blocks ``[a, b)`` spends on transfers: each input
    from outside once per producer, each output read outside once (the dearest edge)."""
    m = len(order.blocks)
    secs = _crossing_seconds(space, unit)
    ps, pd = order.pos[space.src], order.pos[space.dst]
    keep = ps < pd  # an edge inside a block never crosses
    src, ps, pd, secs = space.src[keep], ps[keep], pd[keep], secs[keep]
    cost = np.zeros(space.n_ops)
    np.maximum.at(cost, src, secs)  # an op's output, read outside: its dearest edge
    last = np.full(space.n_ops, -1, dtype=np.int64)
    np.maximum.at(last, src, pd)
    diff = np.zeros((m + 2, m + 2))
    has = last >= 0
    np.add.at(diff, (order.pos[has], order.pos[has] + 1), cost[has])  # outputs: [a, b) holds
    np.add.at(diff, (order.pos[has], last[has] + 1), -cost[has])  # the op, b <= last read
    outputs = np.cumsum(diff, axis=1)[::-1].cumsum(axis=0)[::-1][:m + 1, :m + 1]
    return outputs + _input_loads(src, ps, pd, cost, m)


def _input_loads(src, ps, pd, cost, m: int) -> np.ndarray:
    """``out[a, b]``: per producer before ``a`` with a consumer in ``[a, b)``, its cost."""
    diff = np.zeros((m + 2, m + 2))
    by_producer = np.lexsort((pd, src))
    src, ps, pd = src[by_producer], ps[by_producer], pd[by_producer]
    prev = np.concatenate([[-1], src[:-1]])
    before = np.where(src == prev, np.concatenate([[0], pd[:-1]]), ps)
    first = before < pd  # consumers after the previous one: ranges a in (before, pd]
    rows_lo, rows_hi, col, c = before[first] + 1, pd[first] + 1, pd[first] + 1, cost[src[first]]
    np.add.at(diff, (rows_lo, col), c)
    np.add.at(diff, (rows_hi, col), -c)
    return np.cumsum(np.cumsum(diff, axis=0), axis=1)[:m + 1, :m + 1]


def _crossing_seconds(space: SearchSpace, unit: int) -> np.ndarray:
    """Each edge's transfer time when it crosses to or from ``unit``'s home scope: the
    measured one, else the route's unloaded time from the default scope."""
    home, r = _home(space, unit), space.routes
    rid = r.id(space.default_scope, home, _ASYNC)
    modelled = r.lat[rid] + space.nbytes * r.inv[rid]
    return np.where(np.isnan(space.transfer_s), modelled, space.transfer_s)
