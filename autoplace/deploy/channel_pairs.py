"""A reduction onto channel blocks narrower than a vector, computed over several blocks at once.

The runtime blocks a tensor's channels by 16 when they divide into blocks of 16, else by 8
(:mod:`autoplace.runtime.layout`): squeezenet's classifier, a 1x1 conv to 1,000 channels
(8 x 125), writes blocks of 8. On AVX-512 a vector of one block fills half a register, and
the conv ran at half the rate of the 16-channel ones. :func:`merge_channel_blocks` makes such
a reduction compute ``k`` neighbouring blocks in one vector of ``k x block`` lanes (TVM's
primitives, nothing hand-written):

1. its weight is read through a copy indexed by the block's iterators alone (``pad_einsum``
   takes no composite index): ``w[c // 8, c % 8, ...]`` for ``w[c, ...]``;
2. ``pad_einsum`` pads its channel blocks to a multiple of ``k`` (125 -> 126): the weight is
   padded with zeros, the output computed into a padded buffer that a copy trims;
3. the padded weight is packed with the ``k`` blocks' channels innermost (once, at load, as
   :mod:`autoplace.deploy.prepack` packs every weight) and the block iterates over pairs of
   blocks (``transform_block_layout``), so its innermost iterator runs over ``k x block``
   contiguous channels of the weight and of its accumulator;
4. the write-back (:func:`write_back_merged`) writes each block of the accumulator to its
   own place in the output, skipping the padding's.

Only a kernel whose weight is a constant (layout free) and whose other inputs the blocks do
not index (a conv, a matmul onto blocks; not a depthwise conv) is merged; any other is left
as it was (:class:`ValueError`, or TVM's refusal).
"""

from __future__ import annotations

from tvm import s_tir, tirx
from tvm.tirx import IndexMap

from autoplace.deploy.prepack import PREPROC, free_params
from autoplace.deploy.tir_facts import data_parallel, input_reads, param_of, uses_var
from autoplace.deploy.weight_order import index_terms, split_pieces


def blocks_per_vector(block: int | None, lanes: int) -> int:
    """How many channel blocks of ``block`` channels one vector of ``lanes`` holds (1 when
    a block fills it, or for an output not blocked: ``None``)."""
    return lanes // block if block and lanes % block == 0 else 1


def merge_channel_blocks(sch: s_tir.Schedule, block, lanes: int) -> int:
    """Make reduction ``block`` compute :func:`blocks_per_vector` blocks of channels in one
    vector (the module docstring's steps 1-3); that number. ``ValueError`` (or TVM's
    refusal) when it cannot: the caller's copy of the schedule is then discarded."""
    stmt = sch.get(block)
    k = blocks_per_vector(_block_extent(stmt), lanes)
    if k < 2:
        raise ValueError("its channel blocks fill a vector")
    outer, inner = _channel_vars(stmt)
    index = _weight_read(sch, stmt, outer, inner)
    copy = sch.cache_read(block, index, "global")
    sch.transform_layout(block, ("read", index), _einsum_map(sch.get(block), index))
    sch.pad_einsum(block, [k if iv.var.same_as(outer) else 1 for iv in stmt.iter_vars])
    sch.compute_inline(copy)
    _pack_merged_weight(sch, block, index, k)
    sch.transform_block_layout(block, _merge_map(sch.get(block), k))
    _trim_into_consumer(sch, block)
    return k


