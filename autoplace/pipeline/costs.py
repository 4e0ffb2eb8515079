"""What a pipeline stage costs: the stage model of docs/pipeline.md, as prefix-sum tables.

A stage is a contiguous range ``[i, j)`` of the graph's ops (in its topological order) on
``k`` PEs, laid out as a line of neighbours. Every op of the stage is split ``k`` ways along
its output channels: each PE holds ``1/k`` of the op's weights and computes ``1/k`` of its
output. A channel-wise op (elementwise, norm, pool) reads only its own slice of its inputs;
any other op needs every input channel, so the input slices rotate along the line while it
computes (compute-then-shift, as T10 does): ``(k-1)/k`` of its inputs pass each PE's DMA
engine, and a PE holds two input slices at a time. Each op runs on the PE's fastest unit
that accepts it; a PE runs one op at a time. Per inference a stage's PEs are busy with

- **compute**: the sum of the op slice times, and
- **communication** on the DMA engines: the rotations, the stage's input from the previous
  stage (every tensor crossing the cut before it, forwarded through it when a later stage
  reads it), its output to the next one, and graph inputs and outputs over the uplink,

which overlap across inferences, so the stage's **period** is ``max(compute,
communication)``. Per PE, ``1/k`` of the stage's weights, of its inputs and outputs
double-buffered, and of its largest op's working set must fit the local memory.

Every per-op quantity is tabulated for ``k = 1 .. K`` and summed along the op order, so a
stage's figures are a few lookups (:meth:`StageCosts.stage`), and the dynamic program of
:mod:`autoplace.pipeline.dp` runs on the arrays.
"""

from __future__ import annotations

import numpy as np

from autoplace.graph import OpGraph
from autoplace.pipeline.machine import MeshMachine
from autoplace.profile import ProfileError
from autoplace.space.tables import roofline_seconds

#: op kinds that read only their own channels of their inputs (no rotation)
CHANNELWISE = ("elementwise", "norm", "pool")


