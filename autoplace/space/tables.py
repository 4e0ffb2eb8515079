"""The array tables of a compiled space: op choices with their times, and edges.

Split from :mod:`autoplace.space.compiled` to keep each part small; only
:class:`~autoplace.space.compiled.SearchSpace` uses these classes (as its bases).
"""

from __future__ import annotations

import functools

import numpy as np

from autoplace.graph import OP_KINDS, OpGraph
from autoplace.profile import COPY_MODES, Profile


def _throughput(profile: Profile) -> np.ndarray:
    """FLOP/s of each (unit, op kind)."""
    return np.array([[u.flops_per_s(k) if u.accepts_kind(k) else np.nan for k in OP_KINDS]
                     for u in profile.units])


def _kind_pairs(profile: Profile, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Unit and scope index of each choice of an op of ``kind``, in profile order."""
    sidx, units, scopes = profile.scope_index, [], []
    for u, unit in enumerate(profile.units):
        if unit.accepts_kind(kind):
            for s in profile.scopes_of(unit.name):
                units.append(u)
                scopes.append(sidx[s])
    return np.array(units, dtype=np.int64), np.array(scopes, dtype=np.int64)


class ChoiceTables:
    """Per-op choice tables: ``n_choices``, ``c_unit``, ``c_scope``, ``c_dur``."""

    def _build_choices(self, graph: OpGraph, profile: Profile) -> None:
        self.n_ops = len(graph.ops)
        kinds = sorted({op.kind for op in graph.ops}, key=OP_KINDS.index)
        pairs = {k: _kind_pairs(profile, k) for k in kinds}
        if any(not len(pairs[k][0]) for k in kinds):  # the loader rejects scope-less units
            bad = next(op for op in graph.ops if not len(pairs[op.kind][0]))
            from autoplace.profile import ProfileError

            raise ProfileError(f"{profile.source}: no unit accepting op {bad.name!r} "
                               "can write any scope")
        self.n_choices = np.array([len(pairs[op.kind][0]) for op in graph.ops], dtype=np.int64)
        width = int(self.n_choices.max(initial=1))
        shape = (self.n_ops, width)
        self.c_unit = np.zeros(shape, dtype=np.int64)
        self.c_scope = np.zeros(shape, dtype=np.int64)
        self.c_dur = np.zeros(shape)
        thr = _throughput(profile)
        bw = np.array([s.bandwidth_bps for s in profile.scopes])
        for i, op in enumerate(graph.ops):
            units, scopes = pairs[op.kind]
            n = len(units)
            pad = np.zeros(width - n, dtype=np.int64)
            self.c_unit[i] = np.concatenate([units, units[pad]])
            self.c_scope[i] = np.concatenate([scopes, scopes[pad]])
            dur = self._op_seconds(op, units, scopes, thr, bw, profile)
            self.c_dur[i] = np.concatenate([dur, dur[pad]])
        self._index_choices(graph, pairs, len(profile.units), len(profile.scopes))

    def _op_seconds(self, op, units, scopes, thr, bw, profile: Profile) -> np.ndarray:
        """Roofline time of ``op`` on each (unit, scope) choice, plus the launch overhead.

        ``overhead + max(flops / throughput, internal / bw(scope) + external / bw(default))``
        where internal bytes are the op's reads from other ops plus its output. A kernel a
        unit's calibrated table knows (``unit.kernel_s[op.kernel_key]``) takes its measured
        time instead, whatever the scope (docs/simulator.md).
        """
        compute = op.flops / thr[units, OP_KINDS.index(op.kind)]
        internal = op.bytes_read - op.external_bytes + op.output_bytes
        memory = internal / bw[scopes] + op.external_bytes / bw[self.default_scope]
        dur = self.launch[units] + np.maximum(compute, memory)
        for u in np.unique(units):
            known = profile.units[u].kernel_s.get(op.kernel_key)
            if known is not None:
                dur[units == u] = self.launch[u] + known
        return dur

    def _index_choices(self, graph: OpGraph, pairs: dict, n_units: int, n_scopes: int) -> None:
        """Sorted keys (kind, unit, scope) -> choice index, for :meth:`choice_index`."""
        self._pair_span = n_units * n_scopes
        self._op_kind = np.array([OP_KINDS.index(op.kind) for op in graph.ops], dtype=np.int64)
        keys, vals = [], []
        for kind, (units, scopes) in pairs.items():
            keys.append(OP_KINDS.index(kind) * self._pair_span + units * n_scopes + scopes)
            vals.append(np.arange(len(units), dtype=np.int64))
        keys, vals = np.concatenate(keys), np.concatenate(vals)
        order = np.argsort(keys)
        self._choice_keys, self._choice_vals = keys[order], vals[order]

    def choice_index(self, ops, units, scopes) -> np.ndarray:
        """The choice index of each (op, unit index, scope index), -1 where it is none."""
        n_scopes = len(self.scopes)
        key = (self._op_kind[np.asarray(ops)] * self._pair_span
               + np.asarray(units, dtype=np.int64) * n_scopes + np.asarray(scopes))
        pos = np.minimum(np.searchsorted(self._choice_keys, key), len(self._choice_keys) - 1)
        return np.where(self._choice_keys[pos] == key, self._choice_vals[pos], -1)

    def choice_of(self, op: int, unit: str, scope: str) -> int:
        """The choice index of op ``op`` on named ``unit`` and ``scope`` (-1: not a choice)."""
        u, s = self.profile.unit_index.get(unit), self.profile.scope_index.get(scope)
        if u is None or s is None:
            return -1
        return int(self.choice_index([op], [u], [s])[0])

    @functools.cached_property
    def op_choices(self) -> list[list[tuple[str, str]]]:
        """Each op's choices by name, ``(unit, scope)`` (built on first use: big on a mesh)."""
        return [[(self.units[u], self.scopes[s])
                 for u, s in zip(self.c_unit[i, :n].tolist(), self.c_scope[i, :n].tolist())]
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
        self.out_bytes = np.array([op.output_bytes for op in g.ops], dtype=np.float64)
        self.edge_names = [f"{g.ops[e.src].name}->{g.ops[e.dst].name}" for e in g.edges]
        self.in_edges, self.out_edges = g.in_edges(), g.out_edges()
        self.has_consumers = np.array([bool(x) for x in self.out_edges])
        # in-edges of each op in edge order, as CSR (for the compiled simulator)
        order = np.argsort(self.dst, kind="stable")
        self.in_ptr = np.searchsorted(self.dst[order], np.arange(self.n_ops + 1))
        self.in_idx = order.astype(np.int64)

    def critical_path(self, seconds: np.ndarray) -> float:
        """The longest path through the graph with op ``i`` taking ``seconds[i]`` and
        copies free: with each op at its fastest, no placement can beat it."""
        finish = np.zeros(self.n_ops)
        for i in range(self.n_ops):
            ready = max((finish[self.src[k]] for k in self.in_edges[i]), default=0.0)
            finish[i] = ready + seconds[i]
        return float(finish.max(initial=0.0))

    @functools.cached_property
    def edge_modes(self) -> list[list[str]]:
        """The copy modes each edge could use over all choices of its ends; an edge with
        two or more is a search parameter."""
        reach = {}
        out = []
        for e in self.graph.edges:
            key = (self._op_kind[e.src], self._op_kind[e.dst])
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
