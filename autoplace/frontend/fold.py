"""Folds before fusion: what every deployment compiler does to an imported graph first.

:func:`fold` runs, in order:

- :func:`fold_weights`: weights built at run time from constants (``broadcast_to`` /
  ``reshape`` of a constant: the light model-zoo files build each weight with
  ``ConstantOfShape``) become constants, computed by numpy;
- :func:`fold_batch_norms`: a batch norm (inference) of a conv's output whose weight, and
  bias if any, are constants becomes the conv with its weight scaled by channel and a bias
  added, as ONNX Runtime folds it (FuseOps then fuses the bias into the conv);
- :func:`sums_as_adds`: ONNX ``Sum`` of two tensors of the output's shape, imported as
  ``sum(stack(broadcast_to(a), broadcast_to(b)))``, becomes ``add(a, b)``, which FuseOps
  fuses into the kernel that makes ``a`` (a residual sum, and the relu after it, into the
  conv before it).

TVM's ``FoldBatchnormToConv2D`` does the second with Relax ops that FoldConstant then
compiles, one LLVM kernel per conv (resnet50's import 4x slower); numpy does it here.
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax

_BROADCAST_TO = tvm.ir.Op.get("relax.broadcast_to")
_RESHAPE = tvm.ir.Op.get("relax.reshape")
_SUM, _STACK = tvm.ir.Op.get("relax.sum"), tvm.ir.Op.get("relax.stack")
_ADD, _CONV2D = tvm.ir.Op.get("relax.add"), tvm.ir.Op.get("relax.nn.conv2d")
_BATCH_NORM = tvm.ir.Op.get("relax.nn.batch_norm")


@relax.expr_functor.mutator
class _WeightFolder(relax.PyExprMutator):
    """Folds ``broadcast_to``/``reshape`` of a constant to a numpy-computed constant."""

    def visit_call_(self, call: relax.Call) -> relax.Expr:
        call = self.visit_expr_post_order(call)
        is_bcast = call.op.same_as(_BROADCAST_TO)
        if not (is_bcast or call.op.same_as(_RESHAPE)):
            return call
        data, shape = call.args
        if not isinstance(data, tvm.ir.expr.Constant) or not isinstance(shape, relax.ShapeExpr):
            return call
        if not all(isinstance(d, tvm.tirx.IntImm) for d in shape.values):
            return call
        dims = [int(d) for d in shape.values]
        arr = data.value.numpy()
        arr = np.broadcast_to(arr, dims) if is_bcast else arr.reshape(dims)
        return relax.const(np.ascontiguousarray(arr), str(data.ty.dtype))


def fold_weights(mod: tvm.IRModule) -> tvm.IRModule:
    """Pre-fold constant weight construction (``broadcast_to``/``reshape`` of constants).

    FoldConstant gets the same result but compiles one LLVM kernel per folded call
    (~0.12 s each, 115 calls in inception_v1); numpy does it in milliseconds.
    """
    folder = _WeightFolder(mod)
    funcs = {gv: folder.visit_expr(f) for gv, f in mod.functions_items()
             if isinstance(f, relax.Function)}
    out = folder.builder_.get()
    for gv, func in funcs.items():
        out.update_func(out.get_global_var(gv.name_hint), func)
    return out


def fold_batch_norms(mod: tvm.IRModule) -> tvm.IRModule:
    """Each inference batch norm over channel axis 1 of an NCHW/OIHW conv with constant
    weight (and a constant bias added, if any), the conv's output read by the norm alone:
    the conv with its weight scaled per output channel by ``gamma / sqrt(var + eps)`` and
    the norm's shift added as a bias."""
    return _rewrite(mod, norms=True)


def sums_as_adds(mod: tvm.IRModule) -> tvm.IRModule:
    """Each ``sum(stack(broadcast_to(a), broadcast_to(b), ...), axis=0)`` whose tensors
    already have the output's shape: ``add(add(a, b), ...)``."""
    return _rewrite(mod, sums=True)


def fold(mod: tvm.IRModule) -> tvm.IRModule:
    """:func:`fold_weights`, :func:`fold_batch_norms`, then :func:`sums_as_adds`."""
    return _rewrite(fold_weights(mod), norms=True, sums=True)


