"""The CPU rules' steps on one block's loop nest (:mod:`autoplace.deploy.cpu_rules`): what a
rule asks of a block (its loops' kinds, its conditions, its inputs), a step tried on a copy
of the schedule (:func:`attempt`), and the rules of the nests that tile no reduction:
inlining an elementwise block, vectorising an elementwise nest or a pooling, and running a
nest's outer loops in parallel (the rules' steps 1, 3 and 4)."""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from autoplace.deploy.tile_plan import largest_divisor
from autoplace.deploy.tir_facts import data_parallel, reads_contiguous

#: iterations of the fused parallel loop enough to keep every core busy (the loops inside
#: it are left alone)
MIN_PARALLEL = 64
#: what TVM raises when a schedule primitive refuses (ScheduleError is a RuntimeError)
REFUSED = (RuntimeError, ValueError)


def attempt(sch: s_tir.Schedule, step, *args) -> s_tir.Schedule:
    """``step(copy of sch, *args)`` applied on a copy, or ``sch`` when TVM refuses it."""
    trial = sch.copy()
    try:
        step(trial, *args)
    except REFUSED:
        return sch
    return trial


def exists(sch: s_tir.Schedule, name: str) -> bool:
    try:
        sch.get_sblock(name)
    except REFUSED:
        return False
    return True


def loop_kinds(sch: s_tir.Schedule, name: str) -> str:
    """One letter per loop of block ``name``: S (spatial), R (reduction), O (other)."""
    block = sch.get(sch.get_sblock(name))
    kind = {tirx.IterVar.DataPar: "S", tirx.IterVar.CommReduce: "R"}
    return "".join(kind.get(iv.iter_type, "O") for iv in block.iter_vars)


def _conditions(sch: s_tir.Schedule, name: str) -> list:
    """The conditions of the ``if_then_else`` calls in block ``name``."""
    calls = []
    tvm_ffi.structural_walk(sch.get(sch.get_sblock(name)).body,
                            (tvm.ir.expr.Call, calls.append))
    return [c.args[0] for c in calls
            if isinstance(c.op, tvm.ir.Op) and c.op.name == "prim.if_then_else"]


def has_if_then_else(sch: s_tir.Schedule, name: str) -> bool:
    return bool(_conditions(sch, name))


def varies_inside(sch: s_tir.Schedule, name: str, inner=None) -> bool:
    """Whether an ``if_then_else`` of block ``name`` depends on ``inner``, by default its
    last iterator (a padding does: its vector would read out of bounds; a concatenation's
    does not)."""
    inner = sch.get(sch.get_sblock(name)).iter_vars[-1].var if inner is None else inner
    uses = []
    for cond in _conditions(sch, name):
        tvm_ffi.structural_walk(cond, (tirx.Var, lambda v: uses.append(v.same_as(inner))))
    return any(uses)


def inline_elementwise(sch: s_tir.Schedule, name: str) -> None:
    """Inline elementwise block ``name`` into its consumers (refused when it is not, and
    for a padding unless only poolings read it)."""
    block = sch.get_sblock(name)
    if set(loop_kinds(sch, name)) != {"S"}:
        raise ValueError(f"{name}: not an inlinable elementwise block")
    if has_if_then_else(sch, name) and not all(
            is_pooling(sch, c) for c in sch.get_consumers(block)):
        raise ValueError(f"{name}: a padding of something other than a pooling")
    sch.compute_inline(block)


def is_pooling(sch: s_tir.Schedule, block) -> bool:
    """Whether ``block`` is a reduction of one input."""
    kinds = loop_kinds(sch, sch.get(block).name_hint)
    return "R" in kinds and "S" in kinds and input_count(sch, block) == 1


def loop_extents(sch: s_tir.Schedule, loops) -> list[int]:
    """Constant trip counts of ``loops`` (refused when one is symbolic)."""
    values = [sch.get(loop).extent for loop in loops]
    if not all(isinstance(v, tirx.IntImm) for v in values):
        raise ValueError("symbolic loop extent")
    return [int(v.value) for v in values]


def input_count(sch: s_tir.Schedule, block) -> int:
    """How many distinct buffers ``block`` reads."""
    seen = []
    for region in sch.get(block).reads:
        if not any(region.source.same_as(b) for b in seen):
            seen.append(region.source)
    return len(seen)


def dtype_bits(sch: s_tir.Schedule, name: str) -> int:
    """Bits of the element block ``name`` writes (refused below 8: booleans)."""
    bits = sch.get(sch.get_sblock(name)).writes[0].source.dtype.bits
    if bits < 8:
        raise ValueError(f"{name}: {bits}-bit elements")
    return bits


