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
   A reduction that reads its inputs along their contiguous rows and has no output axis
   they vary along (a softmax's maximum and sum, a layer norm's moments) is reduced a
   vector at a time per row instead (:mod:`autoplace.deploy.row_reduction`);
3. **vectorise** the innermost loop of every remaining elementwise nest (not a padding's:
   its ``if_then_else`` depends on that loop, and a vector of it would read out of bounds),
   and of every pooling (a reduction of one input, which has no data to reuse from
   registers) whose inputs are contiguous in it (NCHWc's channel block,
   :func:`~autoplace.deploy.tir_facts.reads_contiguous`), its reduction loops moved inside
   the other spatial ones;
4. **parallelise** the fused outer spatial loops of every nest, as few as give
   :data:`~autoplace.deploy.nest_rules.MIN_PARALLEL` iterations, when the target has more
   than one core.

The vector axis is the innermost spatial axis (contiguous in the output), tiled by a
divisor of its extent that fills the target's vector registers well (two registers' lanes
when they divide it); the register axis is the outermost other spatial axis that the inputs
the vector loads do not vary along (output channels, in NCHW; a batched matmul's rows, not
its batch). A constant such a vector reads (a matmul's ``(k, n)`` weight) is packed by
vectors of columns, ``(n / tile, k, tile)``, so that the slab a vector reads is one run of
memory. With 128-bit vectors (SSE,
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

Steps 1, 3 and 4, and the queries every rule makes of a block, are in
:mod:`autoplace.deploy.nest_rules`. A step TVM refuses on a block leaves that block as it
was (a reduction then only gets its outer loops parallel:
:func:`~autoplace.deploy.nest_rules.parallel_outer`); a refused kernel is a slower kernel,
never a failed build. No step changes what a kernel computes: only the order of its loops (and where
a packed weight is read from).
"""

from __future__ import annotations

import tvm
from tvm import s_tir, tirx
from tvm.s_tir.dlight.analysis import normalize_prim_func
from tvm.tirx import IndexMap

from autoplace.deploy.channel_pairs import merge_channel_blocks, write_back_merged
from autoplace.deploy.nest_rules import (
    REFUSED,
    attempt,
    dtype_bits,
    exists,
    has_if_then_else,
    inline_elementwise,
    input_count,
    loop_extents,
    loop_kinds,
    parallel_loops,
    parallel_nest,
    parallel_outer_schedule,
    vectorize_nest,
    vectorize_pooling,
    vectorize_reduction,
)
from autoplace.deploy.prepack import PREPROC, free_params
from autoplace.deploy.row_reduction import vectorize_row_reduction
from autoplace.deploy.tile_plan import (
    Tiles,
    channels_outermost,
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
    reused_axes,
    stride,
    strided_input,
    uses_var,
)
from autoplace.deploy.weight_order import reading_order


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
        return parallel_outer_schedule(sch) if parallel else sch
    bits = vector_bits(target)
    names = [info.name for info in infos]
    for name in names:
        sch = attempt(sch, inline_elementwise, name)
    for name in names:
        if exists(sch, name):
            sch = _schedule_block(sch, name, bits, parallel)
    return sch


def _schedule_block(sch: s_tir.Schedule, name: str, bits: int, parallel: bool):
    """``sch`` with block ``name`` tiled (a reduction) or vectorised (elementwise), its outer
    loops parallel; with only its outer loops parallel when TVM refuses the rest."""
    kinds = loop_kinds(sch, name)
    reduction = "R" in kinds and "S" in kinds  # onto narrow channel blocks, any, a pooling
    for rule in ((_tile_merged_blocks, vectorize_row_reduction, _tile_reduction,
                  vectorize_pooling) if reduction else (vectorize_nest,)):
        done = attempt(sch, rule, name, bits, parallel)
        if done is not sch:
            return done
    return attempt(sch, parallel_nest, name) if parallel else sch


def _tile_reduction(sch: s_tir.Schedule, name: str, bits: int, parallel: bool) -> None:
    """Tile reduction block ``name`` as the module docstring says (refused by TVM, or by
    a ``ValueError`` here, when its shape does not allow it)."""
    block, spatial, reduce = _reduction_loops(sch, name)
    lanes = bits // dtype_bits(sch, name)
    extents, registers = loop_extents(sch, spatial), 32 if bits >= 512 else 16
    stmt = sch.get(block)
    blocked = blocked_output(stmt)
    tiles = plan_block_tiles(extents, lanes, registers) if blocked else plan_reduction_tiles(
        extents, lanes, registers, strided=strided_input(stmt), group=channel_group(stmt),
        reused=reused_axes(stmt))
    if tiles is None:
        raise ValueError(f"{name}: no spatial axis to vectorise")
    first = not blocked and channels_outermost(tiles, len(spatial),
                                               activation_bytes(stmt, tiles.register))
    outer, inner = _split_tiles(sch, spatial, tiles, channels_first=first, blocks_first=blocked)
    sch.reorder(*outer, *reduce, *inner)
    # a vector over output channels (or a matrix-vector product's outputs), or a constant
    _pack_channel_input(sch, block, tiles, outer[0],  # read by a vector over columns
                        constant_only=not (tiles.vector == 0 or blocked))
    _write_back(sch, block, outer[-1], _innermost(sch, block, tiles, len(spatial)))
    if parallel:  # before the reduction is split in two blocks (TVM's rule)
        parallel_loops(sch, outer)
    vectorize_reduction(sch, block, reduce[0])


def _reduction_loops(sch: s_tir.Schedule, name: str):
    """Reduction block ``name`` and its spatial and reduction loops (refused, by a
    ``ValueError``, when it is not a plain reduction nest of two inputs or more)."""
    block = sch.get_sblock(name)
    kinds, loops = loop_kinds(sch, name), sch.get_loops(block)
    if len(loops) != len(kinds) or "O" in kinds or has_if_then_else(sch, name):
        raise ValueError(f"{name}: not a plain reduction nest")
    if input_count(sch, block) < 2:
        raise ValueError(f"{name}: one input (a pooling): no data to reuse from registers")
    return (block, [loop for loop, k in zip(loops, kinds) if k == "S"],
            [loop for loop, k in zip(loops, kinds) if k == "R"])


def _tile_merged_blocks(sch: s_tir.Schedule, name: str, bits: int, parallel: bool) -> None:
    """Tile reduction block ``name`` onto channel blocks narrower than a vector over
    several blocks at once (:mod:`autoplace.deploy.channel_pairs`), as a blocked output's
    reduction is tiled (:func:`~autoplace.deploy.tile_plan.plan_block_tiles`); refused
    when its blocks fill a vector, or it cannot be merged."""
    block, _, _ = _reduction_loops(sch, name)
    lanes = bits // dtype_bits(sch, name)
    k = merge_channel_blocks(sch, block, lanes)
    block, spatial, reduce = _reduction_loops(sch, name)
    tiles = plan_block_tiles(loop_extents(sch, spatial), lanes, 32 if bits >= 512 else 16)
    outer, inner = _split_tiles(sch, spatial, tiles, blocks_first=True)
    sch.reorder(*outer, *reduce, *inner)
    write_back_merged(sch, block, outer[-1], k)
    if parallel:
        parallel_loops(sch, outer)
    vectorize_reduction(sch, block, reduce[0])


def _pack_channel_input(sch, block, tiles: Tiles, slab_loop, constant_only=False) -> None:
    """Copy, under ``slab_loop``, the slab of the input indexed by the vector axis (a conv's
    weight: its output channels) that the loop's iteration reads into a buffer where the
    vector's channels are innermost, so that each vector of weights is one contiguous load
    rather than ``lanes`` loads a row apart (nothing when not exactly one input is indexed
    by the vector axis). An input the kernel marks layout free (a constant weight:
    :func:`~autoplace.deploy.prepack.layout_free`) is packed whole at the root instead, in
    a block :func:`~autoplace.deploy.prepack.split_packs` splits off, once.
    ``constant_only``: only such an input (a matmul's weight read by a vector over its
    columns: its slab then lies in one run of memory, not one row a whole row of columns
    apart from the next, which for bert_base's 768 x 3072 weight maps every row of it to
    the same few cache sets)."""
    stmt = sch.get(block)
    var = data_parallel(stmt)[tiles.vector]
    found = [(i, r) for i, r in input_reads(stmt)  # (a grouped conv's input: by group)
             if any(stride(rng.min, var) for rng in r.region)]
    if len(found) != 1:
        return
    index, region = found[0]
    constant = param_of(sch, region.source) in free_params(sch.mod["main"])
    if constant_only and not constant:
        return
    dim = next(d for d, rng in enumerate(region.region) if uses_var(rng.min, var))
    lanes = tiles.vector_tile
    copy = sch.cache_read(block, index, "global")
    sch.transform_layout(block, ("read", index), reading_order(stmt, index, dim, lanes))
    if constant:
        sch.annotate(copy, PREPROC, True)  # a constant: packed once (prepack.split_packs)
    else:
        sch.compute_at(copy, slab_loop)


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
