"""Copy routes between scopes, found on demand and kept as padded hop arrays.

A copy from scope ``a`` to scope ``b`` in mode ``m`` follows the cheapest route of copy paths
that all support ``m`` (cost of a path: ``latency + 1 MiB / bandwidth``). Routes are found
only for the (a, b, m) a caller asks for, and remembered: no all-pairs table is built.

- A profile without a ``[mesh]`` table: Dijkstra over the copy paths
  (:func:`scipy.sparse.csgraph.dijkstra`), one run per (source scope, mode) asked for.
- A ``[mesh]`` profile: from the grid itself. Between two PEs, the cheaper of the
  dimension-order route over neighbour links (along the row first, then the column) and the
  route up to the shared scope and down again (ties go to the links); to or from a shared
  scope, through the PE's uplink, then Dijkstra among the top-level scopes. The same costs
  as Dijkstra over every path, in memory that grows with the routes asked for, not with the
  square of the PEs. A profile whose own ``[[copies]]`` touch a PE scope is routed by
  Dijkstra over everything.
"""

from __future__ import annotations

import numpy as np

from autoplace.hardware.profile import COPY_MODES, CopyPath, MeshGrid, Profile

MIB = 1 << 20
Route = tuple[CopyPath, ...]


def path_cost(path: CopyPath) -> float:
    """What a route minimises, per hop: the time to copy 1 MiB."""
    return path.seconds(MIB)


class GraphRoutes:
    """Cheapest routes by Dijkstra over the copy paths among ``scopes``."""

    def __init__(self, scopes: list[str], copies: list[CopyPath]):
        from scipy.sparse import csr_matrix

        self.names = scopes
        self.index = {s: i for i, s in enumerate(scopes)}
        self.paths = {(c.src, c.dst): c for c in copies}
        n = len(scopes)
        self.graphs = []
        for mode in COPY_MODES:
            use = [c for c in copies if mode in c.modes]
            rows = [self.index[c.src] for c in use]
            cols = [self.index[c.dst] for c in use]
            self.graphs.append(csr_matrix(([path_cost(c) for c in use], (rows, cols)),
                                          shape=(n, n)))
        self._pred: dict[tuple[int, int], np.ndarray] = {}

    def _predecessors(self, a: int, mode: int) -> np.ndarray:
        pred = self._pred.get((a, mode))
        if pred is None:
            from scipy.sparse.csgraph import dijkstra

            _, pred = dijkstra(self.graphs[mode], directed=True, indices=a,
                               return_predecessors=True)
            self._pred[(a, mode)] = pred
        return pred

    def route(self, src: str, dst: str, mode: int) -> Route | None:
        """The cheapest route from ``src`` to ``dst`` in mode ``mode``, or None."""
        a, b = self.index.get(src), self.index.get(dst)
        if a is None or b is None or a == b:
            return None
        pred = self._predecessors(a, mode)
        if pred[b] < 0:
            return None
        hops, at = [], b
        while at != a:
            hops.append(self.paths[self.names[pred[at]], self.names[at]])
            at = pred[at]
        return tuple(reversed(hops))


