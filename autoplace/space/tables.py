"""The array tables of a compiled space: op choices with their times, and edges.

Split from :mod:`autoplace.space.compiled` to keep each part small; only
:class:`~autoplace.space.compiled.SearchSpace` uses these classes (as its bases).
"""

from __future__ import annotations

import functools

import numba
import numpy as np

from autoplace.graph import GraphError, OpGraph
from autoplace.hardware.profile import COPY_MODES, WEIGHT_MODES, Profile, ProfileError
from autoplace.space.capability import capable, flops_per_s

#: choice keys (op groups x units x scopes x weight placements) up to which
#: :meth:`ChoiceTables.choice_index` looks choices up in a table of every key, not by
#: binary search in the sorted ones (on a mesh of thousands of PEs there are billions)
DENSE_CHOICE_KEYS = 1 << 16


def roofline_seconds(flops, internal, inputs, weights, throughput, bw_scope, bw_default,
                     bw_weights, launch):
    """An op's roofline time (docs/simulator.md, "Op time"): ``launch + max(flops /
    throughput, internal / bw_scope + inputs / bw_default + weights / bw_weights)``, where
    ``internal`` bytes are its reads from other ops plus its output, ``inputs`` its graph
    inputs and ``weights`` its weights, read where they are held. Works on arrays."""
    memory = internal / bw_scope + inputs / bw_default + weights / bw_weights
    return launch + np.maximum(flops / throughput, memory)


def _group_choices(profile: Profile, allowed: tuple[int, ...],
                   weighty: bool) -> tuple[np.ndarray, ...]:
    """Unit, scope and weight placement (1: resident) of each choice of an op (with
    weights, if ``weighty``) on the units ``allowed``, in profile order. An op without
    weights has one choice per (unit, scope); with weights, one per weight placement the
    unit supports, except in the default scope, where resident and streamed weights are one
    and the same."""
    sidx, default, out = profile.scope_index, profile.default_scope, []
    for u in allowed:  # (ascending: profile order)
        unit = profile.units[u]
        first = 0 if "streamed" in unit.weights else 1
        for s in profile.scopes_of(unit.name):
            if not weighty or s == default:
                out.append((u, sidx[s], first if weighty else 0))
            else:
                out += [(u, sidx[s], w) for w, m in enumerate(WEIGHT_MODES) if m in unit.weights]
    return tuple(np.array(x, dtype=np.int64).reshape(-1) for x in zip(*out)) if out else \
        (np.zeros(0, dtype=np.int64),) * 3


