"""The layout of a packed weight: each dimension split by the iterators that index it, the
pieces in the order the kernel's loops read them.

A conv onto channel blocks (NCHWc) reads its input channels as ``block * 16 + channel``,
and its reduction loops run over the input's block, the kernel's rows and columns, then the
channel within the block. Packed as ``[out block, in channel, kh, kw, out channel]``, the
weight vectors one 3x3 conv step reads (16 channels within an input block) lie
``9 x 64`` bytes apart; packed in reading order, ``[out block, in block, kh, kw, in channel,
out channel]`` (MLAS's NCHWc filter layout), they are one contiguous run of 1 KiB. No
TVM schedule primitive here: :func:`reading_order` builds the ``IndexMap`` that
:mod:`autoplace.deploy.cpu_rules` hands to ``transform_layout``.
"""

from __future__ import annotations

from tvm import tirx
from tvm.tirx import IndexMap

from autoplace.deploy.tir_facts import stride, uses_var


def index_terms(expr, extents: dict) -> list[tuple]:
    """The iterators of index ``expr`` with their coefficients, largest first, for a nest
    of iterators (``a * 8 + b``, ``b`` < 8: ``[(a, 8), (b, 1)]``); [] for a constant.
    ``extents``: each iterator's extent. ``ValueError`` for another form."""
    if isinstance(expr, tirx.IntImm):
        return []
    if isinstance(expr, tirx.Var):
        return [(expr, 1)]
    terms = sorted(((stride(expr, var), var, extent) for var, extent in extents.items()
                    if uses_var(expr, var)), key=lambda t: -t[0])
    if not terms or terms[-1][0] != 1 or any(c == 0 for c, _, _ in terms) or any(
            c != c_next * e_next for (c, _, _), (c_next, _, e_next) in zip(terms, terms[1:])):
        raise ValueError("an index that is no nest of iterators")
    return [(var, c) for c, var, _ in terms]


def split_pieces(value, coefficients: list[int]) -> list:
    """``value`` split at ``coefficients`` (largest first, the last 1): ``[value // 8,
    value % 8]`` for ``[8, 1]``; ``[value]`` for one or none."""
    if len(coefficients) < 2:
        return [value]
    pieces = [value // coefficients[0]]
    pieces += [value % outer // inner for outer, inner in zip(coefficients, coefficients[1:-1])]
    return [*pieces, value % coefficients[-2]]


def reading_order(stmt, index: int, dim: int, lanes: int) -> IndexMap:
    """The packed layout of read ``index`` of block ``stmt`` (a weight) whose dimension
    ``dim`` the block's vector indexes, ``lanes`` at a time: that dimension's vectors
    outermost and their lanes innermost (as the rules pack it), every other dimension split
    by the iterators that index it (:func:`index_terms`), the pieces ordered as the
    block's iterators are (its loops' order: spatial, then reduction). A dimension indexed
    by a constant, or by no nest of iterators, stays whole, after the piece before it."""
    region = stmt.reads[index].region
    extents = {iv.var: int(iv.dom.extent) for iv in stmt.iter_vars}
    terms = [_terms_or_whole(x.min, extents) for x in region]
    keys, last = [], -1  # (dimension, piece, position: a whole one stays after the last)
    for d, dim_terms in enumerate(terms):
        for k, (var, _) in enumerate(dim_terms if d != dim else []):
            last = last if var is None else _position(stmt, var)
            keys.append((d, k, last))
    keys.sort(key=lambda key: key[2])

    def packed(*i):
        pieces = [split_pieces(i[d], [c for _, c in t]) for d, t in enumerate(terms)]
        return [i[dim] // lanes, *(pieces[d][k] for d, k, _ in keys), i[dim] % lanes]

    return IndexMap.from_func(packed, ndim=len(region),
                              index_dtype=str(stmt.reads[index].source.shape[0].ty))


def _terms_or_whole(expr, extents: dict) -> list[tuple]:
    """:func:`index_terms` of ``expr``; ``[(None, 1)]`` (whole) for a constant or no nest
    of iterators."""
    try:
        return index_terms(expr, extents) or [(None, 1)]
    except ValueError:
        return [(None, 1)]


def _position(stmt, var) -> int:
    """The position of iterator ``var`` among block ``stmt``'s."""
    return next(k for k, iv in enumerate(stmt.iter_vars) if iv.var.same_as(var))
