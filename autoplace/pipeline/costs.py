"""What a pipeline stage costs: the stage model of docs/pipeline.md, as prefix-sum tables.

A stage is a contiguous range ``[i, j)`` of the graph's ops (in its topological order) on
``k`` PEs, laid out as a line of neighbours. Every op of the stage is split ``k`` ways along
its output channels: each PE holds ``1/k`` of the op's weights and computes ``1/k`` of its
output. A channel-wise op (elementwise, norm, pool) reads only its own slice of its inputs;
any other op needs every input channel, so the input slices rotate along the line while it
computes (compute-then-shift, as T10 does): ``(k-1)/k`` of its inputs pass each PE's DMA
engine, and a PE holds two input slices at a time. Each op runs on one unit of the PE (a
stage's ``units`` may say which). By default a PE runs one op at a time, each on the unit
that runs its slice fastest. On a mesh whose PEs' units overlap (``units_overlap``), each
unit runs one op at a time and a PE's units work on different inferences at once (the core
on one inference's norm while the accelerator runs the next one's conv); an op's default
unit is then the one that runs it whole fastest (whatever the split, so that each unit's
work falls as a stage's PEs grow). Per inference a stage's PEs are busy with

- **compute**: the sum of its op slice times, or with overlapping units, the busiest
  unit's sum, and
- **communication** on the DMA engines: the rotations, the stage's input from the previous
  stage (every tensor crossing the cut before it, forwarded through it when a later stage
  reads it), its output to the next one, and graph inputs and outputs over the uplink,

which overlap across inferences, so the stage's **period** is ``max(compute,
communication)``; one inference's **latency** through it is all its op slice times plus its
communication. Per PE, ``1/k`` of the stage's weights, of its inputs and outputs
double-buffered, and the working set of its largest op (with overlapping units, of each
unit's largest op: every unit may be busy with another inference's op) must fit the local
memory.

An op's weights may instead stay in the shared memory (the stage's ``streamed`` ops): each
inference, every PE of the op streams its slice in over its uplink (on its DMA engine,
communication), holds it only while the op runs (in the op's working set) and holds one
more slice, the largest of the stage's streamed ones, arriving for the next op. Every
copy's graph inputs, outputs and streamed weights pass the shared memory, which moves at
most ``uplink_total_bps`` (:meth:`StageCosts.shared_seconds`).

Every per-op quantity is tabulated for ``k = 1 .. K`` and summed along the op order, so a
stage's figures are a few lookups (:meth:`StageCosts.stage`), and the dynamic program of
:mod:`autoplace.pipeline.dp` runs on the arrays.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from autoplace.graph import OpGraph
from autoplace.hardware.profile import ProfileError
from autoplace.pipeline.machine import MeshMachine
from autoplace.space.tables import roofline_seconds

#: op kinds that read only their own channels of their inputs (no rotation)
CHANNELWISE = ("elementwise", "norm", "pool")


class StageCosts:
    """The stage model of one graph on one mesh, for stages of up to ``K`` PEs (module
    docstring). ``unit_secs[u, k - 1, o]``: op ``o``'s slice time on unit ``u`` split ``k``
    ways (inf where ``u`` does not run it); ``default_unit[k - 1, o]``: the unit ``o`` runs on
    by default, and ``secs[k - 1, o]`` its slice time there. The PE's ``R`` resources are its
    units when they overlap, else the PE itself; ``resource[o]``: the one ``o`` occupies by
    default. Arrays ``[.., K, n + 1]`` are prefix sums over ops for ``k = 1 .. K`` PEs:
    ``S_busy[r]`` of the ops on resource ``r`` by default, ``S_secs`` of all; ``cut[c]`` is
    the bytes crossing the cut before op ``c``; ``S_io`` prefix sums of graph input and
    output bytes; ``working[o]``: op ``o``'s working set unsplit; ``weights[o]`` its weight
    bytes and ``stream[k - 1, o]`` a PE's time to stream its slice split ``k`` ways."""

    def __init__(self, graph: OpGraph, machine: MeshMachine, *, max_pes: int | None = None):
        if graph.profiled:
            raise ValueError(f"graph {graph.name}: its measured times (latency_us, "
                             "transfer_us) are for placing ops on units; a mesh pipeline "
                             "costs its stages by the mesh's model (docs/pipeline.md) and "
                             "would ignore them")
        self.graph, self.machine = graph, machine
        #: plan -> its figures (:func:`autoplace.pipeline.plan.evaluate`): a search asks
        #: for the same plans' again (to rank, measure and log them)
        self.evaluated: dict = {}
        self.K = max(1, min(machine.max_split, machine.size if max_pes is None else max_pes))
        k = np.arange(1, self.K + 1, dtype=np.float64)[:, None]  # [K, 1]
        ops = graph.ops
        produced = np.array([max(0, op.bytes_read - op.external_bytes) for op in ops],
                            dtype=np.float64)  # read from other ops
        out = np.array([op.output_bytes for op in ops], dtype=np.float64)
        used = np.zeros(len(ops), dtype=bool)
        for e in graph.edges:
            used[e.src] = True
        rotates = np.array([op.kind not in CHANNELWISE for op in ops]) & (produced > 0)
        self.unit_secs = self._unit_seconds(k)
        fastest = np.argmin(self.unit_secs, axis=0)  # [K, n]: per split
        self.overlap = machine.units_overlap
        self.default_unit = np.repeat(fastest[:1], self.K, axis=0) if self.overlap else fastest
        self.secs = np.take_along_axis(self.unit_secs, self.default_unit[None], axis=0)[0]
        self.R = self.U if self.overlap else 1
        self.resource = self.resources(self.default_unit[0])
        #: bytes of other ops' outputs each op rotates along its PEs (unsplit; 0: none)
        self.rotated = np.where(rotates, produced, 0.0)
        self.rotation = np.where((self.rotated > 0) & (k > 1), self.rotated * (k - 1) / k
                                 / machine.link_bps + (k - 1) * machine.link_s, 0.0)
        on = self.resources(self.default_unit)[None] == np.arange(self.R)[:, None, None]
        self.S_busy = _prefix(np.where(on, self.secs[None], 0.0))
        self.S_secs, self.S_rotation = _prefix(self.secs), _prefix(self.rotation)
        self.weights = np.array([op.weight_bytes for op in ops], dtype=np.float64)
        self.S_weights = np.concatenate([[0.0], np.cumsum(self.weights)])
        self.stream = np.where(self.weights > 0, self.weights / k / machine.uplink_bps
                               + machine.uplink_s, 0.0)
        #: each op's bytes of graph inputs, and of its output if it is a graph output
        self.inputs = np.array([op.input_bytes for op in ops], dtype=np.float64)
        self.outputs = np.where(used, 0.0, out)
        self.S_io = np.concatenate([[0.0], np.cumsum(self.inputs + self.outputs)])
        self.cut = self._cut_bytes()
        self.working = np.where(rotates, 2 * produced, produced) + self.inputs + out
        self._unit_of_name = {u.name: n for n, u in enumerate(machine.units)}

    @property
    def U(self) -> int:
        """The number of units of a PE."""
        return len(self.machine.units)

    def resources(self, units: np.ndarray) -> np.ndarray:
        """The resource ops on ``units`` occupy: their units when they overlap, else 0 (the
        PE)."""
        return np.asarray(units) if self.overlap else np.zeros_like(units)

    def _unit_seconds(self, k: np.ndarray) -> np.ndarray:
        """Each op's slice time ``[U, K, n]`` on each PE unit (inf where it does not run
        it); ProfileError naming an op no unit runs."""
        m, n = self.machine, len(self.graph.ops)
        secs = np.full((len(m.units), len(k), n), np.inf)
        for u, spec in enumerate(m.units):
            for i, op in enumerate(self.graph.ops):
                if not spec.accepts_kind(op.kind):
                    continue
                internal = (op.bytes_read - op.external_bytes + op.output_bytes) / k[:, 0]
                secs[u, :, i] = roofline_seconds(
                    op.flops / k[:, 0], internal, op.input_bytes / k[:, 0],
                    op.weight_bytes / k[:, 0], spec.flops_per_s(op.kind), m.memory_bps,
                    m.memory_bps, m.memory_bps, spec.launch_overhead_s)
        bad = np.flatnonzero(np.isinf(secs[:, 0, :]).all(axis=0))
        if len(bad):
            op = self.graph.ops[bad[0]]
            raise ProfileError(f"mesh {m.name}: no PE unit accepts op {op.name!r} (kind "
                               f"{op.kind})")
        return secs

    def _cut_bytes(self) -> np.ndarray:
        """``cut[c]``: bytes of the edges crossing the cut before op ``c`` (from an op before
        it to one at or after it), for ``c = 0 .. n``."""
        delta = np.zeros(len(self.graph.ops) + 1)
        for e in self.graph.edges:
            delta[e.src + 1] += e.nbytes
            delta[e.dst + 1] -= e.nbytes
        return np.cumsum(delta)

    @property
    def n(self) -> int:
        return len(self.graph.ops)

    def unit_index(self, name: str) -> int:
        """The index of the PE unit ``name``; ValueError naming the units if none is."""
        index = self._unit_of_name.get(name)
        if index is None:
            raise ValueError(f"mesh {self.machine.name} has no PE unit {name!r} (units: "
                             f"{', '.join(self._unit_of_name)})")
        return index

    def stage(self, i: int, j: int, k: int) -> dict[str, float]:
        """The figures of stage ``[i, j)`` on ``k`` PEs (``1 <= k <= K``), every op on its
        default unit: ``compute`` (the busiest resource's work), ``work`` (all), ``comm``
        (of which ``incoming``: what arrives before it computes, the tensors crossing the cut
        before it and its streamed weights), ``period`` (the max
        of compute and comm), ``memory`` (bytes per PE), ``fits``, ``latency`` (one
        inference through it: work + comm, nothing overlapped)."""
        self._check(i, j, k)
        r = k - 1
        rotation = float(self.S_rotation[r, j] - self.S_rotation[r, i])
        busy = self.S_busy[:, r, j] - self.S_busy[:, r, i]
        return self._figures(i, j, busy, rotation, 0.0, self.memory(i, j, k))

    def _check(self, i: int, j: int, k: int) -> None:
        if not (0 <= i < j <= self.n and 1 <= k <= self.K):
            raise ValueError(f"stage [{i}, {j}) on {k} PEs is out of range "
                             f"(n={self.n}, K={self.K})")

    def _figures(self, i: int, j: int, busy: np.ndarray, rotation: float, streaming: float,
                 memory: float, spilled: tuple[bool, bool] = (False, False)
                 ) -> dict[str, float]:
        """Stage ``[i, j)``'s figures from each resource's work, its DMA engines' work on its
        ops' rotations and streamed weights, and its memory per PE (its transfers between
        stages, over the link or, where ``spilled`` says a cut passes the shared memory,
        the uplink, and its graph inputs and outputs over the uplink, added here)."""
        m = self.machine
        path = [(m.uplink_bps, m.uplink_s) if s else (m.link_bps, m.link_s) for s in spilled]
        incoming = _move(self.cut[i], *path[0]) + streaming
        comm = float(rotation + incoming + _move(self.cut[j], *path[1])
                     + _move(self.S_io[j] - self.S_io[i], m.uplink_bps, m.uplink_s))
        compute, work = float(busy.max()), float(busy.sum())
        return {"compute": compute, "work": work, "comm": comm, "incoming": float(incoming),
                "period": max(compute, comm), "memory": memory,
                "fits": memory <= self.machine.memory_bytes, "latency": work + comm}

    def op_units(self, stage) -> np.ndarray:
        """The unit index of each op of ``stage`` (its ``units``, else the defaults);
        ValueError if a unit is not the mesh's or does not run its op."""
        ops = np.arange(stage.start, stage.end)
        if stage.units is None:
            return self.default_unit[np.asarray(stage.ways()) - 1, ops]
        units = np.array([self.unit_index(u) for u in stage.units], dtype=np.int64)
        bad = np.flatnonzero(np.isinf(self.unit_secs[units, 0, ops]))
        if len(bad):
            op = self.graph.ops[ops[bad[0]]]
            raise ValueError(f"PE unit {stage.units[bad[0]]!r} does not run op {op.name!r} "
                             f"(kind {op.kind})")
        return units

    def with_units(self, stage, units: np.ndarray):
        """``stage`` with its ops on ``units`` (indices): its ``units`` None when every op is
        on its default unit, so that a plan has one form."""
        units = np.asarray(units)
        ops = np.arange(stage.start, stage.end)
        default = np.array_equal(units, self.default_unit[np.asarray(stage.ways()) - 1, ops])
        names = None if default else tuple(self.machine.units[u].name for u in units)
        return dataclasses.replace(stage, units=names)

    def ops_per_unit(self, stage) -> dict[str, int]:
        """How many ops of ``stage`` each PE unit runs (units that run none left out)."""
        counts = np.bincount(self.op_units(stage), minlength=self.U)
        return {u.name: int(c) for u, c in zip(self.machine.units, counts) if c}

    def unit_work(self, stage, units: np.ndarray | None = None, *,
                  per_resource: bool = False) -> np.ndarray:
        """Each PE unit's work per inference in ``stage``, or each resource's (``units``:
        its :meth:`op_units`, if the caller has them)."""
        units = self.op_units(stage) if units is None else units
        secs = self.unit_secs[units, np.asarray(stage.ways()) - 1,
                              np.arange(stage.start, stage.end)]
        if per_resource:
            return np.bincount(self.resources(units), weights=secs, minlength=self.R)
        return np.bincount(units, weights=secs, minlength=self.U)

    def plan_stages(self, plan) -> list[dict[str, float]]:
        """:meth:`of` each stage of ``plan``, with the cuts it spills."""
        return [self.of(s, plan.spilled_at(n)) for n, s in enumerate(plan.stages)]

    def of(self, stage, spilled: tuple[bool, bool] = (False, False)) -> dict[str, float]:
        """:meth:`stage` of a :class:`~autoplace.pipeline.plan.Stage`, whose ops may be split
        fewer ways than it has PEs (its ``splits``), run on other units (its ``units``) and
        stream their weights (its ``streamed``); ``spilled``: whether the cut before it and
        the one after it pass through the shared memory (a plan's ``spilled_at``)."""
        i, j = stage.start, stage.end
        if stage.splits is None and stage.units is None and stage.streamed is None \
                and not any(spilled):
            return self.stage(i, j, stage.pes)
        self._check(i, j, stage.pes)
        ops = np.arange(i, j)
        rows, units = np.asarray(stage.ways()) - 1, self.op_units(stage)
        streamed = self.streamed_mask(stage)
        busy = self.unit_work(stage, units, per_resource=True)
        memory = self.mixed_memory(i, j, stage.pes, rows + 1, units, streamed, spilled)
        return self._figures(i, j, busy, float(self.rotation[rows, ops].sum()),
                             float(self.stream[rows, ops][streamed].sum()), memory, spilled)

    def mixed_memory(self, i: int, j: int, k: int, ways: np.ndarray, units: np.ndarray,
                     streamed: np.ndarray | None = None,
                     spilled: tuple[bool, bool] = (False, False)) -> float:
        """Bytes the fullest PE holds when op ``o`` of stage ``[i, j)`` is split ``ways[o]``
        ways, runs on unit ``units[o]`` and streams its weights where ``streamed[o]``: every
        op's slice may sit on the same PE (the first ``ways`` PEs hold an op), the stage's
        buffers spread over all ``k``, double but for a cut that ``spilled`` says passes the
        shared memory (one inference's tensors: the next one's wait there)."""
        buffers = self.cut[i] * (1 - spilled[0] / 2) + self.cut[j] * (1 - spilled[1] / 2) \
            + self.S_io[j] - self.S_io[i]
        weights = self.weights[i:j] / ways
        streamed = np.zeros(j - i, dtype=bool) if streamed is None else streamed
        working = self.working[i:j] / ways + np.where(streamed, weights, 0.0)
        return float(weights[~streamed].sum() + 2 * buffers / k
                     + _largest_per(working, self.resources(units), self.R)
                     + weights[streamed].max(initial=0.0))

    def streamed_mask(self, stage) -> np.ndarray:
        """Whether each op of ``stage`` streams its weights; ValueError if one streamed has
        none."""
        mask = np.zeros(stage.end - stage.start, dtype=bool)
        if stage.streamed is not None:
            mask[np.asarray(stage.streamed) - stage.start] = True
            empty = np.flatnonzero(mask & (self.weights[stage.start:stage.end] == 0))
            if len(empty):
                op = self.graph.ops[stage.start + empty[0]]
                raise ValueError(f"op {op.name!r} has no weights to stream")
        return mask

    def with_streamed(self, stage, ops):
        """``stage`` with the weights of ``ops`` (graph indices; those of other stages left
        out) streamed and the others held: its ``streamed`` None when none is, so that a
        plan has one form."""
        mine = sorted({int(o) for o in ops if stage.start <= o < stage.end})
        return dataclasses.replace(stage, streamed=tuple(mine) or None)

    def streaming(self, i: int, j: int) -> tuple[int, ...] | None:
        """Every op of ``[i, j)`` that has weights, as a stage's ``streamed``."""
        ops = np.flatnonzero(self.weights[i:j] > 0) + i
        return tuple(int(o) for o in ops) or None

    def shared_seconds(self, plan) -> float:
        """The shared memory's time per inference of one copy of ``plan``: every copy's
        graph inputs, outputs, streamed weights and spilled cuts (written, then read) over
        ``uplink_total_bps``."""
        return sum(self.stage_shared_seconds(st, plan.replicas, plan.spilled_at(n))
                   for n, st in enumerate(plan.stages))

    def stage_shared_seconds(self, stage, replicas: int,
                             spilled: tuple[bool, bool] = (False, False)) -> float:
        """:meth:`shared_seconds` of one stage's transfers, ``replicas`` copies of it (the
        cut before it read if spilled, the one after it written)."""
        if not np.isfinite(self.machine.uplink_total_bps):
            return 0.0
        moved = self.S_io[stage.end] - self.S_io[stage.start] \
            + self.weights[list(stage.streamed or ())].sum() \
            + spilled[0] * self.cut[stage.start] + spilled[1] * self.cut[stage.end]
        return float(replicas * moved / self.machine.uplink_total_bps)

    def dp_tables(self, streamed: bool) -> tuple[np.ndarray, ...]:
        """What the dynamic program reads of a stage's ops besides their work, with every
        weight held (``streamed`` False) or streamed: prefix sums of a PE's DMA work
        ``[K, n + 1]`` and of the held weights, each op's working set, and each op's
        streamed weights (unsplit). Built once per mode (a bisection reads them often)."""
        return self._streamed_tables if streamed else self._held_tables

    @functools.cached_property
    def _held_tables(self) -> tuple[np.ndarray, ...]:
        return self.S_rotation, self.S_weights, self.working, np.zeros(self.n)

    @functools.cached_property
    def _streamed_tables(self) -> tuple[np.ndarray, ...]:
        return (self.S_rotation + _prefix(self.stream), np.zeros(self.n + 1),
                self.working + self.weights, self.weights)

    def memory(self, i: int, j: int, k: int) -> float:
        """Bytes a PE of stage ``[i, j)`` on ``k`` PEs holds: its slice of the weights, of
        the stage's inputs and outputs double-buffered, and of its largest op's working set
        (with overlapping units, of each unit's largest op)."""
        return float(self.unsplit_memory(i, j)) / k

    def unsplit_memory(self, i: int, j: int) -> float:
        """What stage ``[i, j)`` holds in all (``k`` PEs hold ``1/k`` of it each)."""
        buffers = self.cut[i] + self.cut[j] + self.S_io[j] - self.S_io[i]
        return float(self.S_weights[j] - self.S_weights[i] + 2 * buffers
                     + _largest_per(self.working[i:j], self.resource[i:j], self.R))


def _largest_per(working: np.ndarray, resource: np.ndarray, R: int) -> float:
    """The sum over resources of the largest ``working`` of the ops on each."""
    if R == 1:
        return float(working.max())
    return float(sum(working[resource == r].max(initial=0.0) for r in range(R)))


def _prefix(x: np.ndarray) -> np.ndarray:
    """Prefix sums along the ops (the last axis), starting at 0."""
    zeros = np.zeros((*x.shape[:-1], 1))
    return np.concatenate([zeros, np.cumsum(x, axis=-1)], axis=-1)


def _move(nbytes: float, bps: float, latency: float) -> float:
    """Time to move ``nbytes`` over a path (no time for nothing)."""
    return nbytes / bps + latency if nbytes > 0 else 0.0