class Measured:
    """What a profiled graph measured, resolved against a profile's units.

    ``seconds[r, u]``: op ``rows[r]``'s measured time on unit ``u`` (NaN: not measured,
    the roofline applies); ``barred[i]``: the units op ``i`` may not run on (a measured
    ``None``, or a co-location group some other member of which they cannot run). A key
    of an op's ``latency_us`` names a unit, else every unit of that ``class``; unit names
    win over class labels.
    """

    def __init__(self, graph: OpGraph, profile: Profile, capable: np.ndarray):
        self.rows = [i for i, op in enumerate(graph.ops) if op.latency_us]
        self._row = {i: r for r, i in enumerate(self.rows)}
        n_units = len(profile.units)
        self.seconds = np.full((len(self.rows), n_units), np.nan)
        cannot = np.zeros((len(self.rows), n_units), dtype=bool)
        labels: dict[str, list[int]] = {}
        for u, unit in enumerate(profile.units):
            labels.setdefault(unit.label, []).append(u)
        for r, i in enumerate(self.rows):
            op = graph.ops[i]
            for key, us in sorted(op.latency_us.items(), key=lambda kv: kv[0] in
                                  profile.unit_index):  # class labels first, then units
                units = [profile.unit_index[key]] if key in profile.unit_index else \
                    labels.get(key)
                if units is None:
                    raise ProfileError(f"graph {graph.name}: op {op.name!r}: latency_us names "
                                       f"{key!r}, which is no unit or unit class of profile "
                                       f"{profile.name} ({profile.source})")
                self.seconds[r, units] = np.nan if us is None else us * 1e-6
                cannot[r, units] = us is None
        self.barred = self._bar(graph, profile, cannot, capable)

    def _bar(self, graph: OpGraph, profile: Profile, cannot: np.ndarray,
             accepts: np.ndarray) -> list[tuple]:
        """Per op, the units it may not run on, co-location groups taken into account."""
        members: dict[str, list[int]] = {}
        for i, op in enumerate(graph.ops):
            if op.group:
                members.setdefault(op.group, []).append(i)
        if not self.rows and not members:  # an unprofiled graph: nothing barred
            return [()] * len(graph.ops)
        able = accepts.copy()
        able[self.rows] &= ~cannot
        for name, ops in members.items():
            common = able[ops].all(axis=0)
            if not common.any():
                raise ProfileError(f"graph {graph.name}: co-location group {name!r}: no unit "
                                   f"of profile {profile.name} may run all of its ops")
            able[ops] = common
        for i in np.flatnonzero(accepts.any(axis=1) & ~able.any(axis=1)):
            op = graph.ops[i]
            raise GraphError(f"graph {graph.name}: op {op.name!r}: its measured times "
                             f"(latency_us) are null on every unit of {profile.name} that "
                             f"runs {op.kind} ops: none is left to run it")
        return [tuple(np.flatnonzero(accepts[i] & ~able[i]).tolist())
                for i in range(len(graph.ops))]

    def apply(self, op: int, units: np.ndarray, dur: np.ndarray) -> np.ndarray:
        """``dur`` (op ``op``'s time per choice, on ``units``) with measured times where
        the graph has them."""
        r = self._row.get(op)
        if r is None:
            return dur
        known = self.seconds[r, units]
        return np.where(np.isnan(known), dur, known)


