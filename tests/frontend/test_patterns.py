"""Where composite patterns match a model's fused kernels (real TVM pattern matching and
fusion): a kernel matched whole, a kernel matched only in part (not a match), a composite
fusion split over several kernels, and kernels that share one fused function."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tvm import relax

from autoplace.frontend.patterns import table
from autoplace.frontend.relax import from_relax
from autoplace.graph import Match
from autoplace.models import bundled_onnx_path
from autoplace.patterns import PATTERNS

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
RNG = np.random.default_rng(0)


def const(*shape: int) -> relax.Expr:
    return relax.const(RNG.standard_normal(shape).astype("float32"))


def conv_module(bias_relu: bool) -> tuple:
    """main(x) = conv2d(x, w) [+ b, relu], then a bare conv2d: two kernels."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 4, 8, 8), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.conv2d(x, const(4, 4, 3, 3), padding=1))
            if bias_relu:
                y = bb.emit(relax.op.nn.relu(bb.emit(relax.op.add(y, const(1, 4, 1, 1)))))
            out = bb.emit_output(relax.op.nn.conv2d(y, const(4, 4, 1, 1)))
        bb.emit_func_output(out)
    return from_relax(bb.finalize(), "conv")


def test_every_pattern_name_has_a_tvm_pattern():
    assert set(table()) == set(PATTERNS)


def test_a_kernel_is_matched_by_the_pattern_that_covers_it_whole():
    _, g = conv_module(bias_relu=True)
    assert [op.kind for op in g.ops] == ["conv2d", "conv2d"]
    # conv2d+add+relu is one kernel: conv2d_bias_relu covers it, conv2d alone only a part
    assert g.matches == (Match(pattern="conv2d", ops=(1,)),
                         Match(pattern="conv2d_bias_relu", ops=(0,)))


def test_without_bias_and_relu_the_kernel_is_a_bare_conv2d():
    _, g = conv_module(bias_relu=False)
    assert g.matches == (Match(pattern="conv2d", ops=(0,)), Match(pattern="conv2d", ops=(1,)))


def attention_module(heads: int = 2, seq: int = 8, dim: int = 4):
    """softmax(q @ k^T / sqrt(d) + mask) @ v, then layer norm: attention spans kernels."""
    bb = relax.BlockBuilder()
    shape = (1, heads, seq, dim)
    q, k, v = (relax.Var(n, relax.TensorType(shape, "float32")) for n in "qkv")
    with bb.function("main", [q, k, v]):
        with bb.dataflow():
            kt = bb.emit(relax.op.permute_dims(k, [0, 1, 3, 2]))
            s = bb.emit(relax.op.divide(bb.emit(relax.op.matmul(q, kt)),
                                        relax.const(np.float32(np.sqrt(dim)))))
            s = bb.emit(relax.op.add(s, const(1, 1, seq, seq)))
            a = bb.emit(relax.op.matmul(bb.emit(relax.op.nn.softmax(s)), v))
            out = bb.emit_output(relax.op.nn.layer_norm(a, const(dim), const(dim), [-1]))
        bb.emit_func_output(out)
    return from_relax(bb.finalize(), "attention")


def test_an_attention_fusion_split_is_one_match_over_its_kernels():
    _, g = attention_module()
    attention = [m for m in g.matches if m.pattern == "attention"]
    assert len(attention) == 1 and len(attention[0].ops) > 1
    kinds = [g.ops[i].kind for i in attention[0].ops]
    assert "softmax" in kinds and kinds.count("matmul") == 2
    norm = [i for i, op in enumerate(g.ops) if op.kind == "norm"]
    assert Match(pattern="layer_norm", ops=tuple(norm)) in g.matches
    assert not set(norm) & set(attention[0].ops)


def test_kernels_that_share_one_fused_function_are_each_matched():
    """squeezenet's fire modules call one fused conv2d_add_relu function from several
    kernels: each is its own match (every conv2d kernel of it is conv2d+bias+relu)."""
    from autoplace.frontend.onnx import from_onnx

    _, g = from_onnx(bundled_onnx_path("squeezenet"))
    convs = [i for i, op in enumerate(g.ops) if op.kind == "conv2d"]
    shared = [op.func for op in g.ops if op.name != op.func]
    assert shared  # some kernels do share a function
    assert sorted(m.ops[0] for m in g.matches if m.pattern == "conv2d_bias_relu") == convs


