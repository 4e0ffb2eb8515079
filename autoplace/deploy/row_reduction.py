"""The default schedule of a reduction along rows held contiguously: a softmax's maximum and
sum, a layer norm's mean and variance, a mean over the last axis.

Such a reduction reads each of its inputs along its innermost (contiguous) index, and its
outputs have no axis that index varies along: a vector over an output axis (what
:mod:`autoplace.deploy.cpu_rules` tiles) would gather ``lanes`` elements a row apart. Here
the reduction loop is split by the vector lanes and factored (TVM's ``rfactor``): one block
accumulates a vector of partial results per row, reading the row a vector at a time, and
the block it came from adds the vector's lanes. bert_base's softmax over 12 x 128 x 128 on
one core: 169 us instead of 2,084 (with ``exp`` a polynomial too:
:mod:`autoplace.deploy.fast_math`); its layer norm over 128 x 768: 22 instead of 121
(``experiments/results/bench_kernels_ab.md``).
"""

from __future__ import annotations

from tvm import s_tir

from autoplace.deploy.nest_rules import (
    dtype_bits,
    loop_extents,
    loop_kinds,
    parallel_loops,
)
from autoplace.deploy.tile_plan import largest_divisor
from autoplace.deploy.tir_facts import input_reads, stride, uses_var

#: the fewest lanes a row's vector of partial results is worth making
MIN_LANES = 4


def vectorize_row_reduction(sch: s_tir.Schedule, name: str, bits: int, parallel: bool) -> None:
    """Reduce block ``name`` a vector at a time along its rows (the module docstring), its
    other loops parallel; refused (a ``ValueError``, or TVM's) unless its one reduction loop
    is innermost, every input it indexes is read along it with stride 1 in its last
    dimension only, and its extent has a vector tile of at least :data:`MIN_LANES`."""
    block = sch.get_sblock(name)
    kinds, loops = loop_kinds(sch, name), sch.get_loops(block)
    if len(loops) != len(kinds) or kinds.count("R") != 1 or not kinds.endswith("R"):
        raise ValueError(f"{name}: not a nest of one innermost reduction loop")
    if not along_rows(sch.get(block)):
        raise ValueError(f"{name}: its inputs are not read along their rows")
    lanes = largest_divisor(loop_extents(sch, loops[-1:])[0], bits // dtype_bits(sch, name))
    if lanes < MIN_LANES:
        raise ValueError(f"{name}: its rows have no vector tile")
    _, lane = sch.split(loops[-1], [None, lanes])
    ndim = len(sch.get(block).writes[0].region)  # (the lanes innermost: one store)
    partial = sch.rfactor(lane, factor_axis=ndim)
    sch.vectorize(sch.get_loops(partial)[-1])
    if parallel:
        parallel_loops(sch, sch.get_loops(partial)[:-2])
        parallel_loops(sch, sch.get_loops(sch.get_sblock(name))[:-1])


def along_rows(stmt) -> bool:
    """Whether block ``stmt``'s one reduction iterator indexes some input, and every input
    it indexes only in its last dimension, with stride 1."""
    (var,) = [iv.var for iv in stmt.iter_vars if iv.iter_type != iv.DataPar]
    reads = [r for _, r in input_reads(stmt) if any(uses_var(x.min, var) for x in r.region)]
    return bool(reads) and all(
        stride(r.region[-1].min, var) == 1
        and not any(uses_var(x.min, var) for x in r.region[:-1]) for r in reads)
