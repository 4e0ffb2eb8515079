"""The build partitions for an accelerator as TVM's BYOC flow does, following the placement
(FuseOpsByPattern, MergeCompositeFunctions, RunCodegen), and the reference accelerator's
regions compute what the unplaced model computes (real TVM builds and runs)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import tvm
from frontend.test_patterns import const
from tvm import relax

from autoplace.deploy import reference_accelerator
from autoplace.deploy.offload import partition
from autoplace.deploy.targets import BuildError
from autoplace.frontend.onnx import import_onnx
from autoplace.frontend.relax import from_relax
from autoplace.hardware.load import load_profile
from autoplace.models import bundled_onnx_path, load_graph
from autoplace.space import Placement, SearchSpace

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
HOST = tvm.target.Target({"kind": "llvm"})
LAUNCH_S, RATE = 20e-6, 300.0  # the npu's launch overhead, its conv2d_bias_relu GFLOP/s


def npu_profile(patterns=None, codegen: str = "autoplace_ref"):
    """The bundled npu profile, its npu built by ``codegen`` (``patterns``: its table)."""
    p = load_profile("npu")
    npu = p.unit("npu")
    npu = dataclasses.replace(npu, codegen=codegen, patterns=frozenset(patterns or npu.patterns))
    assert npu.launch_overhead_s == pytest.approx(LAUNCH_S)
    assert npu.gflops["conv2d_bias_relu"] == RATE
    return dataclasses.replace(p, units=tuple(npu if u.name == "npu" else u for u in p.units))


def conv_module() -> tvm.IRModule:
    """conv2d+bias+relu (one kernel), then a bare conv2d (another); 1x4x8x8 all along."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 4, 8, 8), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.conv2d(x, const(4, 4, 3, 3), padding=1))
            y = bb.emit(relax.op.nn.relu(bb.emit(relax.op.add(y, const(1, 4, 1, 1)))))
            out = bb.emit_output(relax.op.nn.conv2d(y, const(4, 4, 1, 1)))
        bb.emit_func_output(out)
    return bb.finalize()


def run(mod: tvm.IRModule, inputs: list[np.ndarray]) -> list[np.ndarray]:
    out = relax.VirtualMachine(tvm.compile(mod, target=HOST), tvm.cpu())["main"](*inputs)
    return [out.numpy()] if hasattr(out, "numpy") else [o.numpy() for o in out]


def random_inputs(mod: tvm.IRModule) -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    return [rng.standard_normal([int(d) for d in p.ty.shape.values]).astype("float32")
            for p in mod["main"].params]


def placed(graph, on_npu) -> Placement:
    return Placement(ops={op.name: ("npu" if i in on_npu else "cpu", "dram")
                          for i, op in enumerate(graph.ops)}, copies={})


def test_the_conv2d_bias_relu_placed_on_the_npu_is_offloaded_and_computes_the_same():
    mod = conv_module()
    _, graph = from_relax(mod, "conv")
    profile = npu_profile(["conv2d_bias_relu"])
    placement = placed(graph, {0})
    assert SearchSpace(graph, profile).check(placement) is None
    reference_accelerator.clear()
    built, offload = partition(mod, graph, placement, profile)
    assert [m.ops for m in offload.matches["npu"]] == [(0,)]
    assert offload.regions == {"npu": 1} and offload.split == 0
    x = random_inputs(mod)
    np.testing.assert_array_equal(run(built, x)[0], run(mod, x)[0])
    calls = reference_accelerator.calls()
    assert len(calls) == 1
    # conv 1x4x8x8 outputs x 4x3x3 MACs x 2 = 18,432 FLOPs, + 256 (bias) + 256 (relu)
    assert calls[0].modelled_s == pytest.approx(LAUNCH_S + 18_944 / (RATE * 1e9))


def test_the_check_follows_the_placement_and_a_bare_conv2d_is_not_offloaded():
    mod = conv_module()
    _, graph = from_relax(mod, "conv")
    profile = npu_profile(["conv2d_bias_relu"])
    built, offload = partition(mod, graph, placed(graph, set()), profile)
    assert offload.matches == {"npu": ()} and offload.regions == {"npu": 0}
    assert "call_dps_packed" not in built["main"].script()
    with pytest.raises(BuildError, match="'conv2d1' is placed on npu, but no match"):
        partition(mod, graph, placed(graph, {1}), profile)  # (the space refuses it too)


def test_an_unregistered_code_generator_is_a_one_line_error_naming_the_key():
    mod = conv_module()
    _, graph = from_relax(mod, "conv")
    with pytest.raises(BuildError) as info:
        partition(mod, graph, placed(graph, {0}), npu_profile(codegen="no_such_npu"))
    assert "units.npu.codegen: no code generator relax.ext.no_such_npu" in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("name", ["squeezenet", "bert_tiny", "vit_tiny"])
def test_every_match_offloaded_computes_the_unplaced_outputs(name):
    mod, graph = import_onnx(bundled_onnx_path(name)), load_graph(name)
    profile = npu_profile()
    on_npu = {i for m in graph.matches if m.pattern in profile.unit("npu").patterns
              for i in m.ops}
    placement = placed(graph, on_npu)
    assert SearchSpace(graph, profile).check(placement) is None
    reference_accelerator.clear()
    built, offload = partition(mod, graph, placement, profile)
    assert {i for m in offload.matches["npu"] for i in m.ops} == on_npu
    x = random_inputs(mod)
    for got, want in zip(run(built, x), run(mod, x), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # every region called once (bert_tiny's two attentions share one function: two calls);
    # at least one per placed group, more where the merge split one
    assert len(reference_accelerator.calls()) == offload.regions["npu"]
    assert offload.regions["npu"] == offload.groups["npu"] + offload.split_of("npu")