class MeshRoutes:
    """Routes of a ``[mesh]`` profile from its grid (see the module docstring)."""

    def __init__(self, profile: Profile, grid: MeshGrid):
        self.grid, self.paths = grid, profile.copy_index
        local = {f"pe{k}.{s}" for k in range(grid.size) for s in grid.scopes}
        top = [s.name for s in profile.scopes if s.name not in local]
        self.top = GraphRoutes(top, list(profile.copies[grid.generated_copies:]))

    def _where(self, scope: str) -> tuple[int, str] | None:
        """(PE index, local suffix) of a PE scope, None for a top-level scope."""
        if scope in self.top.index:
            return None
        pe, _, suffix = scope.partition(".")
        return int(pe[2:]), suffix

    def _hops(self, names: list[str], mode: int) -> Route | None:
        hops = tuple(self.paths.get((a, b)) for a, b in zip(names, names[1:]))
        ok = all(h is not None and COPY_MODES[mode] in h.modes for h in hops)
        return hops if ok else None

    def _links(self, a: tuple[int, str], b: tuple[int, str], mode: int) -> Route | None:
        """Dimension-order route over neighbour links: along the row, then the column."""
        (pa, s), (pb, sb) = a, b
        if s != sb or s not in self.grid.link_scopes:
            return None
        cols = self.grid.cols
        (ra, ca), (rb, cb) = divmod(pa, cols), divmod(pb, cols)
        step_c, step_r = (1 if cb > ca else -1), (1 if rb > ra else -1)
        pes = [ra * cols + c for c in range(ca, cb + step_c, step_c)]
        pes += [r * cols + cb for r in range(ra + step_r, rb + step_r, step_r)]
        return self._hops([f"pe{k}.{s}" for k in pes], mode)

    def _up(self, a: tuple[int, str], mode: int) -> Route | None:
        if a[1] not in self.grid.uplink_scopes:
            return None
        return self._hops([f"pe{a[0]}.{a[1]}", self.grid.uplink_to], mode)

    def _down(self, b: tuple[int, str], mode: int) -> Route | None:
        if b[1] not in self.grid.uplink_scopes:
            return None
        return self._hops([self.grid.uplink_to, f"pe{b[0]}.{b[1]}"], mode)

    def _shared(self, src: str, dst: str, mode: int) -> Route | None:
        return () if src == dst else self.top.route(src, dst, mode)

    def route(self, src: str, dst: str, mode: int) -> Route | None:
        """The cheapest route from ``src`` to ``dst`` in mode ``mode``, or None."""
        if src == dst:
            return None
        a, b = self._where(src), self._where(dst)
        if a is None and b is None:
            return self.top.route(src, dst, mode)
        up = self._up(a, mode) if a is not None else ()
        down = self._down(b, mode) if b is not None else ()
        via = None
        if up is not None and down is not None:
            mid = self._shared(up[-1].dst if up else src, down[0].src if down else dst, mode)
            via = None if mid is None else up + mid + down
        links = self._links(a, b, mode) if a is not None and b is not None else None
        options = [r for r in (links, via) if r]
        return min(options, key=lambda r: sum(map(path_cost, r))) if options else None


#: profiles of at most this many scopes look routes up in a table of every scope pair
#: (2 * 128**2 entries at most); a mesh of thousands of scopes searches its known keys
DENSE_SCOPES = 128


