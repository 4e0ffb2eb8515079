"""Facts about a TensorIR block that the CPU rules read (:mod:`autoplace.deploy.cpu_rules`,
:mod:`autoplace.deploy.channel_pairs`): its iterators, what it reads, how an index uses an
iterator, and what those say of it: its output in channel blocks, a strided input, its
groups, the bytes of the activations it reads again. Reads only; no schedule primitive."""

from __future__ import annotations

import math

import tvm_ffi
from tvm import tirx
from tvm.sym.pattern import detect_linear_equation


def data_parallel(stmt) -> list:
    """The data-parallel iterators of block ``stmt``, in order."""
    return [iv.var for iv in stmt.iter_vars if iv.iter_type == tirx.IterVar.DataPar]


def input_reads(stmt) -> list:
    """(position, region) of each read of block ``stmt`` of a buffer it does not write."""
    written = [w.source for w in stmt.writes]
    return [(i, r) for i, r in enumerate(stmt.reads)
            if not any(r.source.same_as(w) for w in written)]


def stride(expr, var) -> int:
    """The coefficient of ``var`` in ``expr`` (0 when ``expr`` is not linear in it)."""
    found = detect_linear_equation(expr, [var]) if uses_var(expr, var) else []
    return abs(int(found[0])) if found else 0


def param_of(sch, buffer) -> int | None:
    """The position of the parameter whose buffer is ``buffer`` (None: not a parameter)."""
    return next((k for k, p in enumerate(sch.mod["main"].params) if p.same_as(buffer)), None)


def uses_var(expr, var) -> bool:
    """Whether ``expr`` reads ``var``."""
    return any(v.same_as(var) for v in tirx.analysis.undefined_vars(expr))


def reads_contiguous(stmt) -> bool:
    """Whether every input block ``stmt`` reads has its innermost data-parallel iterator
    as its innermost index, stride 1 (a pooling of NCHWc activations: its vector over the
    block's channels loads them at once; one over an NCHW width of stride 2 would not)."""
    inner = data_parallel(stmt)[-1]
    reads = input_reads(stmt)
    return bool(reads) and all(stride(r.region[-1].min, inner) == 1 for _, r in reads)


def reused_axes(stmt) -> frozenset[int]:
    """The data-parallel iterators (their positions) of block ``stmt`` that no input
    indexed by its innermost one is indexed by linearly: a register tile over one of them
    reuses every vector such an input loads (a conv's output channels, a matmul's rows; a
    grouped conv's output channels too, which pick their group's input by a division, the
    same for a tile within it; not a batched matmul's batch, each of whose matrices is
    another, nor a depthwise conv's channels)."""
    spatial = data_parallel(stmt)
    vector_read = [r for _, r in input_reads(stmt)
                   if any(uses_var(rng.min, spatial[-1]) for rng in r.region)]
    return frozenset(k for k, var in enumerate(spatial)
                     if not any(stride(rng.min, var) for r in vector_read for rng in r.region))


def blocked_output(stmt) -> bool:
    """Whether block ``stmt`` writes an output whose channels are in blocks, innermost (an
    NCHWc tensor: :mod:`autoplace.runtime.layout`): 5-D, its last index the block's
    innermost data-parallel iterator, with another before it (the width)."""
    region, spatial = stmt.writes[0].region, data_parallel(stmt)
    return len(region) == 5 and len(spatial) >= 2 and region[-1].min.same_as(spatial[-1])


def strided_input(stmt) -> bool:
    """Whether block ``stmt`` reads an input with a stride over its innermost data-parallel
    iterator (a conv of stride 2: a vector over the output's width would read every other
    element) that its first one (output channels) does not index (a depthwise conv's input
    is: a vector over its channels would read as many planes)."""
    spatial = data_parallel(stmt)
    return any(stride(rng.min, spatial[-1]) > 1 and
               not any(uses_var(other.min, spatial[0]) for other in r.region)
               for _, r in input_reads(stmt) for rng in r.region)


def channel_group(stmt) -> int | None:
    """The output channels of a group when block ``stmt`` is a grouped conv: the divisor
    by which an input read divides a data-parallel iterator (``ff // 136 * 136 + rc``: a
    group's input channels are the group's own), or their greatest common divisor; None
    when no read divides one."""
    spatial, divisions = data_parallel(stmt), []
    for _, r in input_reads(stmt):
        for rng in r.region:
            tvm_ffi.structural_walk(rng.min, (tirx.FloorDiv, divisions.append))
    found = [int(d.b.value) for d in divisions if isinstance(d.b, tirx.IntImm)
             and any(uses_var(d.a, v) for v in spatial)]
    return math.gcd(*found) if found else None


def activation_bytes(stmt, register: int | None) -> float:
    """Bytes of the buffers block ``stmt`` reads that its data-parallel iterator number
    ``register`` (a register tile's axis) does not index (a conv's input, where that axis is
    its output channels); 0 without one (None), infinite when one of those buffers has a
    symbolic shape."""
    if register is None:
        return 0
    var, seen, total = data_parallel(stmt)[register], [], 0.0
    for _, r in input_reads(stmt):
        if any(r.source.same_as(b) for b in seen) or any(uses_var(x.min, var)
                                                          for x in r.region):
            continue
        seen.append(r.source)
        if not all(isinstance(d, tirx.IntImm) for d in r.source.shape):
            return math.inf
        total += math.prod(int(d.value) for d in r.source.shape) * r.source.dtype.bits / 8
    return total