class ChoiceTables:
    """Per-op choice tables: ``n_choices``, ``c_unit``, ``c_scope``, ``c_resident`` (1 where
    the op's weights live in its scope), ``c_dur``."""

    def _build_choices(self, graph: OpGraph, profile: Profile) -> None:
        self.n_ops = len(graph.ops)
        able = capable(graph, profile)
        self.measured = Measured(graph, profile, able)
        for i, units in enumerate(self.measured.barred):
            able[i, list(units)] = False
        keys = [(op.weight_bytes > 0, tuple(np.flatnonzero(able[i]).tolist()))
                for i, op in enumerate(graph.ops)]
        groups = sorted(set(keys))
        number = {k: g for g, k in enumerate(groups)}
        self._op_group = np.array([number[k] for k in keys], dtype=np.int64)
        table = [_group_choices(profile, units, w) for w, units in groups]
        if any(not len(t[0]) for t in table):  # the loader rejects scope-less units
            bad = next(op for i, op in enumerate(graph.ops) if not len(table[self._op_group[i]][0]))
            raise ProfileError(f"{profile.source}: no unit that may run op {bad.name!r} "
                               "can write any scope")
        self.n_choices = np.array([len(table[g][0]) for g in self._op_group], dtype=np.int64)
        width = int(self.n_choices.max(initial=1))
        shape = (self.n_ops, width)
        self.c_unit, self.c_scope = np.zeros(shape, np.int64), np.zeros(shape, np.int64)
        self.c_resident, self.c_dur = np.zeros(shape, np.int64), np.zeros(shape)
        thr = flops_per_s(graph, profile)
        bw = np.array([s.bandwidth_bps for s in profile.scopes])
        for i, op in enumerate(graph.ops):
            units, scopes, resident = table[self._op_group[i]]
            pad = np.zeros(width - len(units), dtype=np.int64)
            dur = self._op_seconds(op, units, scopes, resident, thr[i], bw, profile)
            dur = self.measured.apply(i, units, dur)
            for out, values in ((self.c_unit, units), (self.c_scope, scopes),
                                (self.c_resident, resident), (self.c_dur, dur)):
                out[i] = np.concatenate([values, values[pad]])
        #: the scope each choice's weights occupy for the whole run
        self.c_wscope = np.where(self.c_resident > 0, self.c_scope, self.default_scope)
        self.weight_bytes = np.array([op.weight_bytes for op in graph.ops], dtype=np.float64)
        self.input_bytes = np.array([op.input_bytes for op in graph.ops], dtype=np.float64)
        self._index_choices(table, len(profile.units), len(profile.scopes))

    def _op_seconds(self, op, units, scopes, resident, thr, bw, profile: Profile) -> np.ndarray:
        """Roofline time of ``op`` on each choice, plus the launch overhead.

        ``overhead + max(flops / throughput, memory)`` with ``memory = internal / bw(scope)
        + inputs / bw(default) + weights / bw(scope if resident else default)``, where
        internal bytes are the op's reads from other ops plus its output. A kernel a unit's
        calibrated table knows (``unit.kernel_s[op.kernel_key]``) takes its measured time
        instead, whatever the scope (docs/simulator.md).
        """
        internal = op.bytes_read - op.external_bytes + op.output_bytes
        weight_bw = np.where(resident > 0, bw[scopes], bw[self.default_scope])
        dur = roofline_seconds(op.flops, internal, op.input_bytes, op.weight_bytes,
                               thr[units], bw[scopes],
                               bw[self.default_scope], weight_bw, self.launch[units])
        key = op.kernel_key
        for u in np.unique(units):
            known = profile.units[u].kernel_s.get(key) if profile.units[u].kernel_s else None
            if known is not None:
                dur[units == u] = self.launch[u] + known
        return dur

    def _index_choices(self, table: list, n_units: int, n_scopes: int) -> None:
        """Sorted keys (group, unit, scope, resident) -> choice index (:meth:`choice_index`)."""
        self._span = n_units * n_scopes * 2
        keys = [g * self._span + (u * n_scopes + s) * 2 + w
                for g, (u, s, w) in enumerate(table)]
        vals = [np.arange(len(t[0]), dtype=np.int64) for t in table]
        keys, vals = np.concatenate(keys), np.concatenate(vals)
        order = np.argsort(keys)
        self._choice_keys, self._choice_vals = keys[order], vals[order]
        size = len(table) * self._span  # every key: a table of them when it is small
        self._choice_table = np.full(size if size <= DENSE_CHOICE_KEYS else 0, -1, np.int64)
        if len(self._choice_table):
            self._choice_table[keys] = vals

    def choice_index(self, ops, units, scopes, resident=None) -> np.ndarray:
        """The choice index of each (op, unit index, scope index, weights resident), -1
        where it is none. Where ``resident`` is None or has no such choice, the other
        weight placement is taken (streamed first)."""
        base = (self._op_group[np.asarray(ops)] * self._span
                + (np.asarray(units, dtype=np.int64) * len(self.scopes) + np.asarray(scopes)) * 2)
        want = np.zeros_like(base) if resident is None else np.asarray(resident, dtype=np.int64)
        first = self._lookup(base + want)
        return np.where(first >= 0, first, self._lookup(base + 1 - want))

    def _lookup(self, key: np.ndarray) -> np.ndarray:
        table = self._choice_table
        if len(table):  # (a key out of range is no choice, as in the sorted keys)
            return np.where((key >= 0) & (key < len(table)),
                            table[np.clip(key, 0, len(table) - 1)], -1)
        pos = np.minimum(np.searchsorted(self._choice_keys, key), len(self._choice_keys) - 1)
        return np.where(self._choice_keys[pos] == key, self._choice_vals[pos], -1)

    def choice_of(self, op: int, unit: str, scope: str, weights: str | None = None) -> int:
        """The choice index of op ``op`` on named ``unit`` and ``scope`` with ``weights``
        (``"streamed"``/``"resident"``; None: either) placed so (-1: not a choice)."""
        u, s = self.profile.unit_index.get(unit), self.profile.scope_index.get(scope)
        if u is None or s is None or (weights is not None and weights not in WEIGHT_MODES):
            return -1
        if weights is None:
            return int(self.choice_index([op], [u], [s])[0])
        j = int(self.choice_index([op], [u], [s], [WEIGHT_MODES.index(weights)])[0])
        return j if j >= 0 and self.c_resident[op, j] == WEIGHT_MODES.index(weights) else -1

    def seconds_of(self, op: int, unit: str, scope: str, weights: str) -> float:
        """Op ``op``'s time on named ``unit`` writing ``scope`` with ``weights`` placed so (in
        the default scope, resident and streamed weights are one choice)."""
        choice = self.choice_of(op, unit, scope, weights)
        if choice < 0:
            choice = self.choice_of(op, unit, scope)
        return float(self.c_dur[op, choice])

    @functools.cached_property
    def op_choices(self) -> list[list[tuple[str, str, str]]]:
        """Each op's choices by name, ``(unit, scope, weights)`` (built on first use: big
        on a mesh)."""
        return [[(self.units[u], self.scopes[s], WEIGHT_MODES[w])
                 for u, s, w in zip(self.c_unit[i, :n].tolist(), self.c_scope[i, :n].tolist(),
                                    self.c_resident[i, :n].tolist())]
                for i, n in enumerate(self.n_choices.tolist())]

    def real_choices(self) -> np.ndarray:
        """``[ops, width]``: True for the real (not padding) choices."""
        return np.arange(self.c_dur.shape[1]) < self.n_choices[:, None]

    def fastest(self) -> np.ndarray:
        """Each op's shortest time over its choices."""
        return np.where(self.real_choices(), self.c_dur, np.inf).min(axis=1)