class Routes:
    """Every route a space has needed, as arrays indexed by route id (0: no route).

    ``length[r]`` hops; per hop ``h < length[r]``: ``hop_res[r, h]`` (the resource that
    performs it: the host unit for ``sync``, else ``n_units`` + the DMA engine's index),
    ``hop_lat`` (s), ``hop_bw`` (bytes per s), ``hop_dst`` (scope index); ``lat[r]`` is the
    summed latency and ``inv[r]`` the summed seconds per byte (an unloaded copy of ``n``
    bytes takes ``lat + n * inv``). :meth:`ids` finds routes it has not seen yet; ``keys``
    (sorted ``(a * n_scopes + b) * 2 + mode``) and ``key_ids`` are those known so far, and,
    for a profile of at most :data:`DENSE_SCOPES` scopes, ``table[key]`` too (-1: not
    known yet; empty for more scopes, whose keys are searched).
    """

    def __init__(self, profile: Profile, engines: dict[str, int], host: int):
        self.profile, self.engines, self.host = profile, engines, host
        self.n_units, self.n_scopes = len(profile.units), len(profile.scopes)
        self.finder = _finder(profile)
        self.routes: list[Route] = [()]
        self.keys, self.key_ids = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        dense = self.n_scopes <= DENSE_SCOPES
        self.table = np.full(self.n_scopes ** 2 * len(COPY_MODES) if dense else 0, -1,
                             dtype=np.int64)
        self.length = np.zeros(1, dtype=np.int64)
        self.hop_res = np.full((1, 1), -1, dtype=np.int64)
        self.hop_dst = np.zeros((1, 1), dtype=np.int64)
        self.hop_lat, self.hop_bw = np.zeros((1, 1)), np.ones((1, 1))
        self.lat, self.inv = np.zeros(1), np.zeros(1)
        #: per route, its energy per byte: each hop reads its source scope, moves over its
        #: path and writes its destination scope
        self.joules = np.zeros(1)
        self._one: dict[int, int] = {}  # single look-ups (HEFT, names) already answered

    def ids(self, a: np.ndarray, b: np.ndarray, mode: np.ndarray) -> np.ndarray:
        """Route id of each (scope ``a``, scope ``b``, mode index) (0: none, or a == b)."""
        key = (np.asarray(a, dtype=np.int64) * self.n_scopes + b) * len(COPY_MODES) + mode
        pos = np.searchsorted(self.keys, key)
        known = pos < len(self.keys)
        known[known] = self.keys[pos[known]] == key[known]
        if not known.all():
            self._learn(np.unique(key[~known]))
            pos = np.searchsorted(self.keys, key)
        return self.key_ids[pos]

    def id(self, a: int, b: int, mode: int) -> int:
        """Route id of one (scope index, scope index, mode index)."""
        key = (int(a) * self.n_scopes + int(b)) * len(COPY_MODES) + int(mode)
        rid = self._one.get(key)
        if rid is None:
            rid = self._one[key] = int(self.ids(np.array([a]), np.array([b]),
                                                np.array([mode]))[0])
        return rid

    def _learn(self, keys: np.ndarray) -> None:
        """Find the routes of ``keys`` (new, sorted) and add them to the arrays."""
        scopes, n_modes, first = self.profile.scopes, len(COPY_MODES), len(self.routes)
        ids, new = [], []
        for key in keys.tolist():
            pair, mode = divmod(key, n_modes)
            a, b = divmod(pair, self.n_scopes)
            route = self.finder.route(scopes[a].name, scopes[b].name, mode) if a != b else None
            ids.append(first + len(new) if route else 0)
            if route:
                new.append((route, mode))
        keys_all = np.concatenate([self.keys, keys])
        order = np.argsort(keys_all, kind="stable")
        self.keys = keys_all[order]
        self.key_ids = np.concatenate([self.key_ids, np.array(ids, dtype=np.int64)])[order]
        if len(self.table):
            self.table[keys] = ids
        if new:
            self._extend(new)

    def _extend(self, new: list[tuple[Route, int]]) -> None:
        hops = max(self.hop_res.shape[1], max(len(r) for r, _ in new))
        res = np.full((len(new), hops), -1, dtype=np.int64)
        dst = np.zeros((len(new), hops), dtype=np.int64)
        lat, bw = np.zeros((len(new), hops)), np.ones((len(new), hops))
        joules = np.zeros(len(new))
        scope_index, scopes = self.profile.scope_index, self.profile.scopes
        for r, (route, mode) in enumerate(new):
            sync = COPY_MODES[mode] == "sync"
            for h, p in enumerate(route):
                res[r, h] = self.host if sync else self.n_units + self.engines[p.engine]
                lat[r, h], bw[r, h] = p.latency_s, p.bandwidth_bps
                dst[r, h] = scope_index[p.dst]
                joules[r] += (scopes[scope_index[p.src]].read_j_per_byte + p.j_per_byte
                              + scopes[dst[r, h]].write_j_per_byte)
        self.routes += [r for r, _ in new]
        self.length = np.concatenate([self.length, [len(r) for r, _ in new]])
        self.hop_res = np.concatenate([_widen(self.hop_res, hops, -1), res])
        self.hop_dst = np.concatenate([_widen(self.hop_dst, hops, 0), dst])
        self.hop_lat = np.concatenate([_widen(self.hop_lat, hops, 0.0), lat])
        self.hop_bw = np.concatenate([_widen(self.hop_bw, hops, 1.0), bw])
        self.lat = self.hop_lat.sum(axis=1)
        self.joules = np.concatenate([self.joules, joules])
        self.inv = np.where(self.hop_res >= 0, 1.0 / self.hop_bw, 0.0).sum(axis=1)

    def route(self, src: str, dst: str, mode: str) -> Route | None:
        """The route of a copy between named scopes (None: no route)."""
        idx = self.profile.scope_index
        rid = self.id(idx[src], idx[dst], COPY_MODES.index(mode))
        return self.routes[rid] if rid else None


def _widen(table: np.ndarray, width: int, fill) -> np.ndarray:
    """``table`` padded with ``fill`` to ``width`` columns."""
    if table.shape[1] >= width:
        return table
    pad = np.full((len(table), width - table.shape[1]), fill, dtype=table.dtype)
    return np.concatenate([table, pad], axis=1)


def _finder(profile: Profile):
    grid = profile.mesh
    if grid is not None:
        local = {f"pe{k}.{s}" for k in range(grid.size) for s in grid.scopes}
        own = profile.copies[grid.generated_copies:]
        if not any(c.src in local or c.dst in local for c in own):
            return MeshRoutes(profile, grid)
    return GraphRoutes([s.name for s in profile.scopes], list(profile.copies))
