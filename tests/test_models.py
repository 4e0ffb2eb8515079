"""Bundled models: names, shipped JSON graphs, loading by name and path."""

from __future__ import annotations

import subprocess
import sys

import pytest

from autoplace.graph import GraphError, OpGraph
from autoplace.models import BUNDLED, GRAPH_DIR, bundled_onnx_path, load_graph, load_module, main

ONNX_NAMES = ["squeezenet", "resnet50", "densenet121", "inception_v1", "inception_v2",
              "shufflenet", "vgg19", "alexnet", "zfnet512"]


def test_bundled_names_files_and_json() -> None:
    assert list(BUNDLED) == [*ONNX_NAMES, "seed_te"]
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
    assert out.stdout.split() == ["145", "[]"]


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
