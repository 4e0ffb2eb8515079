"""ONNX import of the 9 bundled model-zoo graphs, and import errors."""

from __future__ import annotations

import onnx
import pytest

from autoplace.frontend.onnx import from_onnx, import_onnx, input_shapes
from autoplace.graph import GraphError, OpGraph
from autoplace.models import BUNDLED, GRAPH_DIR, bundled_onnx_path

#: Kernels after fusion, verified by hand on TVM 0.27.
OP_COUNTS = {
    "squeezenet": 41,
    "resnet50": 145,
    "densenet121": 301,
    "inception_v1": 91,
    "inception_v2": 130,
    "shufflenet": 134,
    "vgg19": 28,
    "alexnet": 21,
    "zfnet512": 21,
}


def test_all_onnx_models_are_listed() -> None:
    assert sorted(OP_COUNTS) == sorted(n for n, f in BUNDLED.items() if f is not None)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(OP_COUNTS))
def test_import_matches_shipped_graph(name: str) -> None:
    _, g = from_onnx(bundled_onnx_path(name), name)
    assert len(g.ops) == OP_COUNTS[name]
    assert 21 <= len(g.ops) <= 301
    assert g.fingerprint == OpGraph.load(GRAPH_DIR / f"{name}.json").fingerprint
    kinds = {op.kind for op in g.ops}
    assert {"conv2d", "pool"} <= kinds
    assert "other" not in kinds
    in_edges = g.in_edges()
    for i, op in enumerate(g.ops):
        # every byte an op reads comes over an edge or from outside (params, weights)
        assert op.bytes_read == op.external_bytes + sum(g.edges[k].nbytes for k in in_edges[i])
    assert not in_edges[0]  # the first kernel reads only the graph input and weights


def test_squeezenet_costs() -> None:
    g = OpGraph.load(GRAPH_DIR / "squeezenet.json")
    first = g.ops[0]
    assert first.name == "fused_conv2d_add_relu" and first.kind == "conv2d"
    # conv 3x3x3 -> 64 channels on 111x111, MAC = 2 flops, plus bias add and relu
    assert first.flops == 64 * 111 * 111 * 27 * 2 + 2 * 64 * 111 * 111
    assert first.bytes_read == first.external_bytes == (3 * 224 * 224 + 64 * 27 + 64) * 4
    assert first.output_bytes == 64 * 111 * 111 * 4
    assert g.total_flops == 706628160.0
    assert g.ops[-1].kind == "injective" and g.ops[-2].kind == "softmax"


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
