"""The compiled space: everything derived from (graph, profile), once, as numpy arrays.

A placement inside the tool is a *genome*: ``choice[i]``, an index into op ``i``'s choices
(the (unit, scope) pairs it may take: units that accept its kind, scopes they may write, in
profile order), and ``mode[k]``, the copy mode of edge ``k`` (0 ``sync``, 1 ``async``;
meaningful only where the edge crosses scopes). Batches are ``[B, ops]`` and ``[B, edges]``
integer arrays. :class:`SearchSpace` owns the tables every consumer reads (choice tables,
edges, routes, unit classes, capacities) and the one ``encode`` / ``decode`` / ``normalize``
/ genome text format; :class:`~autoplace.space.placement.Placement` (names) exists only at
the edges: the user API, the log, the build.

Semantics (the simulators and the TVM build share them): an op runs on its unit, reads its
inputs from and writes its output to its scope. An edge whose producer's scope differs from
the consumer's scope needs a copy along the route of its mode (:mod:`autoplace.space.routes`);
a mode without a route is repaired to the other mode where that one has a route
(:meth:`SearchSpace.normalize`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence

import numpy as np

from autoplace.graph import OP_KINDS, OpGraph
from autoplace.hardware.profile import COPY_MODES, WEIGHT_MODES, Profile, ProfileError
from autoplace.space.canonical import CanonicalForms
from autoplace.space.capability import capable
from autoplace.space.classes import refine, unit_classes
from autoplace.space.copyplan import plan
from autoplace.space.placement import Placement, PlacementError
from autoplace.space.problem import ErrorKind, Problem
from autoplace.space.routes import Route, Routes
from autoplace.space.tables import ChoiceTables, EdgeTables

SYNC, ASYNC = COPY_MODES.index("sync"), COPY_MODES.index("async")


def check_graph(profile: Profile, graph: OpGraph) -> None:
    """Raise :class:`ProfileError` if some op of ``graph`` is run by no unit of ``profile``
    (by kind or by pattern)."""
    able = capable(graph, profile).any(axis=1)
    if not able.all():
        op = graph.ops[int(np.argmin(able))]
        raise ProfileError(f"{profile.source}: no unit accepts op {op.name!r} of kind "
                           f"{op.kind!r} (graph {graph.name})")


class SearchSpace(ChoiceTables, EdgeTables, CanonicalForms):
    """The compiled space of one graph on one profile (see the module docstring).

    Arrays: ``n_choices[ops]``; ``c_unit``, ``c_scope``, ``c_dur`` ``[ops, width]`` (unit
    index, scope index and op time of each choice; padding repeats choice 0); ``src``,
    ``dst``, ``nbytes`` per edge; ``out_bytes`` per op; ``capacity`` per scope; ``launch``
    per unit (energy: :mod:`autoplace.measure.energy`); ``handover`` per resource.
    Resources are the units, then the DMA engines (``engines``).
    """

    def __init__(self, graph: OpGraph, profile: Profile):
        check_graph(profile, graph)
        self.graph, self.profile = graph, profile
        self.units = [u.name for u in profile.units]
        self.scopes = [s.name for s in profile.scopes]
        self.engines = sorted({c.engine for c in profile.copies})
        self.host = profile.unit_index[profile.host]
        self.default_scope = profile.scope_index[profile.default_scope]
        self.capacity = np.array([s.capacity_bytes for s in profile.scopes], dtype=np.float64)
        self.launch = np.array([u.launch_overhead_s for u in profile.units], dtype=np.float64)
        self._build_choices(graph, profile)
        self._build_edges(graph)
        #: per op, bytes held in the default scope for the whole run: the graph inputs it
        #: reads and, for a graph output (an op without consumers), its output
        self.io_bytes = self.input_bytes + np.where(self.has_consumers, 0.0, self.out_bytes)
        self.routes = Routes(profile, {e: i for i, e in enumerate(self.engines)}, self.host)
        #: per resource, whether it runs work without waiting for itself (``parallel`` units)
        #: per resource (units, then DMA engines): a parallel unit's cores, else 0
        self.cores = np.array([u.cores for u in profile.units] + [0] * len(self.engines),
                              dtype=np.float64)
        self.parallel = np.array([u.execution == "parallel" for u in profile.units]
                                 + [False] * len(self.engines))
        self.slot_ptr, self.slot_idx = _cpu_slots(profile, self.n_resources)
        #: per resource, its wait for work on another resource (a unit's ``handover_s``;
        #: a DMA engine's is in its copy paths' latency)
        self.handover = np.array([u.handover_s for u in profile.units] + [0.0] * len(self.engines),
                                 dtype=np.float64)

    def activation_bytes(self, op: int, scope: int) -> float:
        """Bytes op ``op``'s output takes in ``scope`` while live: none for a graph output
        written in the default scope (it is the result buffer held there all run, in
        :attr:`io_bytes`)."""
        if scope == self.default_scope and not self.has_consumers[op]:
            return 0.0
        return float(self.out_bytes[op])

    @property
    def n_slots(self) -> int:
        """The CPUs units name (``cpus``): each runs one unit's work at a time."""
        return int(self.slot_idx.max(initial=-1)) + 1

    @property
    def n_resources(self) -> int:
        """Units and DMA engines: the resources a schedule occupies."""
        return len(self.units) + len(self.engines)

    @functools.cached_property
    def unit_class(self) -> np.ndarray:
        """Class id of each unit: identical units (same description, home scopes alike,
        copy paths that map onto each other, measured alike by a profiled graph) share one
        (see :mod:`autoplace.space.classes`)."""
        classes = unit_classes(self.profile)
        return refine(classes, self.measured.seconds) if self.measured.rows else classes

    # -- genomes -------------------------------------------------------------------------
    def copy_plan(self, choice: np.ndarray, mode: np.ndarray):
        """Per row and edge: ``cross`` (the ends' scopes differ), the mode used (the
        preferred one, else the other where only it has a route; 0 where no copy) and the
        route id it takes (0: no copy, or no route in either mode)."""
        return plan(self, choice, mode)

    def normalize(self, choice: np.ndarray, mode: np.ndarray) -> np.ndarray:
        """The modes a genome really uses (see :meth:`copy_plan`): equal placements have
        equal normalised genomes."""
        return self.copy_plan(choice, mode)[1]

    @staticmethod
    def keys(choice: np.ndarray, mode: np.ndarray) -> list[bytes]:
        """A hashable key per row (of normalised genomes)."""
        rows = np.concatenate([choice, mode], axis=1, dtype=np.int32)
        if not rows.shape[1]:
            return [b""] * len(rows)
        return rows.view(np.dtype((np.void, rows.shape[1] * 4))).ravel().tolist()  # bytes

    def from_key(self, key: bytes) -> tuple[np.ndarray, np.ndarray]:
        """The (choice, mode) row a key of :meth:`keys` was made from."""
        genome = np.frombuffer(key, dtype=np.int32).astype(np.int64)
        return genome[:self.n_ops], genome[self.n_ops:]

    def random_genomes(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``n`` uniformly random genomes (modes not normalised)."""
        choice = (rng.random((n, self.n_ops)) * self.n_choices).astype(np.int64)
        return choice, rng.integers(0, len(COPY_MODES), (n, self.n_edges))

    def encode(self, placements: Sequence[Placement]) -> tuple[np.ndarray, np.ndarray]:
        """Genomes of placements (``sync`` where no copy); :class:`PlacementError` for a
        placement naming an op, unit or scope choice this space does not have."""
        names = [op.name for op in self.graph.ops]
        uidx, sidx = self.profile.unit_index, self.profile.scope_index
        choice = np.zeros((len(placements), self.n_ops), dtype=np.int64)
        mode = np.zeros((len(placements), self.n_edges), dtype=np.int64)
        ops, edge_index, op_index = np.arange(self.n_ops), self._edge_index, self._op_index
        for b, p in enumerate(placements):
            resident = np.zeros(self.n_ops, dtype=np.int64)
            try:
                pairs = [p.ops[n] for n in names]
                units = [uidx[u] for u, _ in pairs]
                scopes = [sidx[s] for _, s in pairs]
                for name, m in p.copies.items():
                    mode[b, edge_index[name]] = COPY_MODES.index(m)
                for name, where in p.weights.items():
                    resident[op_index[name]] = WEIGHT_MODES.index(where)
            except (KeyError, ValueError) as exc:
                raise PlacementError(f"placement does not fit graph {self.graph.name} on "
                                     f"profile {self.profile.name}: {exc}") from None
            choice[b] = self.choice_index(ops, units, scopes, resident)
            bad = (choice[b] < 0) | self._other_weights(choice[b], resident)
            if bad.any():
                name = names[int(np.flatnonzero(bad)[0])]
                raise PlacementError(
                    f"op {name!r}: {p.ops[name]} with {p.weights.get(name, 'streamed')} "
                    f"weights is not one of its choices (graph {self.graph.name}, profile "
                    f"{self.profile.name})")
        return choice, mode

    def _other_weights(self, choice: np.ndarray, resident: np.ndarray) -> np.ndarray:
        """Ops whose choice places weights other than ``resident`` asks, where that matters
        (the op has weights, its scope is not the default one)."""
        ops = np.arange(self.n_ops)
        got = self.c_resident[ops, choice]
        matters = (self.weight_bytes > 0) & (self.c_scope[ops, choice] != self.default_scope)
        return (choice >= 0) & matters & (got != resident)

    def decode(self, choice: np.ndarray, mode: np.ndarray) -> Placement:
        """The placement of one genome (modes normalised: copies only where scopes differ)."""
        return self.decode_rows(np.asarray(choice)[None, :], np.asarray(mode)[None, :])[0]

    def decode_rows(self, choice: np.ndarray, mode: np.ndarray) -> list[Placement]:
        """The placement of each row of a batch of genomes (as :meth:`decode`)."""
        choice = np.asarray(choice, dtype=np.int64)
        used = self.normalize(choice, np.asarray(mode))
        ops = np.arange(self.n_ops)
        unit, scope = self.c_unit[ops, choice], self.c_scope[ops, choice]
        resident = (self.c_resident[ops, choice] > 0) & (self.weight_bytes > 0)
        cross = scope[:, self.src] != scope[:, self.dst]
        names, edges, modes = self._op_names, self._edge_names, self._mode_names
        pairs = self._pair_names(unit, scope)
        out = []
        for b in range(len(choice)):
            k = np.flatnonzero(cross[b])
            out.append(Placement(
                ops=dict(zip(names, pairs[b].tolist())),
                copies=dict(zip(edges[k].tolist(), modes[used[b, k]].tolist())),
                weights=dict.fromkeys([names[i] for i in np.flatnonzero(resident[b]).tolist()],
                                      "resident")))
        return out

    @staticmethod
    def format_genome(choice: np.ndarray, mode: np.ndarray) -> str:
        """Compact text of one genome: choice indices, then copy-mode digits."""
        return ".".join(map(str, np.asarray(choice).tolist())) + "|" + \
            "".join(map(str, np.asarray(mode).tolist()))

    def parse_genome(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """Inverse of :meth:`format_genome`; :class:`PlacementError` if it is not one of
        this space's genomes."""
        ops, sep, modes = str(text).partition("|")
        try:
            choice = np.array([int(x) for x in ops.split(".")], dtype=np.int64)
            mode = np.array([int(x) for x in modes], dtype=np.int64)
        except ValueError:
            raise PlacementError(f"genome {text[:40]!r}: not '<choices>|<modes>'") from None
        ok = (sep and len(choice) == self.n_ops and len(mode) == self.n_edges
              and (choice >= 0).all() and (choice < self.n_choices).all()
              and ((mode == 0) | (mode == 1)).all())
        if not ok:
            raise PlacementError(f"genome {text[:40]!r}: not a genome of {self.n_ops} ops "
                                 f"and {self.n_edges} edges of this space")
        return choice, mode

    # -- records (the tuning loop's store) -------------------------------------------------
    @staticmethod
    def record_fields(placement: Placement, result) -> dict:
        """What a record of a measured ``placement`` holds beside the job's fields."""
        return {"placement": placement}

    @staticmethod
    def candidate_of(pipeline, placement: Placement) -> Placement:
        """The candidate a record holds (its ``pipeline`` and ``placement`` fields)."""
        return placement

    # -- named placements ----------------------------------------------------------------
    def uniform(self, unit: str) -> Placement | None:
        """Every op on ``unit`` in its home scope, or None if the unit rejects an op."""
        u, s = self.profile.unit_index[unit], self.profile.scope_index[
            self.profile.home_scope(unit)]
        choice = self.choice_index(np.arange(self.n_ops), [u] * self.n_ops, [s] * self.n_ops)
        if (choice < 0).any():
            return None
        return self.decode(choice, np.zeros(self.n_edges, dtype=np.int64))

    def from_user(self, spec: Mapping) -> Placement:
        """A hand-written placement, defaults filled in, validated.

        ``spec`` maps op name -> unit name or {"unit": ..., "scope": ..., "weights": ...}; it
        may also be {"ops": {...}, "copies": {"C->D": "async"}}. Ops left out run on the host
        unit; a scope left out is the unit's home scope; weights left out are streamed where
        the unit can stream them, else resident; a copy mode left out is ``async`` where the
        route supports it, else ``sync``.
        """
        ops_spec = spec.get("ops", spec) if isinstance(spec.get("ops"), Mapping) else spec
        copies_spec = spec.get("copies", {}) if ops_spec is not spec else {}
        ops, weights = {}, {}
        for op in self.graph.ops:
            v = ops_spec.get(op.name, self.profile.host)
            unit = v if isinstance(v, str) else v.get("unit", self.profile.host)
            scope = None if isinstance(v, str) else v.get("scope")
            ops[op.name] = (unit, scope or self._home_or_first(unit))
            placed = None if isinstance(v, str) else v.get("weights")
            if placed is None and op.weight_bytes and unit in self.profile.unit_index:
                placed = min(self.profile.unit(unit).weights, key=WEIGHT_MODES.index)
            if placed is not None and placed != "streamed":
                weights[op.name] = placed
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
        placement = Placement(ops=ops, copies=copies, weights=weights)
        self.validate(placement)
        return placement

    def _home_or_first(self, unit: str) -> str:
        try:
            return self.profile.home_scope(unit)
        except (KeyError, IndexError):
            return "?"

    # -- routes by name ------------------------------------------------------------------
    def route(self, src: str, dst: str, mode: str) -> Route:
        """The route of a copy from scope ``src`` to ``dst`` in ``mode`` (KeyError: none)."""
        route = self.routes.route(src, dst, mode)
        if route is None:
            raise KeyError(f"no {mode} route from scope {src!r} to {dst!r}")
        return route

    def modes_between(self, src: str, dst: str) -> list[str]:
        """Copy modes with a route from scope ``src`` to scope ``dst``."""
        if src not in self.profile.scope_index or dst not in self.profile.scope_index:
            return []
        return [m for m in COPY_MODES if self.routes.route(src, dst, m) is not None]

    # -- validation ----------------------------------------------------------------------
    def check(self, placement: Placement) -> Problem | None:
        """What is wrong with ``placement`` on this graph and profile (its kind:
        ``NO_COPY_PATH`` for a copy between scopes no route joins, else ``INVALID``), or
        None when it fits."""
        detail = self._check_ops(placement) or self._check_weights(placement)
        if detail:
            return Problem(kind=ErrorKind.INVALID, detail=detail)
        return self._check_copies(placement)

    def _check_ops(self, placement: Placement) -> str | None:
        """What is wrong with the placement's ops (names, units, scopes)."""
        g = self.graph
        if set(placement.ops) != {op.name for op in g.ops}:
            missing = sorted({op.name for op in g.ops} - set(placement.ops))
            extra = sorted(set(placement.ops) - {op.name for op in g.ops})
            return f"op {(missing or extra)[0]!r} is {'missing' if missing else 'not in the graph'}"
        for i, op in enumerate(g.ops):
            unit, scope = placement.ops[op.name]
            if self.choice_of(i, unit, scope) < 0:
                return self._explain_choice(op, unit, scope)
        return self._check_composites(placement)

    def _check_composites(self, placement: Placement) -> str | None:
        """What splits a composite a unit runs only whole (:attr:`composites`)."""
        c, g = self.composites, self.graph
        index = self.profile.unit_index
        for f, lead, units, pattern in zip(c.followers, c.leaders, c.units, c.patterns):
            a, b = (placement.ops[g.ops[i].name][0] for i in (lead, f))
            if a != b and (units[index[a]] or units[index[b]]):
                return (f"ops {g.ops[lead].name!r} (on {a}) and {g.ops[f].name!r} (on {b}) "
                        f"are one {pattern!r}, which unit {a if units[index[a]] else b!r} "
                        "runs only whole")
        return None

    def _check_copies(self, placement: Placement) -> Problem | None:
        """What is wrong with the copies of the placement's edges that cross scopes."""
        g, need = self.graph, set()
        for k, e in enumerate(g.edges):
            src, dst = placement.ops[g.ops[e.src].name][1], placement.ops[g.ops[e.dst].name][1]
            if src != dst:
                need.add(self.edge_names[k])
                problem = self._check_copy(self.edge_names[k], src, dst, placement.copies)
                if problem:
                    return problem
        extra = sorted(set(placement.copies) - need)
        return Problem(kind=ErrorKind.INVALID, detail=f"edge {extra[0]!r} needs no copy (same "
                       "scope or no such edge)") if extra else None

    def _check_weights(self, placement: Placement) -> str | None:
        """What is wrong with the placement's weights (op names, values, unit support)."""
        for name, where in placement.weights.items():
            if where not in WEIGHT_MODES:
                return f"op {name!r}: weights must be one of {WEIGHT_MODES}, got {where!r}"
            if name not in self._op_index or not self.graph.ops[self._op_index[name]].weight_bytes:
                return f"op {name!r}: has no weights to place (weights: {where!r})"
        default = self.profile.default_scope
        for i in np.flatnonzero(self.weight_bytes > 0).tolist():
            name = self.graph.ops[i].name
            unit, scope = placement.ops[name]
            where = placement.weights.get(name, "streamed")
            if scope != default and self.choice_of(i, unit, scope, where) < 0:
                return f"op {name!r}: unit {unit!r} cannot keep its weights {where}"
        return None

    @functools.cached_property
    def _op_index(self) -> dict[str, int]:
        return {op.name: i for i, op in enumerate(self.graph.ops)}

    @functools.cached_property
    def _op_names(self) -> list[str]:
        return [op.name for op in self.graph.ops]

    def _pair_names(self, unit: np.ndarray, scope: np.ndarray) -> np.ndarray:
        """The ``(unit, scope)`` name tuple of each element, one tuple per distinct pair
        (shared by the ops that have it, not made per op; made per call, for the pairs the
        rows use: a table of every pair would hold 10^8 on a mesh of thousands of PEs)."""
        ids, at = np.unique(unit * len(self.scopes) + scope, return_inverse=True)
        names = np.empty(len(ids), dtype=object)
        names[:] = [(self.units[i // len(self.scopes)], self.scopes[i % len(self.scopes)])
                    for i in ids.tolist()]
        return names[at.reshape(unit.shape)]

    @functools.cached_property
    def _edge_names(self) -> np.ndarray:
        return np.array(self.edge_names, dtype=object)

    @functools.cached_property
    def _mode_names(self) -> np.ndarray:
        return np.array(COPY_MODES, dtype=object)

    @functools.cached_property
    def _edge_index(self) -> dict[str, int]:
        return {name: k for k, name in enumerate(self.edge_names)}

    def _explain_choice(self, op, unit: str, scope: str) -> str:
        if unit not in self.profile.unit_index:
            return f"op {op.name!r}: unknown unit {unit!r} (profile has {self.units[:8]}" \
                   f"{' ...' if len(self.units) > 8 else ''})"
        spec = self.profile.unit(unit)
        if spec.patterns:
            return (f"op {op.name!r}: unit {unit!r} runs its patterns "
                    f"({', '.join(sorted(spec.patterns))}), none of which matches it")
        if not spec.accepts_kind(op.kind):
            return f"op {op.name!r}: unit {unit!r} does not accept kind {op.kind!r}"
        return f"op {op.name!r}: unit {unit!r} cannot write scope {scope!r}"

    def _check_copy(self, name: str, src: str, dst: str,
                    copies: Mapping[str, str]) -> Problem | None:
        mode = copies.get(name)
        avail = self.modes_between(src, dst)
        if not avail:
            return Problem(kind=ErrorKind.NO_COPY_PATH,
                           detail=f"edge {name!r}: no copy path from scope {src!r} to {dst!r}")
        if mode is None:
            detail = f"edge {name!r}: copy {src}->{dst} needs a mode, one of {avail}"
        elif mode not in avail:
            detail = f"edge {name!r}: copy {src}->{dst} supports {avail}, got {mode!r}"
        else:
            return None
        return Problem(kind=ErrorKind.INVALID, detail=detail)

    def validate(self, placement: Placement) -> None:
        """Raise :class:`PlacementError` if ``placement`` does not fit."""
        problem = self.check(placement)
        if problem:
            where = f"graph {self.graph.name}, profile {self.profile.name}"
            raise PlacementError(f"{problem.detail} ({where})")

    # -- size ----------------------------------------------------------------------------
    @property
    def log10_size(self) -> float:
        """log10 of the number of distinct placements (op choices x free copy modes); a
        co-location group's followers move with its leader."""
        free = np.ones(self.n_ops, dtype=bool)
        free[self.colocated[0]] = False
        ops = float(np.log10(self.n_choices[free]).sum())
        return ops + sum(math.log10(len(m)) for m in self.edge_modes if len(m) > 1)


__all__ = ["ASYNC", "OP_KINDS", "SYNC", "SearchSpace", "check_graph"]


def _cpu_slots(profile: Profile, n_resources: int) -> tuple[np.ndarray, np.ndarray]:
    """Per resource (units, then DMA engines), the CPU slots it occupies while it works, as
    ``(ptr, idx)``: a unit's ``cpus``, numbered in order of first appearance; none for a unit
    without them or an engine. Units that share a CPU run their work one after another."""
    ids: dict[int, int] = {}
    ptr, idx = [0], []
    for u in profile.units:
        idx += [ids.setdefault(c, len(ids)) for c in u.cpus]
        ptr.append(len(idx))
    ptr += [len(idx)] * (n_resources - len(profile.units))
    return np.array(ptr, dtype=np.int64), np.array(idx, dtype=np.int64)