class StageCosts:
    """The stage model of one graph on one mesh, for stages of up to ``K`` PEs (module
    docstring). Arrays ``[K, n + 1]`` are prefix sums over ops for ``k = 1 .. K`` PEs;
    ``cut[c]`` is the bytes crossing the cut before op ``c``; ``S_io`` prefix sums of graph
    input and output bytes; ``working[o]``: op ``o``'s working set unsplit."""

    def __init__(self, graph: OpGraph, machine: MeshMachine, *, max_pes: int | None = None):
        self.graph, self.machine = graph, machine
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
        self.secs, self.unit = self._op_seconds(k)
        self.rotation = np.where(rotates & (k > 1), produced * (k - 1) / k / machine.link_bps
                                 + (k - 1) * machine.link_s, 0.0)
        weights = np.array([op.weight_bytes for op in ops], dtype=np.float64)
        self.S_secs, self.S_rotation = _prefix(self.secs), _prefix(self.rotation)
        self.S_weights = np.concatenate([[0.0], np.cumsum(weights)])
        io = np.array([op.input_bytes for op in ops], dtype=np.float64) + np.where(used, 0.0, out)
        self.S_io = np.concatenate([[0.0], np.cumsum(io)])  # graph inputs and outputs
        self.cut = self._cut_bytes()
        inputs = np.array([op.input_bytes for op in ops], dtype=np.float64)
        self.working = np.where(rotates, 2 * produced, produced) + inputs + out

    def _op_seconds(self, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each op's slice time ``[K, n]`` on its fastest PE unit, and that unit's index."""
        m, n = self.machine, len(self.graph.ops)
        best = np.full((len(k), n), np.inf)
        unit = np.zeros((len(k), n), dtype=np.int64)
        for u, spec in enumerate(m.units):
            for i, op in enumerate(self.graph.ops):
                if not spec.accepts_kind(op.kind):
                    continue
                internal = (op.bytes_read - op.external_bytes + op.output_bytes) / k[:, 0]
                t = roofline_seconds(op.flops / k[:, 0], internal, op.input_bytes / k[:, 0],
                                     op.weight_bytes / k[:, 0], spec.flops_per_s(op.kind),
                                     m.memory_bps, m.memory_bps, m.memory_bps,
                                     spec.launch_overhead_s)
                better = t < best[:, i]
                best[better, i], unit[better, i] = t[better], u
        bad = np.flatnonzero(np.isinf(best[0]))
        if len(bad):
            op = self.graph.ops[bad[0]]
            raise ProfileError(f"mesh {m.name}: no PE unit accepts op {op.name!r} (kind "
                               f"{op.kind})")
        return best, unit

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

    def stage(self, i: int, j: int, k: int) -> dict[str, float]:
        """The figures of stage ``[i, j)`` on ``k`` PEs (``1 <= k <= K``): ``compute``,
        ``comm`` (of which ``incoming``: the tensors crossing the cut before it), ``period``
        (their max), ``memory`` (bytes per PE), ``fits``, ``latency`` (one inference through
        it: compute + communication, nothing overlapped)."""
        if not (0 <= i < j <= self.n and 1 <= k <= self.K):
            raise ValueError(f"stage [{i}, {j}) on {k} PEs is out of range "
                             f"(n={self.n}, K={self.K})")
        r, m = k - 1, self.machine
        compute = float(self.S_secs[r, j] - self.S_secs[r, i])
        incoming = _move(self.cut[i], m.link_bps, m.link_s)
        comm = float(self.S_rotation[r, j] - self.S_rotation[r, i] + incoming
                     + _move(self.cut[j], m.link_bps, m.link_s)
                     + _move(self.S_io[j] - self.S_io[i], m.uplink_bps, m.uplink_s))
        memory = self.memory(i, j, k)
        return {"compute": compute, "comm": comm, "incoming": float(incoming),
                "period": max(compute, comm),
                "memory": memory, "fits": memory <= m.memory_bytes,
                "latency": compute + comm}

    def of(self, stage) -> dict[str, float]:
        """:meth:`stage` of a :class:`~autoplace.pipeline.plan.Stage`, whose ops may be split
        fewer ways than it has PEs (its ``splits``)."""
        if stage.splits is None:
            return self.stage(stage.start, stage.end, stage.pes)
        f = self.stage(stage.start, stage.end, stage.pes)
        ops = np.arange(stage.start, stage.end)
        rows = np.asarray(stage.splits) - 1
        compute = float(self.secs[rows, ops].sum())
        comm = f["comm"] - float(self.S_rotation[stage.pes - 1, stage.end]
                                 - self.S_rotation[stage.pes - 1, stage.start]) \
            + float(self.rotation[rows, ops].sum())
        memory = self.mixed_memory(stage.start, stage.end, stage.pes, rows + 1)
        return {**f, "compute": compute, "comm": comm, "period": max(compute, comm),
                "memory": memory, "fits": memory <= self.machine.memory_bytes,
                "latency": compute + comm}

    def mixed_memory(self, i: int, j: int, k: int, ways: np.ndarray) -> float:
        """Bytes the fullest PE holds when op ``o`` of stage ``[i, j)`` is split ``ways[o]``
        ways: every op's slice may sit on the same PE (the first ``ways`` PEs hold an op),
        the stage's buffers spread over all ``k``."""
        buffers = self.cut[i] + self.cut[j] + self.S_io[j] - self.S_io[i]
        weights = np.array([op.weight_bytes for op in self.graph.ops[i:j]], dtype=np.float64)
        return float((weights / ways).sum() + 2 * buffers / k
                     + (self.working[i:j] / ways).max())

    def memory(self, i: int, j: int, k: int) -> float:
        """Bytes a PE of stage ``[i, j)`` on ``k`` PEs holds: its slice of the weights, of
        the stage's inputs and outputs double-buffered, and of its largest op's working set."""
        return float(self.unsplit_memory(i, j)) / k

    def unsplit_memory(self, i: int, j: int) -> float:
        """What stage ``[i, j)`` holds in all (``k`` PEs hold ``1/k`` of it each)."""
        buffers = self.cut[i] + self.cut[j] + self.S_io[j] - self.S_io[i]
        return float(self.S_weights[j] - self.S_weights[i] + 2 * buffers
                     + self.working[i:j].max())


def _prefix(x: np.ndarray) -> np.ndarray:
    """Prefix sums along the ops: ``[K, n] -> [K, n + 1]`` starting at 0."""
    return np.concatenate([np.zeros((x.shape[0], 1)), np.cumsum(x, axis=1)], axis=1)


def _move(nbytes: float, bps: float, latency: float) -> float:
    """Time to move ``nbytes`` over a path (no time for nothing)."""
    return nbytes / bps + latency if nbytes > 0 else 0.0
