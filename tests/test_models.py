"""Bundled models: names, shipped JSON graphs, loading by name and path."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from autoplace.graph import Edge, GraphError, Op, OpGraph
from autoplace.models import BUNDLED, GRAPH_DIR, bundled_onnx_path, load_graph, load_module, main

ONNX_NAMES = ["squeezenet", "resnet50", "densenet121", "inception_v1", "inception_v2",
              "shufflenet", "vgg19", "alexnet", "zfnet512"]
ZOO_NAMES = ["bert_tiny", "bert_base", "vit_tiny", "gpt2_block"]


def test_bundled_names_files_and_json() -> None:
    assert list(BUNDLED) == [*ONNX_NAMES, *ZOO_NAMES, "seed_te"]
    assert bundled_onnx_path("alexnet").name == "light_bvlc_alexnet.onnx"
    for name in ONNX_NAMES:
        assert bundled_onnx_path(name).is_file()
    for name in BUNDLED:
        g = load_graph(name)
        assert g.name == name
        assert g == OpGraph.load(GRAPH_DIR / f"{name}.json")


def test_load_graph_by_name_and_by_json_path(tmp_path) -> None:
    g = load_graph("squeezenet")
    assert len(g.ops) == 41 and len(g.edges) == 48
    path = tmp_path / "copy.json"
    g.save(path)
    assert load_graph(path) == g
    assert load_graph(str(path)).fingerprint == g.fingerprint


def test_load_graph_by_onnx_path_equals_shipped() -> None:
    g = load_graph(bundled_onnx_path("squeezenet"))
    assert g.name == "light_squeezenet"
    assert g.fingerprint == load_graph("squeezenet").fingerprint


@pytest.mark.parametrize("name", ["squeezenet", "resnet50", "bert_tiny", "vit_tiny"])
def test_a_shipped_graph_is_a_fresh_import_matches_and_all(name: str) -> None:
    """The pattern matches are no part of the fingerprint: compared here, so that shipped
    graphs do not go stale when the pattern table or its matching changes."""
    fresh = load_graph(bundled_onnx_path(name))
    shipped = load_graph(name)
    assert fresh.matches and fresh.matches == shipped.matches
    assert fresh.ops == shipped.ops and fresh.edges == shipped.edges


@pytest.mark.parametrize("spec", ["nosuchnet", "missing.json", "missing.onnx", "graph.txt"])
def test_unknown_spec_lists_bundled_names(spec: str) -> None:
    with pytest.raises(GraphError) as info:
        load_graph(spec)
    msg = str(info.value)
    assert msg.startswith(spec) and "\n" not in msg
    assert all(name in msg for name in BUNDLED)


def test_load_graph_of_a_bundled_name_does_not_import_tvm() -> None:
    code = (
        "import sys\n"
        "from autoplace.models import load_graph\n"
        "g = load_graph('resnet50')\n"
        "print(len(g.ops), sorted(m for m in ('tvm', 'tvm_ffi', 'onnx') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["60", "[]"]


def test_load_module_seed_te_gives_relax_module() -> None:
    mod, g = load_module("seed_te")
    assert [op.name for op in g.ops] == ["C", "D", "E", "F"]
    assert "main" in [gv.name_hint for gv in mod.get_global_vars()]
    with pytest.raises(GraphError, match="nosuchnet"):
        load_module("nosuchnet")


def test_cli_lists_bundled_graphs(capsys) -> None:
    assert main([]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == list(BUNDLED)
    assert lines[0].split()[1:3] == ["41", "ops"]


# -- weight bytes ------------------------------------------------------------------------
#: Node inputs that are shapes, not data: they never reach a kernel as a tensor.
_SHAPE_INPUTS = {("Reshape", 1), ("ConstantOfShape", 0)}


def _onnx_weight_bytes(path: Path) -> int:
    """Bytes of the model's weight tensors once folded, computed with the onnx package alone.

    The initializers read as data, plus the tensors that ``ConstantOfShape`` builds from a
    ``*__SHAPE`` initializer (the light model-zoo files store each weight that way), less
    what folding each batch norm of a conv's output into the conv saves: its four vectors,
    and the conv's bias if any, become one bias.
    """
    model = onnx.load(str(path))
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    data = {name for node in model.graph.node for k, name in enumerate(node.input)
            if (node.op_type, k) not in _SHAPE_INPUTS}
    total = sum(arr.nbytes for name, arr in inits.items() if name in data)
    sizes = {}
    for node in model.graph.node:
        if node.op_type == "ConstantOfShape":
            (value,) = [a.t for a in node.attribute if a.name == "value"]
            itemsize = numpy_helper.to_array(value).dtype.itemsize
            sizes[node.output[0]] = int(np.prod(inits[node.input[0]])) * itemsize
    sizes.update({name: arr.nbytes for name, arr in inits.items()})
    return total + sum(sizes[o] for o in sizes if o not in inits) - _folded_bytes(model, sizes)


def _folded_bytes(model: onnx.ModelProto, sizes: dict[str, int]) -> int:
    """Bytes saved by folding each BatchNormalization whose input is a Conv's output read
    by it alone."""
    made_by = {out: node for node in model.graph.node for out in node.output}
    readers: dict[str, int] = {}
    for node in model.graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    saved = 0
    for node in model.graph.node:
        conv = made_by.get(node.input[0])
        if node.op_type != "BatchNormalization" or conv is None or conv.op_type != "Conv" \
                or readers[node.input[0]] != 1:
            continue
        vectors = [sizes[name] for name in node.input[1:]] + [sizes[n] for n in conv.input[2:]]
        saved += sum(vectors) - vectors[0]  # (one bias of one vector's bytes stays)
    return saved


def test_resnet50_weight_bytes_are_its_onnx_weights() -> None:
    g = load_graph("resnet50")
    total = sum(op.weight_bytes for op in g.ops)
    # 102,440,608 in the file; its 53 norms, of 26,560 channels in all, fold into its convs
    assert total == _onnx_weight_bytes(bundled_onnx_path("resnet50")) == 102_440_608 \
        - 26_560 * 3 * 4
    assert 25.5e6 < total / 4 < 25.7e6  # ResNet-50 has ~25.6 M float32 parameters
    assert sum(op.input_bytes for op in g.ops) == 3 * 224 * 224 * 4


@pytest.mark.parametrize("name", ONNX_NAMES)
def test_shipped_weight_bytes_match_the_onnx_file(name: str) -> None:
    g = load_graph(name)
    assert sum(op.weight_bytes for op in g.ops) == _onnx_weight_bytes(bundled_onnx_path(name))
    assert sum(op.input_bytes for op in g.ops) == 3 * 224 * 224 * 4


def test_seed_te_has_no_weights() -> None:
    assert all(op.weight_bytes == 0 for op in load_graph("seed_te").ops)


# -- validation of graph values ------------------------------------------------------------
def _op(**kw) -> Op:
    args = {"name": "k", "kind": "conv2d", "flops": 10.0, "bytes_read": 100,
            "output_bytes": 10, "external_bytes": 60, "weight_bytes": 40}
    return Op(**{**args, **kw})


def test_op_weight_and_input_bytes() -> None:
    op = _op()
    assert (op.weight_bytes, op.input_bytes) == (40, 20)
    assert _op(weight_bytes=60).input_bytes == 0
    assert Op(name="k", kind="pool", flops=1, bytes_read=1, output_bytes=1).weight_bytes == 0


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"weight_bytes": 61}, "weight_bytes <= external_bytes"),
        ({"weight_bytes": -1}, "weight_bytes >= 0"),
        ({"weight_bytes": 4.5}, "weight_bytes must be an integer"),
        ({"weight_bytes": True}, "weight_bytes must be an integer"),
        ({"flops": math.nan}, "flops must be finite"),
        ({"flops": math.inf}, "flops must be finite"),
        ({"flops": -1.0}, "flops >= 0"),
        ({"flops": False}, "flops must be a number"),
        ({"flops": "10"}, "flops must be a number"),
        ({"bytes_read": math.nan}, "bytes_read must be an integer"),
        ({"bytes_read": 100.5}, "bytes_read must be an integer"),
        ({"output_bytes": None}, "output_bytes must be an integer"),
        ({"external_bytes": -5}, "external_bytes >= 0"),
    ],
)
def test_bad_op_values_are_one_line_graph_errors(kw: dict, field: str) -> None:
    with pytest.raises(GraphError) as info:
        _op(**kw)
    msg = str(info.value)
    assert msg.startswith("op 'k': ") and field in msg and "\n" not in msg


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"src": 0.0}, "src must be an integer"),
        ({"dst": 1.5}, "dst must be an integer"),
        ({"src": True}, "src must be an integer"),
        ({"nbytes": math.inf}, "nbytes must be an integer"),
        ({"nbytes": -1}, "nbytes >= 0"),
        ({"src": 1, "dst": 1}, "src < dst"),
    ],
)
def test_bad_edge_values_are_one_line_graph_errors(kw: dict, field: str) -> None:
    with pytest.raises(GraphError) as info:
        Edge(**{"src": 0, "dst": 1, "nbytes": 8, **kw})
    msg = str(info.value)
    assert msg.startswith("edge ") and field in msg and "\n" not in msg


def test_numpy_integers_become_ints() -> None:
    op = _op(bytes_read=np.int64(100), weight_bytes=np.int32(40))
    edge = Edge(src=np.int64(0), dst=np.int64(1), nbytes=np.uint32(8))
    assert type(op.bytes_read) is int and type(op.weight_bytes) is int
    assert {type(v) for v in (edge.src, edge.dst, edge.nbytes)} == {int}
    json.dumps(OpGraph(name="g", ops=(op, _op(name="l")), edges=(edge,)).to_dict())


def test_weight_bytes_round_trip_and_old_files_default_to_zero(tmp_path) -> None:
    g = OpGraph(name="g", ops=(_op(),), edges=())
    path = tmp_path / "g.json"
    g.save(path)
    assert json.loads(path.read_text())["ops"][0]["weight_bytes"] == 40
    assert OpGraph.load(path) == g
    old = g.to_dict()
    del old["ops"][0]["weight_bytes"]  # written before the field existed
    assert OpGraph.from_dict(old).ops[0].weight_bytes == 0
    old["ops"][0]["flops"] = math.nan
    with pytest.raises(GraphError, match=r"^old\.json: not an op graph: op 'k': flops"):
        OpGraph.from_dict(old, source="old.json")