def _rewrite(mod: tvm.IRModule, norms: bool = False, sums: bool = False) -> tvm.IRModule:
    """Each Relax function of ``mod`` through :class:`_Folder`, without the bindings no
    longer read before and after. (Not TVM's ``rewrite_call``: it also eliminates common
    subexpressions, which merges the convs of a model whose weights are equal constants, as
    the light model-zoo files' are; nor its ``RemoveAllUnused`` or ``ConvertToDataflow``:
    they also inline the bindings of constants, which offloaded regions are handed as
    arguments.)"""
    out = mod.clone()
    for gv, func in mod.functions_items():
        if isinstance(func, relax.Function):
            func = _Pruner(mod, func).visit_expr(func)
            folded = _Folder(mod, func, norms, sums).visit_expr(func)
            out.update_func(gv, _Pruner(mod, folded).visit_expr(folded))
    return out


def _reads(func: relax.Function) -> dict:
    """Var -> how many bindings (and the function's result) read it, of the bindings read
    themselves: a pure binding nothing reads is dead, and its reads count for nothing."""
    reads: dict = {}
    for v in _operands(func.body.body):
        reads[v] = reads.get(v, 0) + 1
    for block in reversed(func.body.blocks):
        for b in reversed(block.bindings):
            if reads.get(b.var, 0) or not _pure(b.value):
                for v in _operands(b.value):
                    reads[v] = reads.get(v, 0) + 1
    return reads


def _pure(value: relax.Expr) -> bool:
    """Whether computing ``value`` has no effect beyond its result (a Relax op that says
    so, a tuple, an item, a constant, a var)."""
    if isinstance(value, relax.Call):
        return isinstance(value.op, tvm.ir.Op) and bool(value.op.get_attr("FPurity"))
    return isinstance(value, (relax.Tuple, relax.TupleGetItem, relax.Var, tvm.ir.expr.Constant))


def _operands(expr: relax.Expr) -> list:
    """The vars ``expr`` reads, once per read."""
    found = [expr] if isinstance(expr, relax.Var) else []

    def add(e: relax.Expr) -> None:
        found.extend(a for a in (e.args if isinstance(e, relax.Call) else e.fields
                                 if isinstance(e, relax.Tuple) else [e.tuple_value]
                                 if isinstance(e, relax.TupleGetItem) else [])
                     if isinstance(a, relax.Var))

    relax.analysis.post_order_visit(expr, add)
    return found


@relax.expr_functor.mutator
class _Pruner(relax.PyExprMutator):
    """A function without its dead bindings (:func:`_reads`)."""

    def __init__(self, mod: tvm.IRModule, func: relax.Function):
        super().__init__(mod)
        self.reads = _reads(func)

    def visit_var_binding_(self, binding: relax.VarBinding) -> None:
        if self.reads.get(binding.var, 0) or not _pure(binding.value):
            super().visit_var_binding_(binding)


@relax.expr_functor.mutator
class _Folder(relax.PyExprMutator):
    """Batch norms into convs, sums as adds: each call rewritten where it is, its operands
    looked up through their bindings."""

    def __init__(self, mod: tvm.IRModule, func: relax.Function, norms: bool, sums: bool):
        super().__init__(mod)
        self.values, self.reads = relax.analysis.get_var2val(func), _reads(func)
        self.norms, self.sums = norms, sums

    def value(self, expr: relax.Expr) -> relax.Expr:
        """What ``expr`` is bound to, through vars."""
        while isinstance(expr, relax.Var) and expr in self.values:
            expr = self.values[expr]
        return expr

    def read_once(self, expr: relax.Expr) -> bool:
        return self.reads.get(expr, 0) == 1

    def constant(self, expr: relax.Expr) -> np.ndarray | None:
        value = self.value(expr)
        if not isinstance(value, tvm.ir.expr.Constant):
            return None
        return value.value.numpy().astype(np.float64)

    def visit_tuple_getitem_(self, op: relax.TupleGetItem) -> relax.Expr:
        folded = _folded_norm(self, op) if self.norms and op.index == 0 else None
        return super().visit_tuple_getitem_(op) if folded is None else folded

    def visit_call_(self, call: relax.Call) -> relax.Expr:
        added = _sum_as_add(self, call) if self.sums and _is(call, _SUM) else None
        return super().visit_call_(call) if added is None else added


