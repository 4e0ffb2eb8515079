"""The default schedule of a kernel for a CPU: rules, no tuning (MetaSchedule's CPU rules,
with fixed tile sizes instead of sampled ones).

:func:`cpu_schedule` first normalises the kernel (dlight's ``normalize_prim_func``: one loop
per block iterator, unit loops dropped), then, block by block:

1. **inline** every elementwise block that is not an output and computes no
   ``if_then_else`` (a copy or a bias add, not a padding: MetaSchedule's ``AutoInline`` on
   CPU) into its consumers;
2. **tile every reduction of two inputs** (conv2d, depthwise conv2d, matmul: a pooling or
   a mean has no data to reuse from registers, and only gets step 4): a vector axis and a
   register axis are split off the spatial loops, and the nest becomes
   ``outer spatial loops | reduction loops | register tile (unrolled) | vector (vectorised)``
   (MetaSchedule's "SSRSRS" with one outer level), accumulating in a ``local`` tile written
   back (with the block's elementwise consumers inlined into the write-back) after the
   reduction loops; the initialisation block, the reduction and the write-back are each
   vectorised over the vector axis;
3. **vectorise** the innermost loop of every remaining elementwise nest (not a padding's:
   its ``if_then_else`` depends on that loop, and a vector of it would read out of bounds);
4. **parallelise** the fused outer spatial loops of every nest, as few as give
   :data:`MIN_PARALLEL` iterations, when the target has more than one core.

The vector axis is the innermost spatial axis (contiguous in the output), tiled by a
divisor of its extent that fills the target's vector registers well (:func:`plan_tiles`);
the register axis is the outermost other spatial axis (output channels, in NCHW). With
128-bit vectors (SSE, NEON: 4 float32 lanes) a reduction is vectorised over output
channels instead, its accumulator holding them innermost, and the width is the register
axis (:func:`plan_channel_tiles`): on one SSE core, squeezenet's convs take 39.6 ms in all
instead of 110.0, resnet50's 248.8 instead of 383.6 (each op counted). Up to AVX2 (8
lanes), so is a reduction whose width has no vector tile (111 = 3 x 37) or only one that
uses less than three quarters of the lanes of the registers it takes (13 = 8 + 4 + 1, 27,
55), with a register tile over the width as large as the registers allow (its largest
divisor up to 13: :func:`plan_reduction_tiles`). Squeezenet's convs on two znver3 cores,
interleaved, quiet: 22.0 ms -> 10.5 ms in all, each of the 18 that changed faster (1.05x to
4.97x), its last (1000 channels, 13 wide) 7.8 -> 2.2 ms; the model, default schedules
against ONNX Runtime, 4.22x -> 1.93x (experiments/results/bench_deployed_znver3.md).
AVX-512 keeps the width (13 floats fit one register), or only gets the outer loops parallel
(111: a vector across channels, read with a stride, was slower than none there).

A step TVM refuses on a block leaves that block as it was (a reduction then only gets its
outer loops parallel: :func:`parallel_outer`); a refused kernel is a slower kernel, never a
failed build. No step changes what a kernel computes: only the order of its loops.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.s_tir.dlight.analysis import normalize_prim_func
from tvm.tirx import IndexMap

#: iterations of the fused parallel loop enough to keep every core busy (the loops inside
#: it are left alone)
MIN_PARALLEL = 64
#: the largest register tile (accumulator vectors) of a reduction, besides its vector axis
REGISTER_TILE = 8
#: vectors of at most this many elements (128-bit: SSE, NEON, for float32) run reductions
#: vectorised over channels (:func:`plan_channel_tiles`)
NARROW_LANES = 4
#: vectors of at most this many bits (AVX2) run a reduction vectorised over channels when
#: its width has no vector tile (111) or one that fills less than :data:`MIN_WIDTH_FILL` of
#: the lanes of the registers it takes (13 floats: 8 + 4 + 1); wider ones (AVX-512) keep the
#: width (or only get the outer loops parallel)
CHANNELS_UP_TO_BITS = 256
#: the share of its registers' lanes a vector over the width must use to be kept there
MIN_WIDTH_FILL = 0.75
#: what TVM raises when a schedule primitive refuses (ScheduleError is a RuntimeError)
_REFUSED = (RuntimeError, ValueError)


def vector_bits(target: tvm.target.Target) -> int:
    """Bits of the widest SIMD register the target's code may use: 512 with AVX-512, 256
    with AVX, else 128 (SSE2, the x86-64 baseline LLVM's ``generic`` CPU has, and NEON)."""
    for feature, bits in (("avx512f", 512), ("avx", 256)):
        try:
            if tvm.target.codegen.target_has_features(feature, target):
                return bits
        except _REFUSED:  # not an LLVM target
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
    rule = _tile_reduction if "R" in kinds and "S" in kinds else _vectorize_nest
    done = _attempt(sch, rule, name, bits, parallel)
    if done is sch and parallel:
        return _attempt(sch, _parallel_nest, name)
    return done


def _attempt(sch: s_tir.Schedule, step, *args) -> s_tir.Schedule:
    """``step(copy of sch, *args)`` applied on a copy, or ``sch`` when TVM refuses it."""
    trial = sch.copy()
    try:
        step(trial, *args)
    except _REFUSED:
        return sch
    return trial


def _exists(sch: s_tir.Schedule, name: str) -> bool:
    try:
        sch.get_sblock(name)
    except _REFUSED:
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


def _varies_inside(sch: s_tir.Schedule, name: str) -> bool:
    """Whether an ``if_then_else`` of block ``name`` depends on its last iterator (a padding
    does: its vector would read out of bounds; a concatenation's does not)."""
    inner = sch.get(sch.get_sblock(name)).iter_vars[-1].var
    uses = []
    for cond in _conditions(sch, name):
        tvm_ffi.structural_walk(cond, (tirx.Var, lambda v: uses.append(v.same_as(inner))))
    return any(uses)


def _inline(sch: s_tir.Schedule, name: str) -> None:
    """Inline elementwise block ``name`` into its consumers (refused when it is not)."""
    block = sch.get_sblock(name)
    if set(_kinds(sch, name)) != {"S"} or _has_if_then_else(sch, name):
        raise ValueError(f"{name}: not an inlinable elementwise block")
    sch.compute_inline(block)


@dataclass(frozen=True, kw_only=True)
class Tiles:
    """Where a reduction's vector and register tiles go: spatial axes (their index among
    the block's spatial axes) and tile sizes; no register tile when ``register`` is None."""

    vector: int
    vector_tile: int
    register: int | None = None
    register_tile: int = 1


def plan_tiles(extents: list[int], lanes: int, registers: int) -> Tiles | None:
    """The tiles of a reduction with spatial ``extents`` on a CPU with ``registers``
    vector registers of ``lanes`` elements (``None``: nothing to vectorise).

    The vector axis is the innermost one (contiguous in the output), tiled by a divisor of
    its extent of at least 4: the one up to ``lanes`` that fills a register best (the
    largest on ties), else the one up to two registers' lanes that LLVM splits into the
    fewest registers (:func:`_pieces`); ``None`` when it has none (a strided vector across
    channels is slower than none). The register axis is the outermost other axis with
    extent > 1, tiled by its largest divisor up to :data:`REGISTER_TILE` whose
    accumulators leave 4 registers free."""
    last = len(extents) - 1
    fits = [d for d in range(4, 2 * lanes + 1) if extents[last] % d == 0]
    if not fits:
        return None
    small = [d for d in fits if d <= lanes]
    tile = max(small) if small else min(fits, key=lambda d: (_pieces(d, lanes), -d))
    most = min(REGISTER_TILE, (registers - 4) // _pieces(tile, lanes))
    for axis, extent in enumerate(extents[:last]):
        if extent > 1 and _divisor(extent, most) > 1:
            return Tiles(vector=last, vector_tile=tile, register=axis,
                         register_tile=_divisor(extent, most))
    return Tiles(vector=last, vector_tile=tile)


def plan_reduction_tiles(extents: list[int], lanes: int, registers: int,
                         bits: int) -> Tiles | None:
    """The tiles of a reduction with spatial ``extents`` (``lanes`` per vector of ``bits``,
    ``registers`` vector registers): over channels with narrow vectors; over the width
    (:func:`plan_tiles`), unless, up to :data:`CHANNELS_UP_TO_BITS`, the width has no
    vector tile or one that fills less than :data:`MIN_WIDTH_FILL` of its registers' lanes:
    then over channels with a register tile of the width as large as the registers allow
    (the module docstring gives what it gained)."""
    if lanes <= NARROW_LANES:
        tiles = plan_channel_tiles(extents, lanes, registers)
        if tiles is not None:
            return tiles
    width = plan_tiles(extents, lanes, registers)
    if bits > CHANNELS_UP_TO_BITS or (width is not None and _fill(width, lanes) >=
                                      MIN_WIDTH_FILL):
        return width
    return plan_channel_tiles(extents, lanes, registers, most=registers - 3) or width


def _fill(tiles: Tiles, lanes: int) -> float:
    """The share of the lanes of the registers a vector tile takes that it uses."""
    return tiles.vector_tile / (_pieces(tiles.vector_tile, lanes) * lanes)


def plan_channel_tiles(extents: list[int], lanes: int, registers: int,
                       most: int | None = None) -> Tiles | None:
    """Tiles of a reduction vectorised over channels (narrow vectors, ``lanes`` <=
    :data:`NARROW_LANES`, or a width that vectorises badly): the vector axis is the largest
    spatial axis but the innermost whose extent ``lanes`` divides (output channels, in
    NCHW), tiled by ``lanes``; the register axis is the innermost one, tiled by its largest
    divisor up to ``most`` (default :data:`REGISTER_TILE`, accumulators leaving 4 registers
    free). None when no axis but the innermost divides into vectors."""
    last = len(extents) - 1
    axes = [i for i in range(last) if extents[i] % lanes == 0 and extents[i] > 1]
    if not axes:
        return None
    vector = max(axes, key=lambda i: (extents[i], -i))
    tile = _divisor(extents[last], most or min(REGISTER_TILE, registers - 4))
    return Tiles(vector=vector, vector_tile=lanes, register=last if tile > 1 else None,
                 register_tile=tile)


def _pieces(tile: int, lanes: int) -> int:
    """Registers a vector of ``tile`` elements takes once LLVM legalises it: one when it
    fits in one register (widened), else a register per ``lanes`` and one per power of
    two of the rest."""
    return 1 if tile <= lanes else tile // lanes + bin(tile % lanes).count("1")


def _divisor(extent: int, most: int) -> int:
    """The largest divisor of ``extent`` up to ``most`` (at least 1)."""
    return max(d for d in range(1, max(1, min(extent, most)) + 1) if extent % d == 0)


def _extents(sch: s_tir.Schedule, loops) -> list[int]:
    """Constant trip counts of ``loops`` (refused when one is symbolic)."""
    values = [sch.get(loop).extent for loop in loops]
    if not all(isinstance(v, tirx.IntImm) for v in values):
        raise ValueError("symbolic loop extent")
    return [int(v.value) for v in values]


def _tile_reduction(sch: s_tir.Schedule, name: str, bits: int, parallel: bool) -> None:
    """Tile reduction block ``name`` as the module docstring says (refused by TVM, or by
    a ``ValueError`` here, when its shape does not allow it)."""
    block = sch.get_sblock(name)
    kinds, loops = _kinds(sch, name), sch.get_loops(block)
    if len(loops) != len(kinds) or "O" in kinds or _has_if_then_else(sch, name):
        raise ValueError(f"{name}: not a plain reduction nest")
    if _inputs(sch, block) < 2:
        raise ValueError(f"{name}: one input (a pooling): no data to reuse from registers")
    spatial = [loop for loop, k in zip(loops, kinds) if k == "S"]
    reduce = [loop for loop, k in zip(loops, kinds) if k == "R"]
    lanes = bits // _dtype_bits(sch, name)
    extents, registers = _extents(sch, spatial), 32 if bits >= 512 else 16
    tiles = plan_reduction_tiles(extents, lanes, registers, bits)
    if tiles is None:
        raise ValueError(f"{name}: no spatial axis to vectorise")
    outer, inner = _split_tiles(sch, spatial, tiles)
    sch.reorder(*outer, *reduce, *inner)
    _write_back(sch, block, outer[-1], _innermost(sch, block, tiles, len(spatial)))
    if parallel:  # before the reduction is split in two blocks (TVM's rule)
        _parallel_loops(sch, outer)
    _vectorize_reduction(sch, block, reduce[0])


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


def _split_tiles(sch, spatial, tiles: Tiles):
    """Split the vector (and register) axis off ``spatial``: (outer loops, the register
    tile's loop first if any, then the vector loop). The register axis's outer loop comes
    last among the outer loops, so the data of one tile of the other axes is reused across
    it (an input tile across output channels)."""
    v_outer, v_inner = sch.split(spatial[tiles.vector], [None, tiles.vector_tile])
    outer = [v_outer if i == tiles.vector else loop for i, loop in enumerate(spatial)]
    if tiles.register is None:
        return outer, [v_inner]
    r_outer, r_inner = sch.split(spatial[tiles.register], [None, tiles.register_tile])
    sch.unroll(r_inner)
    outer = [loop for i, loop in enumerate(outer) if i != tiles.register] + [r_outer]
    return outer, [r_inner, v_inner]


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
        except _REFUSED:
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
    tile = _divisor(_extents(sch, loops[-1:])[0], bits // _dtype_bits(sch, name))
    if tile < 4:
        raise ValueError(f"{name}: innermost extent has no vector tile")
    outer, inner = sch.split(loops[-1], [None, tile])
    if parallel:
        _parallel_loops(sch, [*loops[:-1], outer])
    sch.vectorize(inner)


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
        except _REFUSED:
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
    except _REFUSED:  # no root block
        return sch
    for block in blocks:
        sch = _attempt(sch, _parallel_nest, sch.get(block).name_hint)
    return sch
