"""Relax -> OpGraph on small hand-built modules, with costs computed by hand."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import relax

from autoplace.frontend.relax import from_relax, fuse, kind_from_name, op_graph
from autoplace.graph import GraphError

F32 = 4  # bytes per float32


def _mlp_module() -> tvm.IRModule:
    """relu(x @ w) + 1.0 with x: 4x8, w: 8x16."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((4, 8), "float32"))
    w = relax.Var("w", relax.TensorType((8, 16), "float32"))
    with bb.function("main", [x, w]):
        with bb.dataflow():
            y = bb.emit(relax.op.matmul(x, w))
            z = bb.emit(relax.op.nn.relu(y))
            out = bb.emit_output(relax.op.add(z, relax.const(1.0, "float32")))
        bb.emit_func_output(out)
    return bb.finalize()


def test_matmul_relu_add_fuses_into_one_matmul_kernel() -> None:
    fused, g = from_relax(_mlp_module(), "mlp")
    assert [op.name for op in g.ops] == ["fused_matmul_relu_add"]
    op = g.ops[0]
    assert op.kind == "matmul" and op.func == "fused_matmul_relu_add"
    # 2*M*N*K for the matmul (a MAC is 2 flops), then one flop per element for relu and add
    assert op.flops == 2 * 4 * 16 * 8 + 4 * 16 + 4 * 16 == 1152
    assert op.bytes_read == op.external_bytes == (4 * 8 + 8 * 16) * F32 == 640
    # no num_input attribute: both params are graph inputs; the scalar 1.0 is inlined
    assert op.weight_bytes == 0 and op.input_bytes == 640
    assert op.output_bytes == 4 * 16 * F32
    assert g.edges == ()
    assert "fused_matmul_relu_add" in [gv.name_hint for gv in fused.get_global_vars()]