@pytest.mark.parametrize("name", ["bert_tiny", "bert_base", "vit_tiny", "gpt2_block"])
def test_each_transformer_layer_has_one_attention_over_matmul_softmax_matmul(name):
    from autoplace.models import load_graph
    from autoplace.zoo.configs import MODELS

    g = load_graph(name)
    attention = [m for m in g.matches if m.pattern == "attention"]
    assert len(attention) == MODELS[name].layers
    for m in attention:
        assert [g.ops[i].kind for i in m.ops] == ["matmul", "softmax", "matmul"]
    assert len({i for m in attention for i in m.ops}) == 3 * len(attention)
    # every dense layer too: the residual add TVM fuses into the output projections and
    # the MLP's second matmul is matched by matmul_bias_residual
    covered = {i for m in g.matches for i in m.ops}
    assert all(i in covered for i, op in enumerate(g.ops) if op.kind == "matmul")
    residual = [m for m in g.matches if m.pattern == "matmul_bias_residual"]
    assert len(residual) == 2 * MODELS[name].layers


def npu_with(*patterns: str, tmp_path):
    """The npu profile, its npu's table the bundled one plus ``patterns``."""
    from autoplace.hardware.load import load_profile

    text = (Path(__file__).parents[2] / "hwprofiles" / "npu.toml").read_text()
    names = ", ".join(f'"{p}"' for p in patterns)
    text = text.replace('patterns = ["conv2d",', f'patterns = [{names}, "conv2d",')
    rates = "".join(f'"{p}" = 50.0\n' for p in patterns)
    text = text.replace("[units.npu.gflops]\n", f"[units.npu.gflops]\n{rates}")
    path = tmp_path / "npu_own.toml"
    path.write_text(text)
    return load_profile(path)


@pytest.mark.parametrize("entry", ["custom_patterns:max_pool",
                                   "custom_patterns:with_annotations"])
def test_a_units_own_pattern_by_entry_point_is_matched_and_offered(entry, tmp_path):
    from autoplace.models import graph_for
    from autoplace.space import SearchSpace

    profile = npu_with(entry, tmp_path=tmp_path)
    g = graph_for("squeezenet", profile)
    pools = [i for i, op in enumerate(g.ops) if op.func.startswith("max_pool2d")]
    assert pools and [m.ops[0] for m in g.matches if m.pattern == entry] == pools
    space = SearchSpace(g, profile)
    assert all("npu" in {space.units[u] for u in space.c_unit[i, :space.n_choices[i]]}
               for i in pools)


@pytest.mark.parametrize(("entry", "what"), [
    ("custom_patterns:missing", "AttributeError"),
    ("no_such_vendor.patterns:dw", "ModuleNotFoundError: No module named 'no_such_vendor'"),
    ("custom_patterns:not_a_pattern", "returned int, not a tvm.relax.dpl pattern"),
])
def test_a_bad_entry_point_is_a_one_line_error_naming_the_key(entry, what, tmp_path):
    from autoplace.hardware.profile import ProfileError
    from autoplace.models import graph_for

    profile = npu_with(entry, tmp_path=tmp_path)
    with pytest.raises(ProfileError) as info:
        graph_for("squeezenet", profile)
    message = str(info.value)
    assert message.startswith(f"{profile.source}: units.npu.patterns: entry point {entry!r}")
    assert what in message and "\n" not in message


def test_tune_with_a_bad_entry_point_exits_2_in_one_line(tmp_path):
    from factories import cli, one_line_error

    profile = npu_with("no_such_vendor.patterns:dw", tmp_path=tmp_path)
    proc = cli("tune", "squeezenet", "--hw", profile.source, "--trials", "4", "--log",
               tmp_path / "t.jsonl", "--no-progress")
    one_line_error(proc, "units.npu.patterns: entry point 'no_such_vendor.patterns:dw'")
    assert not (tmp_path / "t.jsonl").exists()  # nothing recorded
