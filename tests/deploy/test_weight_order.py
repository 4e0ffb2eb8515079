"""Packed weights in the order the loops read them (deploy.weight_order), and a conv onto
channel blocks run block by block (deploy.cpu_rules)."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
import tvm_ffi
from deploy.test_schedule import _run
from factories import block_nests
from tvm import te, tirx
from tvm.sym import Analyzer

from autoplace.deploy.prepack import layout_free
from autoplace.deploy.schedule import default_schedule
from autoplace.deploy.weight_order import index_terms, split_pieces

#: scheduled for, never run on: 16 float32 lanes, 32 registers; the schedule then runs on
#: this machine's CPU, whose LLVM splits a vector wider than its registers
AVX512 = tvm.target.Target({"kind": "llvm", "num-cores": 2, "mcpu": "x86-64-v4"})
HERE = tvm.target.Target({"kind": "llvm", "num-cores": 2})


def blocked_conv3x3():
    """A 3x3 conv of 32 channels (NCHW16c) onto 64 (4 blocks of 16) and 9 x 9, as the
    runtime's layout writes one: an iterator per block of channels and one within it, its
    weight a constant. Its tile on AVX-512 spans 2 channel blocks by the width of 9 (18
    accumulators; 4 blocks would take 4 x 3)."""
    x = te.placeholder((1, 2, 11, 11, 16), name="x")
    w = te.placeholder((64, 32, 3, 3), name="w")
    rc, ri = te.reduce_axis((0, 2), name="rc"), te.reduce_axis((0, 16), name="ri")
    ry, rx = te.reduce_axis((0, 3), name="ry"), te.reduce_axis((0, 3), name="rx")
    conv = te.compute((1, 4, 9, 9, 16), lambda n, c, h, v, i: te.sum(
        x[n, rc, h + ry, v + rx, ri] * w[c * 16 + i, rc * 16 + ri, ry, rx],
        axis=[rc, ry, rx, ri]), name="conv")
    return layout_free(te.create_prim_func([x, w, conv]), [1])


def _reduction(func: tirx.PrimFunc):
    """(block, binding values, loops around it) of ``func``'s reduction update."""
    return [(b, v, a) for b, v, a in block_nests(func.body) if any(
        iv.iter_type == tirx.IterVar.CommReduce for iv in b.iter_vars)][0]


def _at(expr, values: dict):
    """``expr`` with the loop variables named in ``values`` (name -> int) replaced,
    simplified."""
    def value(v):
        return tirx.IntImm(str(v.ty), values[v.name]) if v.name in values else v
    return Analyzer().simplify(tvm_ffi.structural_map(expr, (tirx.Var, value)))


def _binding(block, values, dim: int):
    """What the loops bind the iterator that indexes dimension ``dim`` of ``block``'s
    output to (NCHWc: 1 the channel block, 2 the row)."""
    var = block.writes[0].region[dim].min
    return next(v for iv, v in zip(block.iter_vars, values) if iv.var.same_as(var))


def test_index_terms_name_each_iterator_of_a_nest_with_its_coefficient():
    a, b = tirx.Var("a", "int64"), tirx.Var("b", "int64")
    extents = {a: 4, b: 8}
    assert [(v.name, c) for v, c in index_terms(a * 8 + b, extents)] == [("a", 8), ("b", 1)]
    assert [(v.name, c) for v, c in index_terms(b, extents)] == [("b", 1)]
    assert index_terms(tirx.IntImm("int64", 0), extents) == []
    with pytest.raises(ValueError, match="no nest of iterators"):
        index_terms(a * 3 + b, extents)  # (b runs to 8: a and b overlap)


@pytest.mark.parametrize("value, coefficients, pieces", [
    (45, [8, 1], [5, 5]),
    (45, [12, 4, 1], [3, 2, 1]),
    (45, [1], [45]),
])
def test_split_pieces_inverts_a_nest_of_iterators(value, coefficients, pieces):
    assert split_pieces(value, coefficients) == pieces
    assert sum(p * c for p, c in zip(pieces, coefficients)) == value


def test_a_blocked_conv_reads_its_packed_weight_in_reading_order_and_computes_the_same():
    """The weight of a 3x3 conv onto blocks is packed as ``[out block, in block, kh, kw, in
    channel, out channel]``: the innermost reduction loop (the channel within an input
    block) steps through it one vector of output channels at a time, contiguously."""
    func = blocked_conv3x3()
    scheduled = default_schedule(func, AVX512)
    block, _, around = _reduction(scheduled)
    (packed,) = [r for r in block.reads if r.source.name.endswith("_global")]
    assert [int(d) for d in packed.source.shape] == [4, 2, 3, 3, 16, 16]
    ri = block.iter_vars[-1]  # (the channel within an input block: innermost)
    assert ri.iter_type == tirx.IterVar.CommReduce and int(ri.dom.extent) == 16
    assert packed.region[-2].min.same_as(ri.var)
    assert around[-1].kind == tirx.ForKind.VECTORIZED and int(around[-1].extent) == 16
    np.testing.assert_allclose(_run(scheduled, HERE), _run(func), rtol=1e-4, atol=1e-4)


def test_a_tile_of_several_channel_blocks_runs_its_blocks_outermost():
    """With 2 channel blocks a tile, the outermost (parallel) loop runs every row of one
    pair of blocks before the next pair: its next iteration moves to the next row, the
    same blocks (before, it moved to the next blocks, and each row read every weight)."""
    scheduled = default_schedule(blocked_conv3x3(), AVX512)
    block, values, around = _reduction(scheduled)
    outer = around[0]
    assert outer.kind == tirx.ForKind.PARALLEL
    first = {loop.loop_var.name: 0 for loop in around}
    second = {**first, outer.loop_var.name: 1}
    channel_block, row = (_binding(block, values, d) for d in (1, 2))
    assert int(_at(channel_block, first)) == int(_at(channel_block, second)) == 0
    assert (int(_at(row, first)), int(_at(row, second))) == (0, 1)
    last = {**first, outer.loop_var.name: int(outer.extent) - 1}
    assert (int(_at(channel_block, last)), int(_at(row, last))) == (2, 8)


def test_a_weight_read_at_no_nest_of_iterators_keeps_that_dimension_whole():
    """A weight read at ``w[c * 16 + i, rc + ri]`` (two iterators of stride 1: no nest to
    split) is still packed by its output channels, its other dimension whole, and the conv
    computes what it did."""
    x = te.placeholder((1, 2, 4, 4, 16), name="x")
    w = te.placeholder((32, 17), name="w")
    rc, ri = te.reduce_axis((0, 2), name="rc"), te.reduce_axis((0, 16), name="ri")
    conv = te.compute((1, 2, 4, 4, 16), lambda n, c, h, v, i: te.sum(
        x[n, rc, h, v, ri] * w[c * 16 + i, rc + ri], axis=[rc, ri]), name="conv")
    func = layout_free(te.create_prim_func([x, w, conv]), [1])
    scheduled = default_schedule(func, AVX512)
    block, _, _ = _reduction(scheduled)
    (packed,) = [r for r in block.reads if r.source.name.endswith("_global")]
    assert [int(d) for d in packed.source.shape] == [2, 17, 16]
    np.testing.assert_allclose(_run(scheduled, HERE), _run(func), rtol=1e-4, atol=1e-4)
