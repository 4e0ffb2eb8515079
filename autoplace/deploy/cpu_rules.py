"""The default schedule of a kernel for a CPU: rules, no tuning (MetaSchedule's CPU rules,
with fixed tile sizes instead of sampled ones).

:func:`cpu_schedule` first normalises the kernel (dlight's ``normalize_prim_func``: one loop
per block iterator, unit loops dropped), then, block by block:

1. **inline** every elementwise block that is not an output and computes no
   ``if_then_else`` (a copy or a bias add, not a padding: MetaSchedule's ``AutoInline`` on
   CPU) into its consumers; a padding whose consumers are all poolings too (a pooling
   reads each input a few times, and a padded copy of it costs more than the conditions;
   with step 3, resnet50's 3 x 3 max pool on one core in a run 199 us instead of 599:
   docs/build.md, **Schedules**);
2. **tile every reduction of two inputs** (conv2d, depthwise conv2d, matmul): a vector
   axis and a register axis are split off the spatial loops, and the nest becomes
   ``outer spatial loops | reduction loops | register tile (unrolled) | vector (vectorised)``
   (MetaSchedule's "SSRSRS" with one outer level), accumulating in a ``local`` tile written
   back (with the block's elementwise consumers inlined into the write-back) after the
   reduction loops; the initialisation block, the reduction and the write-back are each
   vectorised over the vector axis;
3. **vectorise** the innermost loop of every remaining elementwise nest (not a padding's:
   its ``if_then_else`` depends on that loop, and a vector of it would read out of bounds),
   and of every pooling (a reduction of one input, which has no data to reuse from
   registers) whose inputs are contiguous in it (NCHWc's channel block,
   :func:`~autoplace.deploy.tir_facts.reads_contiguous`), its reduction loops moved inside
   the other spatial ones;
4. **parallelise** the fused outer spatial loops of every nest, as few as give
   :data:`MIN_PARALLEL` iterations, when the target has more than one core.

The vector axis is the innermost spatial axis (contiguous in the output), tiled by a
divisor of its extent that fills the target's vector registers well; the register axis is
the outermost other spatial axis (output channels, in NCHW). With 128-bit vectors (SSE,
NEON: 4 float32 lanes) a reduction is vectorised over output channels instead, its
accumulator holding them innermost, and the width is the register axis: on one SSE core,
squeezenet's convs take 39.6 ms in all instead of 110.0, resnet50's 248.8 instead of 383.6
(each op counted; before the weights were packed, below). So is, on wider vectors, a
reduction whose width has no vector tile (111 = 3 x 37) or only one that uses less than
three quarters of the lanes of the registers it takes (on AVX2: 13 = 8 + 4 + 1, 27, 55; on
AVX-512: 7, 27, 55), in vectors of the target's width while they leave 4 vectors of
channels, else of 8 (AVX-512: 16 or 8), with a register tile over the width as large as the
registers allow (its largest divisor up to 13). A register tile of a few
columns (111: 3) takes the rows above it as a second register axis (3 x 3).
(:mod:`autoplace.deploy.tile_plan` plans the tiles.) A reduction over the width runs its
output channels' block loop outermost when its input is small enough to be read again by
every block from a core's L2 (:func:`~autoplace.deploy.tile_plan.channels_outermost`), so
that it writes a block's output planes in order rather than every plane from each tile. A
reduction whose output holds its channels in blocks, innermost (NCHWc, as the runtime holds
activations: :mod:`autoplace.runtime.layout`;
:func:`~autoplace.deploy.tir_facts.blocked_output`) is vectorised over the block's channels
with the width in registers
(:func:`~autoplace.deploy.tile_plan.plan_block_tiles`), its channel blocks' loop
outermost, its weights packed in the order its loops read them
(:mod:`autoplace.deploy.weight_order`); blocks narrower than a vector (8 channels on
AVX-512) are computed several to a vector (:mod:`autoplace.deploy.channel_pairs`). A
reduction vectorised over channels reads its weights, for each block of channels its
parallel loop runs, from a copy made there in which the vector's channels are innermost
(:func:`_pack_channel_input`; MLAS's packed weights, made per call and per block): one load
per vector, not one per channel; a weight the kernel marks layout free is packed once
instead (:mod:`autoplace.deploy.prepack`). So does a matrix-vector product (a classifier at
batch 1, whose one spatial axis is its outputs): each vector of outputs then reads one
slab of the weight in order, not a few floats of every row. A conv of stride 2 goes over
channels too
(:func:`~autoplace.deploy.tir_facts.strided_input`): a vector over its output's width would
read every other input
(resnet50's four: 0.64-0.85x the time on AVX-512; on AVX2 its six, with the 14 -> 7 ones,
0.61-0.83x; its whole build 0.95x / 0.97x on one thread / two). A grouped conv's vectors
over channels stay within a group (:func:`~autoplace.deploy.tir_facts.channel_group`: its
lanes divide the group's channels, else it goes over the width): each lane of a vector
across two groups reads its own group's input, and shufflenet's 1x1 conv of 4 groups of 136
channels onto 7 x 7 took 1,675 us on one core in 16-lane vectors, 99 in 8 (its build 15.6 ->
5.3 ms).
(The rules' figures, each against the rules before it: docs/build.md, **Schedules**.)

A step TVM refuses on a block leaves that block as it was (a reduction then only gets its
outer loops parallel: :func:`parallel_outer`); a refused kernel is a slower kernel, never a
failed build. No step changes what a kernel computes: only the order of its loops (and where
a packed weight is read from).
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.s_tir.dlight.analysis import normalize_prim_func
from tvm.tirx import IndexMap

from autoplace.deploy.channel_pairs import merge_channel_blocks, write_back_merged
from autoplace.deploy.prepack import PREPROC, free_params
from autoplace.deploy.tile_plan import (
    Tiles,
    channels_outermost,
    largest_divisor,
    plan_block_tiles,
    plan_reduction_tiles,
)
from autoplace.deploy.tir_facts import (
    activation_bytes,
    blocked_output,
    channel_group,
    data_parallel,
    input_reads,
    param_of,
    reads_contiguous,
    stride,
    strided_input,
    uses_var,
)
from autoplace.deploy.weight_order import reading_order

#: iterations of the fused parallel loop enough to keep every core busy (the loops inside
#: it are left alone)
MIN_PARALLEL = 64
#: what TVM raises when a schedule primitive refuses (ScheduleError is a RuntimeError)
REFUSED = (RuntimeError, ValueError)


def vector_bits(target: tvm.target.Target) -> int:
    """Bits of the widest SIMD register the target's code may use: 512 with AVX-512, 256
    with AVX, else 128 (SSE2, the x86-64 baseline LLVM's ``generic`` CPU has, and NEON)."""
    for feature, bits in (("avx512f", 512), ("avx", 256)):
        try:
            if tvm.target.codegen.target_has_features(feature, target):
                return bits
        except REFUSED:  # not an LLVM target
            return 128
    return 128


def cpu_schedule(func: tirx.PrimFunc, target: tvm.target.Target, parallel: bool) -> tirx.PrimFunc:
    """``func`` scheduled by the rules above for ``target`` (outer loops parallel iff
    ``parallel``); ``func`` with only its outer loops parallel (or as it was) when the
    kernel has a shape the rules do not know."""
    return cpu_schedule_traced(func, target, parallel).mod["main"]


def cpu_schedule_traced(func: tirx.PrimFunc, target: tvm.target.Target,
                        parallel: bool) -> s_tir.Schedule:
    """The schedule :func:`cpu_schedule` makes, with its trace (the steps TVM took, which
    MetaSchedule's database keeps and replays: ``autoplace tune-kernels`` records it)."""
    sch = s_tir.Schedule(func, error_render_level="none")
    infos = normalize_prim_func(sch)
    if infos is None:
        return _parallel_outer(sch) if parallel else sch
    bits = vector_bits(target)
    names = [info.name for info in infos]
    for name in names:
        sch = _attempt(sch, _inline, name)
    for name in names:
        if _exists(sch, name):
            sch = _schedule_block(sch, name, bits, parallel)
    return sch


def _schedule_block(sch: s_tir.Schedule, name: str, bits: int, parallel: bool):
    """``sch`` with block ``name`` tiled (a reduction) or vectorised (elementwise), its outer
    loops parallel; with only its outer loops parallel when TVM refuses the rest."""
    kinds = _kinds(sch, name)
    reduction = "R" in kinds and "S" in kinds  # onto narrow channel blocks, any, a pooling
    for rule in ((_tile_merged_blocks, _tile_reduction, _vectorize_pooling) if reduction
                 else (_vectorize_nest,)):
        done = _attempt(sch, rule, name, bits, parallel)
        if done is not sch:
            return done
    return _attempt(sch, _parallel_nest, name) if parallel else sch


def _attempt(sch: s_tir.Schedule, step, *args) -> s_tir.Schedule:
    """``step(copy of sch, *args)`` applied on a copy, or ``sch`` when TVM refuses it."""
    trial = sch.copy()
    try:
        step(trial, *args)
    except REFUSED:
        return sch
    return trial


def _exists(sch: s_tir.Schedule, name: str) -> bool:
    try:
        sch.get_sblock(name)
    except REFUSED:
        return False
    return True


def _kinds(sch: s_tir.Schedule, name: str) -> str:
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


def _has_if_then_else(sch: s_tir.Schedule, name: str) -> bool:
    return bool(_conditions(sch, name))


def _varies_inside(sch: s_tir.Schedule, name: str, inner=None) -> bool:
    """Whether an ``if_then_else`` of block ``name`` depends on ``inner``, by default its
    last iterator (a padding does: its vector would read out of bounds; a concatenation's
    does not)."""
    inner = sch.get(sch.get_sblock(name)).iter_vars[-1].var if inner is None else inner
    uses = []
    for cond in _conditions(sch, name):
        tvm_ffi.structural_walk(cond, (tirx.Var, lambda v: uses.append(v.same_as(inner))))
    return any(uses)


def _inline(sch: s_tir.Schedule, name: str) -> None:
    """Inline elementwise block ``name`` into its consumers (refused when it is not, and
    for a padding unless only poolings read it)."""
    block = sch.get_sblock(name)
    if set(_kinds(sch, name)) != {"S"}:
        raise ValueError(f"{name}: not an inlinable elementwise block")
    if _has_if_then_else(sch, name) and not all(
            _is_pooling(sch, c) for c in sch.get_consumers(block)):
        raise ValueError(f"{name}: a padding of something other than a pooling")
    sch.compute_inline(block)


def _is_pooling(sch: s_tir.Schedule, block) -> bool:
    """Whether ``block`` is a reduction of one input."""
    kinds = _kinds(sch, sch.get(block).name_hint)
    return "R" in kinds and "S" in kinds and _inputs(sch, block) == 1


def _extents(sch: s_tir.Schedule, loops) -> list[int]:
    """Constant trip counts of ``loops`` (refused when one is symbolic)."""
    values = [sch.get(loop).extent for loop in loops]
    if not all(isinstance(v, tirx.IntImm) for v in values):
        raise ValueError("symbolic loop extent")
    return [int(v.value) for v in values]


def _tile_reduction(sch: s_tir.Schedule, name: str, bits: int, parallel: bool) -> None:
    """Tile reduction block ``name`` as the module docstring says (refused by TVM, or by
    a ``ValueError`` here, when its shape does not allow it)."""
    block, spatial, reduce = _reduction_loops(sch, name)
    lanes = bits // _dtype_bits(sch, name)
    extents, registers = _extents(sch, spatial), 32 if bits >= 512 else 16
    stmt = sch.get(block)
    blocked = blocked_output(stmt)
    tiles = plan_block_tiles(extents, lanes, registers) if blocked else plan_reduction_tiles(
        extents, lanes, registers, strided=strided_input(stmt), group=channel_group(stmt))
    if tiles is None:
        raise ValueError(f"{name}: no spatial axis to vectorise")
    first = not blocked and channels_outermost(tiles, len(spatial),
                                               activation_bytes(stmt, tiles.register))
    outer, inner = _split_tiles(sch, spatial, tiles, channels_first=first, blocks_first=blocked)
    sch.reorder(*outer, *reduce, *inner)
    if tiles.vector == 0 or blocked:  # a vector over output channels (or a matrix-vector
        _pack_channel_input(sch, block, tiles, outer[0])  # product's outputs)
    _write_back(sch, block, outer[-1], _innermost(sch, block, tiles, len(spatial)))
    if parallel:  # before the reduction is split in two blocks (TVM's rule)
        _parallel_loops(sch, outer)
    _vectorize_reduction(sch, block, reduce[0])


def _reduction_loops(sch: s_tir.Schedule, name: str):
    """Reduction block ``name`` and its spatial and reduction loops (refused, by a
    ``ValueError``, when it is not a plain reduction nest of two inputs or more)."""
    block = sch.get_sblock(name)
    kinds, loops = _kinds(sch, name), sch.get_loops(block)
    if len(loops) != len(kinds) or "O" in kinds or _has_if_then_else(sch, name):
        raise ValueError(f"{name}: not a plain reduction nest")
    if _inputs(sch, block) < 2:
        raise ValueError(f"{name}: one input (a pooling): no data to reuse from registers")
    return (block, [loop for loop, k in zip(loops, kinds) if k == "S"],
            [loop for loop, k in zip(loops, kinds) if k == "R"])


def _tile_merged_blocks(sch: s_tir.Schedule, name: str, bits: int, parallel: bool) -> None:
    """Tile reduction block ``name`` onto channel blocks narrower than a vector over
    several blocks at once (:mod:`autoplace.deploy.channel_pairs`), as a blocked output's
    reduction is tiled (:func:`~autoplace.deploy.tile_plan.plan_block_tiles`); refused
    when its blocks fill a vector, or it cannot be merged."""
    block, _, _ = _reduction_loops(sch, name)
    lanes = bits // _dtype_bits(sch, name)
    k = merge_channel_blocks(sch, block, lanes)
    block, spatial, reduce = _reduction_loops(sch, name)
    tiles = plan_block_tiles(_extents(sch, spatial), lanes, 32 if bits >= 512 else 16)
    outer, inner = _split_tiles(sch, spatial, tiles, blocks_first=True)
    sch.reorder(*outer, *reduce, *inner)
    write_back_merged(sch, block, outer[-1], k)
    if parallel:
        _parallel_loops(sch, outer)
    _vectorize_reduction(sch, block, reduce[0])


def _pack_channel_input(sch, block, tiles: Tiles, slab_loop) -> None:
    """Copy, under ``slab_loop``, the slab of the input indexed by the vector axis (a conv's
    weight: its output channels) that the loop's iteration reads into a buffer where the
    vector's channels are innermost, so that each vector of weights is one contiguous load
    rather than ``lanes`` loads a row apart (nothing when not exactly one input is indexed
    by the vector axis). An input the kernel marks layout free (a constant weight:
    :func:`~autoplace.deploy.prepack.layout_free`) is packed whole at the root instead, in
    a block :func:`~autoplace.deploy.prepack.split_packs` splits off, once."""
    stmt = sch.get(block)
    var = data_parallel(stmt)[tiles.vector]
    found = [(i, r) for i, r in input_reads(stmt)  # (a grouped conv's input: by group)
             if any(stride(rng.min, var) for rng in r.region)]
    if len(found) != 1:
        return
    index, region = found[0]
    dim = next(d for d, rng in enumerate(region.region) if uses_var(rng.min, var))
    lanes = tiles.vector_tile
    copy = sch.cache_read(block, index, "global")
    sch.transform_layout(block, ("read", index), reading_order(stmt, index, dim, lanes))
    if param_of(sch, region.source) in free_params(sch.mod["main"]):
        sch.annotate(copy, PREPROC, True)  # a constant: packed once (prepack.split_packs)
    else:
        sch.compute_at(copy, slab_loop)


def _inputs(sch: s_tir.Schedule, block) -> int:
    """How many distinct buffers ``block`` reads."""
    seen = []
    for region in sch.get(block).reads:
        if not any(region.source.same_as(b) for b in seen):
            seen.append(region.source)
    return len(seen)


def _dtype_bits(sch: s_tir.Schedule, name: str) -> int:
    """Bits of the element block ``name`` writes (refused below 8: booleans)."""
    bits = sch.get(sch.get_sblock(name)).writes[0].source.dtype.bits
    if bits < 8:
        raise ValueError(f"{name}: {bits}-bit elements")
    return bits


def _split_tiles(sch, spatial, tiles: Tiles, channels_first: bool = False,
                 blocks_first: bool = False):
    """Split the vector (and register, and row) axes off ``spatial``: (outer loops, the
    register tiles' loops first if any (rows, then columns), then the vector loop). The
    register axes' outer loops come last among the outer loops, so the data of one tile of
    the other axes is reused across them (an input tile across output channels); first
    with ``channels_first`` (:func:`~autoplace.deploy.tile_plan.channels_outermost`).
    ``blocks_first``: an output onto channel blocks whose tile spans several of them (a
    row axis) runs its blocks' outer loop outermost, as a tile of one block does (its block
    loop is the first of the others): each block's weights are read for every output row
    in turn while they are in cache, not once per row (resnet50's 3x3 convs onto 7 x 7,
    512 channels, 4.7 MiB of weights each: 0.6x the time)."""
    v_outer, v_inner = sch.split(spatial[tiles.vector], [None, tiles.vector_tile])
    outer = [v_outer if i == tiles.vector else loop for i, loop in enumerate(spatial)]
    if tiles.register is None:
        return outer, [v_inner]
    registers = [(tiles.row, tiles.row_tile)] if tiles.row is not None else []
    splits = [sch.split(spatial[axis], [None, tile])
              for axis, tile in [*registers, (tiles.register, tiles.register_tile)]]
    for _, r_inner in splits:
        sch.unroll(r_inner)
    taken = {tiles.register, tiles.row}
    others = [loop for i, loop in enumerate(outer) if i not in taken]
    tile_outer = [o for o, _ in splits]
    if blocks_first and tiles.row is not None:
        outer = [tile_outer[0], *others, *tile_outer[1:]]
    else:
        outer = tile_outer + others if channels_first else others + tile_outer
    return outer, [*(i for _, i in splits), v_inner]


def _innermost(sch, block, tiles: Tiles, n_spatial: int) -> int | None:
    """The dimension of ``block``'s output that its vector axis indexes, when that is not
    the last one (a vector over channels); None otherwise. (The output may have leading
    unit dimensions the block binds no iterator to: batch 1.)"""
    if tiles.vector == n_spatial - 1:
        return None
    return tiles.vector + len(sch.get(block).writes[0].source.shape) - n_spatial


def _write_back(sch, block, tile_loop, vector_dim: int | None = None) -> None:
    """Accumulate ``block`` in a ``local`` tile written back under ``tile_loop``, after the
    reduction loops, with the elementwise consumers inlined into the write-back, which is
    vectorised over its innermost loop. ``vector_dim``: the output dimension of a vector
    over channels, made the accumulator's innermost (contiguous) one."""
    write = sch.cache_write(block, 0, "local")
    if vector_dim is not None:
        ndim = len(sch.get(block).writes[0].source.shape)
        order = [d for d in range(ndim) if d != vector_dim] + [vector_dim]
        sch.transform_layout(block, ("write", 0), IndexMap.from_func(
            lambda *index: [index[d] for d in order], ndim=ndim))
    sch.reverse_compute_at(write, tile_loop)
    _inline_consumers(sch, write)
    sch.vectorize(sch.get_loops(write)[-1])


def _vectorize_reduction(sch, block, first_reduce) -> None:
    """Vectorise the innermost loop of reduction ``block`` and of its initialisation,
    split off before ``first_reduce`` (in this order: TVM vectorises a reduction only while
    it is one block)."""
    sch.vectorize(sch.get_loops(block)[-1])
    init = sch.decompose_reduction(block, first_reduce)
    if sch.get(sch.get_loops(init)[-1]).kind != tirx.ForKind.VECTORIZED:
        sch.vectorize(sch.get_loops(init)[-1])


def _inline_consumers(sch, write) -> None:
    """Inline the elementwise consumers of the write-back ``write`` into it, while TVM
    allows (the bias add and activation after a conv)."""
    while True:
        consumers = sch.get_consumers(write)
        if len(consumers) != 1:
            return
        trial = sch.copy()
        try:
            trial.reverse_compute_inline(consumers[0])
        except REFUSED:
            return
        sch.reverse_compute_inline(consumers[0])


def _vectorize_nest(sch: s_tir.Schedule, name: str, bits: int, parallel: bool) -> None:
    """Vectorise the innermost loop of elementwise block ``name`` (split by the largest
    divisor of its extent up to the vector lanes; refused below 4 lanes, or with an
    ``if_then_else`` that depends on it), its outer loops parallel."""
    block = sch.get_sblock(name)
    loops = sch.get_loops(block)
    if set(_kinds(sch, name)) != {"S"} or len(loops) != len(_kinds(sch, name)):
        raise ValueError(f"{name}: not a plain elementwise nest")
    if _varies_inside(sch, name):
        raise ValueError(f"{name}: its if_then_else depends on the innermost loop")
    tile = largest_divisor(_extents(sch, loops[-1:])[0], bits // _dtype_bits(sch, name))
    if tile < 4:
        raise ValueError(f"{name}: innermost extent has no vector tile")
    outer, inner = sch.split(loops[-1], [None, tile])
    if parallel:
        _parallel_loops(sch, [*loops[:-1], outer])
    sch.vectorize(inner)


def _vectorize_pooling(sch: s_tir.Schedule, name: str, bits: int, parallel: bool) -> None:
    """Vectorise pooling ``name`` over its innermost spatial loop (split by the largest
    divisor of its extent up to the vector lanes), the reduction loops moved inside the
    other spatial loops, which are parallel; refused unless its inputs are contiguous in
    that loop and no ``if_then_else`` depends on it, or below 4 lanes."""
    block = sch.get_sblock(name)
    kinds, loops = _kinds(sch, name), sch.get_loops(block)
    stmt = sch.get(block)
    if len(loops) != len(kinds) or "O" in kinds or not _is_pooling(sch, block):
        raise ValueError(f"{name}: not a plain pooling nest")
    if not reads_contiguous(stmt) or _varies_inside(sch, name, data_parallel(stmt)[-1]):
        raise ValueError(f"{name}: no contiguous vector over its innermost spatial loop")
    spatial = [loop for loop, k in zip(loops, kinds) if k == "S"]
    reduce = [loop for loop, k in zip(loops, kinds) if k == "R"]
    tile = largest_divisor(_extents(sch, spatial[-1:])[0], bits // _dtype_bits(sch, name))
    if tile < 4:
        raise ValueError(f"{name}: innermost extent has no vector tile")
    outer, vector = sch.split(spatial[-1], [None, tile])
    sch.reorder(*spatial[:-1], outer, *reduce, vector)
    if parallel:
        _parallel_loops(sch, [*spatial[:-1], outer])
    _vectorize_reduction(sch, block, reduce[0])


def _parallel_nest(sch: s_tir.Schedule, name: str) -> None:
    """:func:`_parallel_loops` of the loops of block ``name``."""
    _parallel_loops(sch, sch.get_loops(sch.get_sblock(name)))


def _parallel_loops(sch: s_tir.Schedule, loops) -> None:
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
    return _parallel_outer(s_tir.Schedule(func, error_render_level="none")).mod["main"]


def _parallel_outer(sch: s_tir.Schedule) -> s_tir.Schedule:
    try:
        blocks = sch.get_child_blocks(sch.get_sblock("root"))
    except REFUSED:  # no root block
        return sch
    for block in blocks:
        sch = _attempt(sch, _parallel_nest, sch.get(block).name_hint)
    return sch
