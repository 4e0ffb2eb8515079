"""Generated transformers: deterministic weights, ONNX Runtime against TVM, op kinds
derived from the config, the file cache, and graphs loaded without TVM."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from collections import Counter

import numpy as np
import onnx
import pytest

from autoplace.deploy import compile_unplaced, random_inputs
from autoplace.deploy.run import Loaded
from autoplace.frontend.onnx import from_onnx
from autoplace.models import BUNDLED, bundled_onnx_path, load_graph, load_module
from autoplace.zoo import MODELS, Transformer, cache, model_path
from autoplace.zoo.nets import build

#: Reduced configs of the two larger archs, to compile in a second each.
SMALL = {
    "vit_small_image": dataclasses.replace(MODELS["vit_tiny"], image=32, patch=16, layers=2,
                                           hidden=64, heads=4, intermediate=128, classes=10),
    "gpt2_small_width": dataclasses.replace(MODELS["gpt2_block"], hidden=64, heads=4,
                                            intermediate=256, seq=16),
}


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """The default model cache moved to a temporary directory."""
    monkeypatch.setattr(cache, "DEFAULT_CACHE", tmp_path / "models")
    return tmp_path / "models"


def expected_kinds(cfg: Transformer) -> Counter:
    """Kernel kinds after fusion, from the config: per layer Q, K, V, output, two MLP and
    two attention MatMuls (GPT-2: one fused QKV MatMul), one Softmax and two layer norms;
    per head split one injective reshape-transpose per Q, K and V and one merge (GPT-2: and
    the QKV Split); a ViT adds the patch Conv, the token assembly, the final norm, the class
    token's reshape and the head; GPT-2 its final norm."""
    per_layer = Counter(matmul=8, softmax=1, norm=2, injective=4)
    if cfg.arch == "gpt2":
        per_layer += Counter(injective=1)
        per_layer -= Counter(matmul=2)
    kinds = Counter({k: v * cfg.layers for k, v in per_layer.items()})
    if cfg.arch == "vit":
        kinds += Counter(conv2d=1, injective=2, norm=1, matmul=1)
    if cfg.arch == "gpt2":
        kinds += Counter(norm=1)
    return kinds


def test_zoo_models_are_bundled() -> None:
    assert set(MODELS) <= set(BUNDLED)
    assert {MODELS[n].arch for n in MODELS} == {"bert", "vit", "gpt2"}
    assert (MODELS["bert_base"].layers, MODELS["bert_base"].hidden) == (12, 768)


@pytest.mark.parametrize("cfg", [MODELS["bert_tiny"], *SMALL.values()],
                         ids=["bert_tiny", *SMALL])
def test_weights_are_deterministic(cfg: Transformer) -> None:
    first = build(cfg, "m").SerializeToString()
    assert build(cfg, "m").SerializeToString() == first
    assert build(dataclasses.replace(cfg, seed=1), "m").SerializeToString() != first


def test_models_hold_attention_layer_norm_and_gelu() -> None:
    for name, cfg in {"bert_tiny": MODELS["bert_tiny"], **SMALL}.items():
        ops = Counter(n.op_type for n in build(cfg, name).graph.node)
        assert ops["Softmax"] == ops["Gelu"] == cfg.layers
        assert ops["LayerNormalization"] == 2 * cfg.layers + (cfg.arch != "bert")
        assert ops["MatMul"] == cfg.layers * (6 if cfg.arch == "gpt2" else 8) + (
            cfg.arch == "vit")


def test_weights_are_not_degenerate() -> None:
    model = build(MODELS["bert_tiny"], "bert_tiny")
    weights = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    query = weights["layer0.attention.query.weight"]
    assert query.shape == (128, 128) and 0.018 < query.std() < 0.022
    assert abs(weights["layer0.attention.norm.weight"].mean() - 1.0) < 0.01


def _onnxruntime(path, inputs: list[np.ndarray]) -> list[np.ndarray]:
    import onnxruntime

    sess = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {i.name: x for i, x in zip(sess.get_inputs(), inputs)})


@pytest.mark.parametrize("name", ["bert_tiny", *SMALL])
def test_tvm_build_computes_what_onnxruntime_does(name: str, tmp_path, cache_dir) -> None:
    if name in SMALL:
        path = tmp_path / f"{name}.onnx"
        onnx.save(build(SMALL[name], name), str(path))
        mod, graph = from_onnx(path, name)
    else:
        path = bundled_onnx_path(name)
        mod, graph = load_module(name)
    loaded = Loaded(compile_unplaced(mod))
    inputs = random_inputs(loaded.meta, seed=3)
    got = loaded.run(loaded.inputs(inputs))
    want = _onnxruntime(path, inputs)
    assert len(got) == len(want) == 1 and got[0].std() > 0.1
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-5)
    cfg = SMALL.get(name) or MODELS[name]
    assert Counter(op.kind for op in graph.ops) == expected_kinds(cfg)