class EdgeTables:
    """Edge arrays, adjacency, and the copy modes each edge can use."""

    def _build_edges(self, graph: OpGraph) -> None:
        g = graph
        self.n_edges = len(g.edges)
        self.src = np.array([e.src for e in g.edges], dtype=np.int64)
        self.dst = np.array([e.dst for e in g.edges], dtype=np.int64)
        self.nbytes = np.array([e.nbytes for e in g.edges], dtype=np.float64)
        #: per edge, the measured time of its copy in seconds (NaN: the route's model)
        self.transfer_s = np.array([np.nan if e.transfer_us is None else 1e-6 * e.transfer_us
                                    for e in g.edges], dtype=np.float64)
        self.out_bytes = np.array([op.output_bytes for op in g.ops], dtype=np.float64)
        self.edge_names = [f"{g.ops[e.src].name}->{g.ops[e.dst].name}" for e in g.edges]
        self.in_edges, self.out_edges = g.in_edges(), g.out_edges()
        self.has_consumers = np.array([bool(x) for x in self.out_edges])
        # in-edges of each op in edge order, as CSR (for the compiled simulator)
        order = np.argsort(self.dst, kind="stable")
        self.in_ptr = np.searchsorted(self.dst[order], np.arange(self.n_ops + 1))
        self.in_idx = order.astype(np.int64)

    def copy_seconds(self, k: np.ndarray, rid: np.ndarray) -> np.ndarray:
        """The unloaded time of edge ``k``'s copy along route ``rid``: measured where the
        graph has it, else the route's ``latency + bytes * seconds per byte``."""
        r = self.routes
        modelled = r.lat[rid] + self.nbytes[k] * r.inv[rid]
        return np.where(np.isnan(self.transfer_s[k]), modelled, self.transfer_s[k])

    def hop_seconds(self, k: int, rid: int) -> np.ndarray:
        """The time of each hop of edge ``k``'s copy along route ``rid``: modelled, scaled
        to sum to the measured transfer time where the graph has one."""
        r, n = self.routes, int(self.routes.length[rid])
        secs = r.hop_lat[rid, :n] + self.nbytes[k] / r.hop_bw[rid, :n]
        measured = self.transfer_s[k]
        if np.isnan(measured):
            return secs
        total = secs.sum()
        return secs * (measured / total) if total > 0 else np.full(n, measured / max(n, 1))

    def critical_path(self, seconds: np.ndarray) -> float:
        """The longest path through the graph with op ``i`` taking ``seconds[i]`` and
        copies free: with each op at its fastest, no placement can beat it."""
        return float(self.longest_paths(np.asarray(seconds, dtype=np.float64)[None, :],
                                        np.zeros((1, self.n_edges)))[0])

    def longest_paths(self, op_s: np.ndarray, copy_s: np.ndarray) -> np.ndarray:
        """Per row, the longest path with op ``i`` taking ``op_s[b, i]`` and edge ``k``
        ``copy_s[b, k]`` (no contention for resources)."""
        return _longest_paths(np.ascontiguousarray(op_s, dtype=np.float64),
                              np.ascontiguousarray(copy_s, dtype=np.float64),
                              self.src, self.in_ptr, self.in_idx)

    @functools.cached_property
    def edge_modes(self) -> list[list[str]]:
        """The copy modes each edge could use over all choices of its ends; an edge with
        two or more is a search parameter."""
        reach = {}
        out = []
        for e in self.graph.edges:
            key = (self._op_group[e.src], self._op_group[e.dst])
            if key not in reach:
                reach[key] = self._modes_for(e.src, e.dst)
            out.append(reach[key])
        return out

    def _modes_for(self, i: int, j: int) -> list[str]:
        """Modes with a route from some scope of op ``i``'s choices to a different scope
        of op ``j``'s."""
        a = np.unique(self.c_scope[i, :self.n_choices[i]])
        b = np.unique(self.c_scope[j, :self.n_choices[j]])
        return [m for g, m in zip(self._scope_graphs, COPY_MODES) if _reaches(g, a, b)]

    @functools.cached_property
    def _scope_graphs(self) -> list:
        """Per mode, the scopes' adjacency over the copy paths that support it."""
        from scipy.sparse import csr_matrix

        idx, n, out = self.profile.scope_index, len(self.scopes), []
        for mode in COPY_MODES:
            use = [c for c in self.profile.copies if mode in c.modes]
            rows, cols = [idx[c.src] for c in use], [idx[c.dst] for c in use]
            out.append(csr_matrix((np.ones(len(use)), (rows, cols)), shape=(n, n)))
        return out


