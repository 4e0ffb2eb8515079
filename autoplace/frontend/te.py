"""TE compute graph -> Relax IRModule with one ``call_tir`` per TE op -> OpGraph.

The module is deliberately NOT fused: every ``te.compute`` stays its own kernel, named
after the TE op, so the op graph mirrors the TE graph one to one.

Weights: a TE placeholder does not say whether it is a graph input or a parameter, so the
caller tells: placeholders passed as ``weights`` (default: none) become the trailing
parameters of ``main``, after the ``inputs``, with ``attrs["num_input"] = len(inputs)``
(the Relax convention), and the op graph counts what kernels read from them as
``Op.weight_bytes``. Placeholders passed as ``inputs`` are graph inputs.
"""

from __future__ import annotations

from collections.abc import Sequence

import tvm
import tvm_ffi
from tvm import relax, te

from autoplace.frontend.relax import op_graph
from autoplace.graph import GraphError, OpGraph

_TENSOR_LOAD = tvm.ir.Op.get("te.tensor_load")


def te_ops(outputs: Sequence[te.Tensor]) -> list[te.Operation]:
    """Every op the ``outputs`` depend on, in topological (post-) order."""
    seen: set = set()
    order: list[te.Operation] = []

    def visit(op: te.Operation) -> None:
        if op in seen:
            return
        seen.add(op)
        for t in op.input_tensors:
            visit(t.op)
        order.append(op)

    for out in outputs:
        visit(out.op)
    return order


def _clone_on(op: te.ComputeOp, inputs: dict[te.Operation, te.Tensor]) -> te.Tensor:
    """Re-create ComputeOp ``op`` reading ``inputs[old op]`` instead of the old tensors.

    ``te.create_prim_func`` refuses intermediate tensors as arguments, so each op is
    rebuilt on fresh placeholders before ``emit_te`` turns it into its own PrimFunc.
    """

    def rewrite(call: tvm.ir.expr.Call) -> tvm.ir.expr.Call:
        if call.op.same_as(_TENSOR_LOAD):
            tensor = call.args[0]
            if tensor.op in inputs and tensor.value_index == 0:
                return inputs[tensor.op](*call.args[1:])
        return call

    body = [tvm_ffi.structural_map(x, (tvm.ir.expr.Call, rewrite)) for x in op.body]
    return te.ComputeOp(op.name, op.tag, op.attrs, op.axis, op.reduce_axis, body).output(0)


def _check_ops(ops: list[te.Operation], params: Sequence[te.Tensor]) -> None:
    placeholders = {t.op for t in params}
    if len(placeholders) != len(params):
        raise GraphError("TE graph: a placeholder is passed twice (inputs and weights)")
    for op in ops:
        if isinstance(op, te.PlaceholderOp) and op not in placeholders:
            raise GraphError(f"TE graph: placeholder {op.name!r} is not among the inputs "
                             "nor the weights")
        if isinstance(op, te.ComputeOp) and op.num_outputs != 1:
            raise GraphError(f"TE graph: op {op.name!r} has {op.num_outputs} outputs, need 1")
        if not isinstance(op, te.PlaceholderOp | te.ComputeOp):
            raise GraphError(f"TE graph: op {op.name!r} is a {type(op).__name__}, need ComputeOp")


def te_module(
    outputs: Sequence[te.Tensor],
    inputs: Sequence[te.Tensor],
    weights: Sequence[te.Tensor] = (),
) -> tvm.IRModule:
    """A Relax module whose ``main(*inputs, *weights)`` makes one ``call_tir`` per TE
    compute op; with ``weights``, ``main`` has ``attrs["num_input"] = len(inputs)``."""
    ops = te_ops(outputs)
    tensors = [*inputs, *weights]
    _check_ops(ops, tensors)
    params = [relax.Var(t.op.name, relax.TensorType(t.shape, t.dtype)) for t in tensors]
    attrs = {"num_input": len(inputs)} if weights else None
    bb = relax.BlockBuilder()
    with bb.function("main", params, attrs=attrs):
        with bb.dataflow():
            val = {t.op: p for t, p in zip(tensors, params)}
            for op in ops:
                if op in val:
                    continue
                srcs = [t.op for t in op.input_tensors]
                val[op] = bb.emit_te(
                    lambda *ph, op=op, srcs=srcs: _clone_on(op, dict(zip(srcs, ph))),
                    *[val[s] for s in srcs],
                    primfunc_name_hint=op.name,
                )
            res = [bb.emit_output(val[o.op]) for o in outputs]
        bb.emit_func_output(res[0] if len(res) == 1 else relax.Tuple(res))
    return bb.finalize()


def from_te(
    outputs: Sequence[te.Tensor],
    inputs: Sequence[te.Tensor],
    name: str,
    weights: Sequence[te.Tensor] = (),
) -> tuple[tvm.IRModule, OpGraph]:
    """Relax module (one unfused kernel per TE op) and its op graph, ops named as in TE.

    ``inputs`` are the graph-input placeholders, ``weights`` the parameter placeholders
    (counted in ``Op.weight_bytes``); every placeholder the outputs use must be in one.
    """
    mod = te_module(outputs, inputs, weights)
    return mod, op_graph(mod, name)


def seed_example(m: int = 64, n: int = 32) -> tuple[list[te.Tensor], list[te.Tensor]]:
    """The seed graph ``C = A*B; D = C+1; E = exp(C); F = D+E`` as ``(outputs, inputs)``."""
    a = te.placeholder((m, n), "float32", name="A")
    b = te.placeholder((m, n), "float32", name="B")
    c = te.compute((m, n), lambda i, j: a[i, j] * b[i, j], name="C")
    d = te.compute((m, n), lambda i, j: c[i, j] + 1.0, name="D")
    e = te.compute((m, n), lambda i, j: te.exp(c[i, j]), name="E")
    f = te.compute((m, n), lambda i, j: d[i, j] + e[i, j], name="F")
    return [f], [a, b]