def test_gpt2_attention_is_causal(tmp_path) -> None:
    """A change to the last token changes only the last position's output."""
    cfg = SMALL["gpt2_small_width"]
    path = tmp_path / "gpt2.onnx"
    onnx.save(build(cfg, "gpt2"), str(path))
    rng = np.random.default_rng(0)
    x = rng.random((1, cfg.seq, cfg.hidden), dtype=np.float32)
    y = x.copy()
    y[0, -1] = rng.random(cfg.hidden)  # not a constant shift: the layer norms remove it
    (a,), (b,) = _onnxruntime(path, [x]), _onnxruntime(path, [y])
    np.testing.assert_array_equal(a[0, :-1], b[0, :-1])
    assert np.abs(a[0, -1] - b[0, -1]).max() > 0.1


@pytest.mark.parametrize("name", list(MODELS))
def test_shipped_graph_kinds_follow_the_config(name: str) -> None:
    graph = load_graph(name)
    assert Counter(op.kind for op in graph.ops) == expected_kinds(MODELS[name])
    assert sum(op.weight_bytes for op in graph.ops) == 4 * expected_weights(MODELS[name])


def expected_weights(cfg: Transformer) -> int:
    """Weight floats the kernels read, from the config: per layer four ``h x h`` and two
    ``h x inner`` linears with their biases and two norms; GPT-2's causal mask is read by
    each layer's score kernel; the attention scale is folded into its kernel."""
    h, inner, t = cfg.hidden, cfg.intermediate, cfg.tokens
    total = cfg.layers * (4 * h * h + 2 * h * inner + 9 * h + inner)
    if cfg.arch == "gpt2":
        total += cfg.layers * t * t + 2 * h
    if cfg.arch == "vit":
        patch = h * cfg.channels * cfg.patch ** 2 + h
        total += patch + h + t * h + 2 * h + h * cfg.classes + cfg.classes
    return total


@pytest.mark.parametrize("name", ["bert_tiny", "gpt2_block", "vit_tiny"])
def test_shipped_graph_is_the_generated_model_s(name: str, cache_dir) -> None:
    assert load_module(name)[1].fingerprint == load_graph(name).fingerprint


def test_cached_file_is_written_once_and_again_when_missing(cache_dir) -> None:
    path = model_path("bert_tiny")
    assert path.parent == cache_dir and path.name.startswith("bert_tiny-")
    assert path.read_bytes() == build(MODELS["bert_tiny"], "bert_tiny").SerializeToString()
    stamp = path.stat().st_mtime_ns
    time.sleep(0.01)
    assert model_path("bert_tiny") == path and path.stat().st_mtime_ns == stamp
    path.unlink()
    assert model_path("bert_tiny") == path and path.is_file()
    assert [p.name for p in cache_dir.iterdir()] == [path.name]  # no temporary left


def test_a_stale_cached_file_is_replaced(cache_dir) -> None:
    cache_dir.mkdir()
    stale = cache_dir / "bert_tiny-000000000000.onnx"
    stale.write_bytes(b"built by an older builder")
    path = model_path("bert_tiny")
    assert path != stale and path.is_file() and not stale.exists()
    assert bundled_onnx_path("bert_tiny", cache_dir) == path


def test_a_bundled_transformer_graph_loads_without_tvm_nor_onnx() -> None:
    code = ("import sys\n"
            "from autoplace.models import load_graph\n"
            "g = load_graph('bert_base')\n"
            "print(len(g.ops), sorted(m for m in ('tvm', 'tvm_ffi', 'onnx') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == [str(len(load_graph("bert_base").ops)), "[]"]


def test_cli_tunes_compiles_and_checks_a_transformer(tmp_path) -> None:
    """graph, a simulated tune, compile and run --check of bert_tiny, its ONNX file
    written into the cache of a fresh home directory."""
    env = {**os.environ, "HOME": str(tmp_path)}

    def cli(*args: str) -> str:
        proc = subprocess.run([sys.executable, "-m", "autoplace", *args], capture_output=True,
                              text=True, env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    assert cli("graph", "bert_tiny").startswith("bert_tiny: 30 ops")
    log, out = str(tmp_path / "t.jsonl"), str(tmp_path / "placed")
    cli("tune", "bert_tiny", "--hw", "soc", "--trials", "8", "--log", log, "--no-progress")
    cli("compile", "bert_tiny", "--hw", "soc", "--log", log, "-o", out,
        "--cache-dir", str(tmp_path / "kernels"))
    assert "check: all 1 outputs equal the unplaced bert_tiny's" in cli("run", out, "--check")
    written = [p.name for p in (tmp_path / ".cache/autoplace/models").iterdir()]
    assert written == [f"bert_tiny-{cache.model_key('bert_tiny')}.onnx"]