def write_back_merged(sch: s_tir.Schedule, block, tile_loop, k: int) -> None:
    """Accumulate merged ``block`` in a ``local`` tile whose ``k`` blocks of channels are
    contiguous, and write it back under ``tile_loop`` through the consumer that trims the
    padding (the epilogue, when the kernel has one), vectorised over a block."""
    write = sch.cache_write(block, 0, "local")
    shape = sch.get(block).writes[0].source.shape
    sch.transform_layout(block, ("write", 0), IndexMap.from_func(
        lambda *i: [i[0], i[1] // k, *i[2:-1], i[1] % k, i[-1]], ndim=len(shape),
        index_dtype=_dtype(shape[0])))
    sch.reverse_compute_at(write, tile_loop)
    (consumer,) = sch.get_consumers(write)
    sch.reverse_compute_at(consumer, tile_loop)
    sch.compute_inline(write)
    sch.vectorize(sch.get_loops(consumer)[-1])


def _block_extent(stmt) -> int | None:
    """The channels of a block of the 5-D blocked output ``stmt`` writes (its last
    dimension, which its innermost data-parallel iterator indexes); None for another."""
    region, spatial = stmt.writes[0].region, data_parallel(stmt)
    if len(region) != 5 or len(spatial) < 2 or not region[-1].min.same_as(spatial[-1]):
        return None
    return int(stmt.writes[0].source.shape[-1])


def _channel_vars(stmt):
    """The iterators of the output's channel block and of the channel within it."""
    region = stmt.writes[0].region
    outer = region[1].min
    if not isinstance(outer, tirx.Var) or not any(outer.same_as(v) for v in data_parallel(stmt)):
        raise ValueError("its output's channel block is not one iterator")
    return outer, region[-1].min


def _weight_read(sch, stmt, outer, inner) -> int:
    """The position of the one read of ``stmt`` that its channel iterators index: a
    constant parameter (the weight). ``ValueError`` when there is not exactly one, or it
    is not constant."""
    found = [(i, r) for i, r in input_reads(stmt)
             if any(uses_var(x.min, outer) or uses_var(x.min, inner) for x in r.region)]
    if len(found) != 1:
        raise ValueError("not exactly one input indexed by the output's channels")
    index, region = found[0]
    if param_of(sch, region.source) not in free_params(sch.mod["main"]):
        raise ValueError("its weight is not a constant: it would be padded on every call")
    return index


def _einsum_map(stmt, index: int) -> IndexMap:
    """The layout of read ``index`` of ``stmt`` in which each index is one iterator: a
    dimension read at ``a * 8 + b`` (``b`` < 8) splits into ``[i // 8, i % 8]``
    (``ValueError`` for an index that is no nest of iterators)."""
    region = stmt.reads[index].region
    extents = {iv.var: int(iv.dom.extent) for iv in stmt.iter_vars}
    coefficients = [[c for _, c in index_terms(x.min, extents)] for x in region]

    def split(*i):
        return [piece for value, c in zip(i, coefficients) for piece in split_pieces(value, c)]

    return IndexMap.from_func(split, ndim=len(region),
                              index_dtype=_dtype(stmt.reads[index].source.shape[0]))


def _pack_merged_weight(sch, block, index: int, k: int) -> None:
    """Lay the padded weight (read ``index`` of ``block``, made by ``pad_einsum``) out with
    ``k`` blocks' channels innermost, contiguous, packed once (:data:`PREPROC`)."""
    stmt = sch.get(block)
    outer, inner = _channel_vars(stmt)
    region = stmt.reads[index].region
    d_out = next(d for d, x in enumerate(region) if x.min.same_as(outer))
    d_in = next(d for d, x in enumerate(region) if x.min.same_as(inner))
    size = int(stmt.reads[index].source.shape[d_in])
    ndim = len(region)
    rest = [d for d in range(ndim) if d not in (d_out, d_in)]
    sch.transform_layout(block, ("read", index), IndexMap.from_func(
        lambda *i: [i[d_out] // k, *(i[d] for d in rest), i[d_out] % k * size + i[d_in]],
        ndim=ndim, index_dtype=_dtype(stmt.reads[index].source.shape[0])))
    (pad,) = [b for b in sch.get_producers(block)
              if sch.get(b).writes[0].source.same_as(sch.get(block).reads[index].source)]
    sch.annotate(pad, PREPROC, True)


def _merge_map(stmt, k: int) -> IndexMap:
    """``stmt``'s iteration with ``k`` channel blocks merged: the block iterator divided by
    ``k``, the channel iterator ``k`` blocks wide."""
    outer, inner = _channel_vars(stmt)
    size = int(stmt.writes[0].source.shape[-1])
    where = [i for i, iv in enumerate(stmt.iter_vars) if iv.var.same_as(outer)][0]
    last = [i for i, iv in enumerate(stmt.iter_vars) if iv.var.same_as(inner)][0]

    def merged(*v):
        out = list(v)
        out[where], out[last] = v[where] // k, v[where] % k * size + v[last]
        return out

    return IndexMap.from_func(merged, ndim=len(stmt.iter_vars),
                              index_dtype=_dtype(stmt.iter_vars[0].var))


def _dtype(index) -> str:
    """The integer type of ``index`` (a kernel's indices are int64 or int32 throughout)."""
    return str(index.ty)


def _trim_into_consumer(sch, block) -> None:
    """Inline the copy that trims the padded output into its consumer (the epilogue),
    when the kernel has one."""
    (trim,) = sch.get_consumers(block)
    if sch.get_consumers(trim):
        sch.compute_inline(trim)