def _folded_norm(folder: _Folder, item: relax.TupleGetItem) -> relax.Expr | None:
    """``item`` (output 0 of a batch norm) as the conv it normalises, the norm folded into
    the conv's weight and a bias; None if it is no such norm or cannot be folded."""
    norm = folder.value(item.tuple_value)
    if not _is(norm, _BATCH_NORM) or not folder.read_once(item.tuple_value):
        return None
    conv, bias = _conv_of(folder, norm.args[0])
    if conv is None or not _foldable(conv, norm):
        return None
    params = [folder.constant(a) for a in (conv.args[1], *norm.args[1:])]
    if any(p is None for p in params):
        return None
    weight, gamma, beta, mean, var = params
    scale = gamma / np.sqrt(var + float(norm.attrs.epsilon))
    shift = beta - (mean - (0.0 if bias is None else bias.reshape(-1))) * scale
    dtype = str(conv.ty.dtype)
    scaled = relax.const((weight * scale.reshape(-1, 1, 1, 1)).astype(dtype), dtype)
    shape = [1, shift.size] + [1] * (len(conv.ty.shape) - 2)
    data = folder.visit_expr(conv.args[0])
    return relax.op.add(relax.op.nn.conv2d(data, scaled, **_conv_attrs(conv)),
                        relax.const(shift.reshape(shape).astype(dtype), dtype))


def _conv_of(folder: _Folder, expr: relax.Expr) -> tuple[relax.Call | None, np.ndarray | None]:
    """The conv2d that ``expr`` (read once) is, or adds a constant bias of one value per
    output channel to (of shape ``(1, C, 1, 1)`` or ``(C, 1, 1)``), and that bias; (None,
    None) otherwise."""
    if not folder.read_once(expr):
        return None, None
    value, bias = folder.value(expr), None
    if _is(value, _ADD):
        inner, bias = value.args[0], folder.constant(value.args[1])
        channels = (_shape(inner) or [0, -1])[1]
        if bias is None or bias.shape not in ((1, channels, 1, 1), (channels, 1, 1)) \
                or not folder.read_once(inner):
            return None, None
        value = folder.value(inner)
    return (value, bias) if _is(value, _CONV2D) else (None, None)


def _foldable(conv: relax.Call, norm: relax.Call) -> bool:
    a, n = conv.attrs, norm.attrs
    return (str(a.data_layout) == "NCHW" and str(a.kernel_layout) == "OIHW"
            and str(a.out_layout) == "NCHW" and int(n.axis) == 1
            and bool(n.center) and bool(n.scale) and not bool(getattr(n, "training", False)))


def _conv_attrs(conv: relax.Call) -> dict:
    a = conv.attrs
    return {"strides": a.strides, "padding": a.padding, "dilation": a.dilation,
            "groups": int(a.groups), "data_layout": "NCHW", "kernel_layout": "OIHW",
            "out_layout": "NCHW", "out_dtype": a.out_dtype}


def _sum_as_add(folder: _Folder, call: relax.Call) -> relax.Expr | None:
    """``call`` (a sum) as a chain of adds, or None if it is not an ONNX ``Sum`` of
    tensors of its own shape."""
    stack = folder.value(call.args[0])
    if (not _is(stack, _STACK) or int(stack.attrs.axis) != 0 or not folder.read_once(
            call.args[0]) or [int(a) for a in (call.attrs.axis or [])] != [0]):
        return None
    fields = folder.value(stack.args[0])
    if not isinstance(fields, relax.Tuple) or len(fields.fields) < 2:
        return None
    terms = [(f, folder.value(f)) for f in fields.fields]
    tensors = [v.args[0] if _is(v, _BROADCAST_TO) else f  # (a term's var, never its value:
               for f, v in terms]                         # that would compute it again)
    if any(_shape(t) != _shape(call) for t in tensors):
        return None
    total = folder.visit_expr(tensors[0])
    for t in tensors[1:]:
        total = relax.op.add(total, folder.visit_expr(t))
    return total


def _is(expr: relax.Expr, op: tvm.ir.Op) -> bool:
    return isinstance(expr, relax.Call) and expr.op.same_as(op)


def _shape(expr: relax.Expr) -> list[int] | None:
    shape = getattr(expr.ty, "shape", None)
    return None if shape is None else [int(d) for d in shape]
