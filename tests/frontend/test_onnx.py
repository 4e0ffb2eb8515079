"""ONNX import of the 9 bundled model-zoo graphs, and import errors."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from tvm.relax.frontend.onnx import from_onnx as tvm_from_onnx

from autoplace.frontend.onnx import from_onnx, import_onnx, input_shapes
from autoplace.frontend.relax import from_relax
from autoplace.graph import GraphError, OpGraph
from autoplace.models import BUNDLED, GRAPH_DIR, bundled_onnx_path

#: Kernels after folding (batch norms into convs, sums as adds) and fusion, on TVM 0.27.
OP_COUNTS = {
    "squeezenet": 41,
    "resnet50": 60,
    "densenet121": 242,
    "inception_v1": 91,
    "inception_v2": 97,
    "shufflenet": 78,
    "vgg19": 28,
    "alexnet": 21,
    "zfnet512": 21,
}


def test_all_onnx_models_are_listed() -> None:
    assert sorted(OP_COUNTS) == sorted(n for n, f in BUNDLED.items() if isinstance(f, str))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(OP_COUNTS))
def test_import_matches_shipped_graph(name: str) -> None:
    _, g = from_onnx(bundled_onnx_path(name), name)
    assert len(g.ops) == OP_COUNTS[name]
    assert 21 <= len(g.ops) <= 242
    assert g.fingerprint == OpGraph.load(GRAPH_DIR / f"{name}.json").fingerprint
    kinds = {op.kind for op in g.ops}
    assert {"conv2d", "pool"} <= kinds
    assert "other" not in kinds
    in_edges = g.in_edges()
    for i, op in enumerate(g.ops):
        # every byte an op reads comes over an edge or from outside (params, weights)
        assert op.bytes_read == op.external_bytes + sum(g.edges[k].nbytes for k in in_edges[i])
        assert 0 <= op.weight_bytes <= op.external_bytes
    assert not in_edges[0]  # the first kernel reads only the graph input and weights
    # the one 1x3x224x224 float32 graph input is read once, by the first kernel
    assert [op.input_bytes for op in g.ops] == [3 * 224 * 224 * 4] + [0] * (len(g.ops) - 1)


def test_squeezenet_costs() -> None:
    g = OpGraph.load(GRAPH_DIR / "squeezenet.json")
    first = g.ops[0]
    assert first.name == "fused_conv2d_add_relu" and first.kind == "conv2d"
    # conv 3x3x3 -> 64 channels on 111x111, MAC = 2 flops, plus bias add and relu
    assert first.flops == 64 * 111 * 111 * 27 * 2 + 2 * 64 * 111 * 111
    assert first.bytes_read == first.external_bytes == (3 * 224 * 224 + 64 * 27 + 64) * 4
    assert first.weight_bytes == (64 * 27 + 64) * 4  # conv1 weight and bias
    assert first.input_bytes == 3 * 224 * 224 * 4  # the image
    assert first.output_bytes == 64 * 111 * 111 * 4
    assert g.total_flops == 706628160.0
    assert g.ops[-1].kind == "injective" and g.ops[-2].kind == "softmax"


def _mlp_onnx() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """relu(x @ W1 + B1) reshaped by an int64 shape initializer, then @ W2 + B2."""
    rng = np.random.default_rng(0)
    inits = {"W1": rng.random((8, 16), dtype=np.float32), "B1": np.ones(16, np.float32),
             "W2": rng.random((16, 4), dtype=np.float32), "B2": np.ones(4, np.float32),
             "shape": np.array([2, 16], np.int64)}
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["h"]),
             helper.make_node("Add", ["h", "B1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]),
             helper.make_node("Reshape", ["r", "shape"], ["rr"]),
             helper.make_node("MatMul", ["rr", "W2"], ["o"]),
             helper.make_node("Add", ["o", "B2"], ["y"])]
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), inits


def test_onnx_weight_bytes_are_the_initializers_each_kernel_reads(tmp_path) -> None:
    model, inits = _mlp_onnx()
    path = tmp_path / "mlp.onnx"
    onnx.save(model, path)
    _, g = from_onnx(path)
    nbytes = {k: v.nbytes for k, v in inits.items()}
    assert [op.kind for op in g.ops] == ["matmul", "injective", "matmul"]
    # the shape initializer becomes a static shape, not a tensor argument of the reshape
    assert [op.weight_bytes for op in g.ops] == [nbytes["W1"] + nbytes["B1"], 0,
                                                 nbytes["W2"] + nbytes["B2"]]
    assert [op.input_bytes for op in g.ops] == [2 * 8 * 4, 0, 0]


def test_params_kept_in_input_are_weights_too() -> None:
    model, _ = _mlp_onnx()
    as_params = tvm_from_onnx(model, shape_dict={"x": [2, 8]}, keep_params_in_input=True)
    assert [p.name for p in as_params["main"].params] == ["x", "W1", "B1", "W2", "B2", "shape"]
    _, by_param = from_relax(as_params, "mlp")
    _, by_const = from_relax(tvm_from_onnx(model, shape_dict={"x": [2, 8]}), "mlp")
    assert by_param.fingerprint == by_const.fingerprint  # weight_bytes included
    assert sum(op.weight_bytes for op in by_param.ops) == (8 * 16 + 16 + 16 * 4 + 4) * 4


def test_multi_output_kernel_edges_count_one_field() -> None:
    # alexnet's fused matmul+dropout returns (out, mask); only out flows on
    g = OpGraph.load(GRAPH_DIR / "alexnet.json")
    fc6 = g.index("fused_matmul_add6_relu4_dropout")
    (k,) = g.out_edges()[fc6]
    assert g.edges[k].nbytes == 4096 * 4
    assert g.ops[fc6].output_bytes == 2 * 4096 * 4


def test_old_opset_initializer_inputs_are_not_graph_params() -> None:
    model = onnx.load(str(bundled_onnx_path("resnet50")))
    assert len(model.graph.input) == 270  # opset 9: initializers listed as inputs
    shapes, dtypes = input_shapes(model)
    assert shapes == {"gpu_0/data_0": [1, 3, 224, 224]}
    assert dtypes == {"gpu_0/data_0": "float32"}
    mod = import_onnx(bundled_onnx_path("squeezenet"))
    assert [p.name for p in mod["main"].params] == ["data_0"]


@pytest.mark.parametrize(
    ("content", "why"),
    [(b"\x00this is not protobuf", "not an ONNX file"), (b"", "no graph nodes"), (None, "no such")],
)
def test_bad_files_raise_one_line_graph_error(tmp_path, content, why) -> None:
    path = tmp_path / "broken.onnx"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(GraphError) as info:
        from_onnx(path)
    msg = str(info.value)
    assert str(path) in msg and why in msg and "\n" not in msg


def test_unsupported_operator_is_an_import_failure(tmp_path) -> None:
    node = onnx.helper.make_node("NoSuchOp", ["x"], ["y"])
    io = [onnx.helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [2, 3]) for n in "xy"]
    path = tmp_path / "unsupported.onnx"
    onnx.save(onnx.helper.make_model(onnx.helper.make_graph([node], "g", io[:1], io[1:])), path)
    with pytest.warns(UserWarning), pytest.raises(GraphError) as info:
        from_onnx(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: ONNX import failed") and "NoSuchOp" in msg
    assert "\n" not in msg