@numba.njit(cache=True, nogil=True)
def _longest_paths(op_s, copy_s, src, in_ptr, in_idx):  # pragma: no cover - compiled
    B, n = op_s.shape
    out, finish = np.zeros(B), np.zeros(n)
    for b in range(B):
        longest = 0.0
        for i in range(n):
            ready = 0.0
            for q in range(in_ptr[i], in_ptr[i + 1]):
                k = in_idx[q]
                ready = max(ready, finish[src[k]] + copy_s[b, k])
            finish[i] = ready + op_s[b, i]
            longest = max(longest, finish[i])
        out[b] = longest
    return out


def _reaches(graph, a: np.ndarray, b: np.ndarray) -> bool:
    """Whether some scope of ``b`` is reachable in one hop or more from a different scope
    of ``a`` (a scope reached only from itself counts when ``a`` has others)."""
    from scipy.sparse import csr_matrix, hstack, vstack
    from scipy.sparse.csgraph import breadth_first_order

    first = np.unique(graph[a].indices)
    if not len(first):
        return False
    n = graph.shape[0]
    source = csr_matrix((np.ones(len(first)), (np.zeros(len(first)), first)), shape=(1, n + 1))
    g = vstack([hstack([graph, csr_matrix((n, 1))]), source]).tocsr()
    reached = breadth_first_order(g, n, directed=True, return_predecessors=False)
    hit = np.intersect1d(reached[reached < n], b)
    return bool(len(np.setdiff1d(hit, a)) or (len(hit) and len(a) > 1))