def vectorize_reduction(sch, block, first_reduce) -> None:
    """Vectorise the innermost loop of reduction ``block`` and of its initialisation,
    split off before ``first_reduce`` (in this order: TVM vectorises a reduction only while
    it is one block)."""
    sch.vectorize(sch.get_loops(block)[-1])
    init = sch.decompose_reduction(block, first_reduce)
    if sch.get(sch.get_loops(init)[-1]).kind != tirx.ForKind.VECTORIZED:
        sch.vectorize(sch.get_loops(init)[-1])


def vectorize_nest(sch: s_tir.Schedule, name: str, bits: int, parallel: bool) -> None:
    """Vectorise the innermost loop of elementwise block ``name`` (split by the largest
    divisor of its extent up to the vector lanes; refused below 4 lanes, or with an
    ``if_then_else`` that depends on it), its outer loops parallel."""
    block = sch.get_sblock(name)
    loops = sch.get_loops(block)
    if set(loop_kinds(sch, name)) != {"S"} or len(loops) != len(loop_kinds(sch, name)):
        raise ValueError(f"{name}: not a plain elementwise nest")
    if varies_inside(sch, name):
        raise ValueError(f"{name}: its if_then_else depends on the innermost loop")
    tile = largest_divisor(loop_extents(sch, loops[-1:])[0], bits // dtype_bits(sch, name))
    if tile < 4:
        raise ValueError(f"{name}: innermost extent has no vector tile")
    outer, inner = sch.split(loops[-1], [None, tile])
    if parallel:
        parallel_loops(sch, [*loops[:-1], outer])
    sch.vectorize(inner)


def vectorize_pooling(sch: s_tir.Schedule, name: str, bits: int, parallel: bool) -> None:
    """Vectorise pooling ``name`` over its innermost spatial loop (split by the largest
    divisor of its extent up to the vector lanes), the reduction loops moved inside the
    other spatial loops, which are parallel; refused unless its inputs are contiguous in
    that loop and no ``if_then_else`` depends on it, or below 4 lanes."""
    block = sch.get_sblock(name)
    kinds, loops = loop_kinds(sch, name), sch.get_loops(block)
    stmt = sch.get(block)
    if len(loops) != len(kinds) or "O" in kinds or not is_pooling(sch, block):
        raise ValueError(f"{name}: not a plain pooling nest")
    if not reads_contiguous(stmt) or varies_inside(sch, name, data_parallel(stmt)[-1]):
        raise ValueError(f"{name}: no contiguous vector over its innermost spatial loop")
    spatial = [loop for loop, k in zip(loops, kinds) if k == "S"]
    reduce = [loop for loop, k in zip(loops, kinds) if k == "R"]
    tile = largest_divisor(loop_extents(sch, spatial[-1:])[0], bits // dtype_bits(sch, name))
    if tile < 4:
        raise ValueError(f"{name}: innermost extent has no vector tile")
    outer, vector = sch.split(spatial[-1], [None, tile])
    sch.reorder(*spatial[:-1], outer, *reduce, vector)
    if parallel:
        parallel_loops(sch, [*spatial[:-1], outer])
    vectorize_reduction(sch, block, reduce[0])


def parallel_nest(sch: s_tir.Schedule, name: str) -> None:
    """:func:`parallel_loops` of the loops of block ``name``."""
    parallel_loops(sch, sch.get_loops(sch.get_sblock(name)))


def parallel_loops(sch: s_tir.Schedule, loops) -> None:
    """Fuse the fewest leading ``loops`` of a nest that give :data:`MIN_PARALLEL`
    iterations and that TVM lets run in parallel (they bind only data-parallel iterators
    of every block under them), and mark the fused loop parallel; nothing when that is
    one iteration."""
    chosen, extent = 0, 1
    for k, loop in enumerate(loops, start=1):
        trial = sch.copy()
        try:
            trial.parallel(trial.fuse(*loops[:k]) if k > 1 else loops[0])
        except REFUSED:
            break
        chosen, extent = k, extent * _trip_count(sch, loop)
        if extent >= MIN_PARALLEL:
            break
    if extent > 1:
        sch.parallel(sch.fuse(*loops[:chosen]) if chosen > 1 else loops[0])


def _trip_count(sch: s_tir.Schedule, loop) -> int:
    """A loop's trip count (a symbolic one counts as large)."""
    value = sch.get(loop).extent
    return int(value.value) if isinstance(value, tirx.IntImm) else MIN_PARALLEL


def parallel_outer(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with the leading spatial loops of each root loop nest fused and parallel
    (the schedule of a kernel the rules cannot tile, and the first step of every CPU
    schedule: MetaSchedule's ``ParallelizeVectorizeUnroll``, dlight's CPU rules)."""
    return parallel_outer_schedule(s_tir.Schedule(func, error_render_level="none")).mod["main"]


def parallel_outer_schedule(sch: s_tir.Schedule) -> s_tir.Schedule:
    try:
        blocks = sch.get_child_blocks(sch.get_sblock("root"))
    except REFUSED:  # no root block
        return sch
    for block in blocks:
        sch = attempt(sch, parallel_nest, sch.get(block).name_hint)
    return sch