def _fork_module() -> tvm.IRModule:
    """a = exp(x) feeds split, a 2nd exp and add(a, a); a tuple alias feeds the multiply."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((8, 16), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(relax.op.exp(x))
            halves = bb.emit(relax.op.split(a, 2, axis=1))
            b = bb.emit(relax.op.nn.relu(bb.emit(relax.TupleGetItem(halves, 1))))
            c = bb.emit(relax.op.exp(a))
            d = bb.emit(relax.op.add(a, a))
            pair = bb.emit(relax.Tuple([b, c]))
            alias = bb.emit(relax.TupleGetItem(pair, 1))
            out = bb.emit_output(relax.op.multiply(alias, d))
        bb.emit_func_output(out)
    return bb.finalize()


def test_fork_edges_aliases_and_repeated_kernels() -> None:
    g = op_graph(relax.transform.LegalizeOps()(_fork_module()), "fork")
    full, half = 8 * 16 * F32, 8 * 8 * F32
    assert [op.name for op in g.ops] == [
        "tir_exp", "split", "relu", "tir_exp#1", "add", "multiply"
    ]
    assert g.ops[3].func == "tir_exp"
    edges = {g.edge_name(k): e.nbytes for k, e in enumerate(g.edges)}
    assert edges == {
        "tir_exp->split": full,
        "tir_exp->tir_exp#1": full,
        "tir_exp->add": full,  # add(a, a) reads a once
        "split->relu": half,  # only the TupleGetItem'd field of the 2-output split
        "tir_exp#1->multiply": full,  # through the Tuple + TupleGetItem aliases
        "add->multiply": full,
    }
    by_name = {op.name: op for op in g.ops}
    assert by_name["add"].bytes_read == full and by_name["add"].external_bytes == 0
    assert by_name["split"].output_bytes == 2 * half
    assert by_name["tir_exp"].external_bytes == full
    assert by_name["split"].kind == "injective" and by_name["relu"].kind == "elementwise"


def test_fuse_folds_constant_weights_and_keeps_them_external() -> None:
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((2, 8), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            w = bb.emit(relax.op.broadcast_to(relax.const([0.5], "float32"), (8, 3)))
            out = bb.emit_output(relax.op.matmul(x, w))
        bb.emit_func_output(out)
    g = op_graph(fuse(bb.finalize()), "w")
    assert [op.kind for op in g.ops] == ["matmul"]  # no kernel left for broadcast_to
    assert g.ops[0].external_bytes == (2 * 8 + 8 * 3) * F32
    assert g.ops[0].weight_bytes == 8 * 3 * F32  # the folded constant
    assert g.ops[0].input_bytes == 2 * 8 * F32  # x


def _params_module() -> tvm.IRModule:
    """main(x, w1, w2) with num_input=1: w1, w2 are weights, used directly and via aliases.

    exp(x) -> matmul(., w1) -> add(., bias const) ; add(w2 alias, tuple item of (w1, w2)).
    """
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((2, 8), "float32"))
    w1 = relax.Var("w1", relax.TensorType((8, 4), "float32"))
    w2 = relax.Var("w2", relax.TensorType((8, 4), "float32"))
    bias = relax.const(np.arange(4, dtype="float32"))
    with bb.function("main", [x, w1, w2], attrs={"num_input": 1}):
        with bb.dataflow():
            a = bb.emit(relax.op.exp(x))
            b = bb.emit(relax.op.add(bb.emit(relax.op.matmul(a, w1)), bias))
            alias = bb.emit(w2)
            item = bb.emit(relax.TupleGetItem(bb.emit(relax.Tuple([w1, w2])), 0))
            out = bb.emit_output(relax.Tuple([b, bb.emit(relax.op.add(alias, item))]))
        bb.emit_func_output(out)
    return bb.finalize()


def test_constants_and_params_after_num_input_are_weights() -> None:
    g = op_graph(relax.transform.LegalizeOps()(_params_module()), "params")
    by_name = {op.name: op for op in g.ops}
    assert list(by_name) == ["tir_exp", "matmul", "add", "add1"]
    w = 8 * 4 * F32
    expected = {  # name: (weight_bytes, input_bytes), computed from the tensors read
        "tir_exp": (0, 2 * 8 * F32),  # x is the graph input
        "matmul": (w, 0),  # w1 (exp(x) comes over an edge)
        "add": (4 * F32, 0),  # the bias constant
        "add1": (2 * w, 0),  # w2 through an alias, w1 through a tuple item
    }
    assert {n: (op.weight_bytes, op.input_bytes) for n, op in by_name.items()} == expected
    for op in g.ops:
        assert op.weight_bytes + op.input_bytes == op.external_bytes


def test_fused_params_module_keeps_the_weight_split() -> None:
    _, g = from_relax(_params_module(), "params")
    assert sum(op.weight_bytes for op in g.ops) == (3 * 8 * 4 + 4) * F32
    assert sum(op.input_bytes for op in g.ops) == 2 * 8 * F32


def test_symbolic_shape_and_missing_function_are_graph_errors() -> None:
    n = tvm.tirx.Var("n", "int64")
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((n, 4), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.exp(x))
        bb.emit_func_output(out)
    mod = relax.transform.LegalizeOps()(bb.finalize())
    with pytest.raises(GraphError, match="not static"):
        op_graph(mod, "sym")
    with pytest.raises(GraphError, match="no function 'nope'"):
        op_graph(mod, "sym", fname="nope")


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("fused_conv2d17_add9_relu9", "conv2d"),
        ("conv2d3", "conv2d"),
        ("fused_matmul_add6_relu4_dropout", "matmul"),
        ("max_pool2d1", "pool"),
        ("fused_avg_pool2d_dropout", "pool"),
        ("softmax", "softmax"),
        ("fused_batch_norm3_multiply3_add3_relu3", "norm"),
        ("fused_concatenate5_batch_norm7_multiply7_add7_relu7", "norm"),
        ("mean", "reduce"),
        ("fused_broadcast_to4_broadcast_to4_stack_sum", "elementwise"),
        ("reshape3", None),
        ("take1", "injective"),  # ONNX Gather: opaque to AnnotateTIROpPattern
        ("fused_take_reshape2", "injective"),
        ("C", None),
    ],
)
def test_kind_from_name(name: str, kind: str | None) -> None:
    assert kind_from_name(name) == kind
