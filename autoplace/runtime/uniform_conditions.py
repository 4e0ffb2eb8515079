"""Conditions that a kernel's innermost iterator cannot change, written without it.

Blocked by :mod:`autoplace.runtime.layout`, a concatenation of two NCHW16c tensors along
their channels picks its input by ``64 <= c * 16 + i`` (``c`` the channel block, ``i`` the
channel within it): for every ``i`` of a block the same as for ``i = 0``. The default
schedule vectorises a nest over its innermost iterator only when no ``if_then_else`` names
it (:mod:`autoplace.deploy.cpu_rules`: a padding's does, and a vector of it would read out
of bounds), so such a concatenation ran a channel at a time. :func:`without_uniform_iterators`
writes the condition ``4 <= c``: squeezenet's concatenation onto 55 x 55, two threads,
227 -> 131 us.

A condition is rewritten only where that is proved: each comparison in it that names the
iterator (``<``, ``<=``, ``>``, ``>=``, linear in it: monotone) simplifies to the same
expression at the iterator's first and last value, so none changes across its range; an
``==``, a ``!=`` or a non-linear use keeps the condition as it was.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.sym import Analyzer

from autoplace.deploy.tir_facts import stride, uses_var

_IF_THEN_ELSE = tvm.ir.Op.get("prim.if_then_else")
_MONOTONE = (tirx.LT, tirx.LE, tirx.GT, tirx.GE)


def without_uniform_iterators(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with each ``if_then_else`` condition of a block that its innermost
    iterator cannot change written without that iterator (module docstring)."""
    return tvm_ffi.structural_map(func, (s_tir.SBlock, _block))


def _block(block: s_tir.SBlock) -> s_tir.SBlock:
    if not block.iter_vars:
        return block
    inner = block.iter_vars[-1]
    body = tvm_ffi.structural_map(block.body, (tvm.ir.expr.Call, lambda c: _call(c, inner)))
    if body.same_as(block.body):
        return block
    return s_tir.SBlock(list(block.iter_vars), list(block.reads), list(block.writes),
                        block.name_hint, body, block.init, list(block.alloc_buffers),
                        list(block.match_buffers), dict(block.annotations))


def _call(call, inner: tirx.IterVar):
    if not (isinstance(call.op, tvm.ir.Op) and call.op.same_as(_IF_THEN_ELSE)):
        return call
    cond = call.args[0]
    if not uses_var(cond, inner.var) or not _uniform(cond, inner):
        return call
    return tirx.if_then_else(Analyzer().simplify(_at(cond, inner.var, inner.dom.min)),
                             call.args[1], call.args[2])


def _uniform(cond, inner: tirx.IterVar) -> bool:
    """Whether ``cond`` is the same for every value of ``inner`` (proved, else False)."""
    if isinstance(cond, tirx.And | tirx.Or):
        return _uniform(cond.a, inner) and _uniform(cond.b, inner)
    if isinstance(cond, tirx.Not):
        return _uniform(cond.a, inner)
    var = inner.var
    if not uses_var(cond, var):
        return True
    if not isinstance(cond, _MONOTONE) or not stride(cond.a - cond.b, var):
        return False
    first, last = inner.dom.min, inner.dom.min + inner.dom.extent - 1
    analyzer = Analyzer()
    return tvm_ffi.structural_equal(analyzer.simplify(_at(cond, var, first)),
                                    analyzer.simplify(_at(cond, var, last)))


def _at(expr, var: tirx.Var, value):
    """``expr`` with ``var`` replaced by ``value``."""
    return tvm_ffi.structural_map(expr, (tirx.Var, lambda v: value if v.same_as(var) else v))
