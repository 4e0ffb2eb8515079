"""Blocked activations (autoplace.runtime.layout): which tensors, and kernels that agree."""

from __future__ import annotations

import dataclasses

import pytest
from tvm import relax

from autoplace.deploy import reference_accelerator
from autoplace.frontend.relax import from_relax, fuse
from autoplace.hardware.load import load_profile
from autoplace.models import load_module
from autoplace.runtime import Runtime
from autoplace.runtime.layout import BLOCKS, blocked_func, region_ops, runtime_program
from autoplace.runtime.program import read_program


def _programs(model: str, profile: str = "host"):
    mod, graph = load_module(model)
    return read_program(mod), runtime_program(mod, graph, load_profile(profile)), graph


def _shape(param) -> list[int]:
    return [int(d) for d in param.ty.shape]


def test_the_runtime_holds_activations_blocked_and_inputs_and_results_plain(kernel_cache):
    plain, blocked, graph = _programs("squeezenet")
    for k, (a, b) in enumerate(zip(plain.kernels, blocked.kernels)):
        for f, (p, q) in enumerate(zip(a.outputs, b.outputs)):
            assert p.nbytes == q.nbytes  # (no padding: copies and sizes as before)
            if q != p:  # [n, c // b, h, w, b]
                n, c, h, w = p.shape
                assert q.shape[-1] in BLOCKS and q.shape == (n, c // q.shape[-1], h, w,
                                                             q.shape[-1])
                assert ("op", k, f) not in blocked.results
    first, last = blocked.kernels[0], blocked.kernels[36]  # 64 and 1000 output channels
    assert first.outputs[0].shape == (1, 4, 111, 111, 16)
    assert last.func == "fused_conv2d17_add9_relu9"
    assert last.outputs[0].shape == (1, 125, 13, 13, 8)  # 1000 = 125 blocks of 8
    assert blocked.kernels[37].outputs[0].shape == (1, 1000, 1, 1)  # (a reshape reads it
    # through its flattened index: across blocks)
    assert blocked.inputs == plain.inputs
    mod, graph = load_module("squeezenet")
    with Runtime(mod, graph, load_profile("host"), cache_dir=kernel_cache) as rt:
        assert rt.program.kernels[0].outputs == first.outputs  # what the runtime runs


@pytest.mark.parametrize("model", ["squeezenet", "inception_v1", "shufflenet"])
def test_every_kernel_takes_the_tensors_it_is_passed_in_their_layout(model):
    """Each PrimFunc's parameters have the shapes of what every call of it passes (a
    function called with a blocked tensor at one call and a plain one at another keeps
    both plain)."""
    _, program, _ = _programs(model)
    specs = {("input", i): s.shape for i, s in enumerate(program.inputs)}
    specs |= {("weight", w): s.shape for w, s in enumerate(program.weights)}
    specs |= {("op", k, f): s.shape for k, kern in enumerate(program.kernels)
              for f, s in enumerate(kern.outputs)}
    for k, kern in enumerate(program.kernels):
        passed = [tuple(a) for a in kern.args] + [("op", k, f) for f in range(len(kern.outputs))]
        params = program.funcs[kern.func].params
        assert [tuple(_shape(p)) for p in params] == [tuple(specs[r]) for r in passed], kern.func


def _grouped_conv():
    """shufflenet's 1x1 conv of 4 groups of 68 channels: a group is no multiple of 16."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 272, 14, 14), "float32"))
    w = relax.Var("w", relax.TensorType((272, 68, 1, 1), "float32"))
    with bb.function("main", [x, w]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.nn.conv2d(x, w, groups=4))
        bb.emit_func_output(out)
    mod = fuse(bb.finalize())
    return next(mod[gv] for gv in mod.functions if gv.name_hint != "main")


def test_a_kernel_that_reads_across_channel_blocks_keeps_its_tensors_plain():
    with pytest.raises(ValueError, match="across its channel blocks"):
        blocked_func(_grouped_conv(), {0: 16, 2: 16})
    _, program, graph = _programs("shufflenet")
    grouped = [k for k in program.kernels if "conv2d8" in k.func]
    assert grouped and all(len(o.shape) == 4 for k in grouped for o in k.outputs)


def test_tensors_an_op_of_a_code_generators_unit_may_touch_stay_plain():
    base = load_profile("npu")
    npu = dataclasses.replace(base.unit("npu"), codegen=reference_accelerator.NAME)
    profile = dataclasses.replace(base, units=tuple(npu if u.name == "npu" else u
                                                    for u in base.units))
    mod, graph = load_module("squeezenet")
    fixed = region_ops(graph, profile)
    assert fixed and not region_ops(graph, base)  # (no code generator: nothing fixed)
    program = runtime_program(mod, graph, profile)
    for k in fixed:
        kern = program.kernels[k]
        assert all(len(o.shape) == 4 for o in kern.outputs)
        assert all(len(program.kernels[a[1]].outputs[a[2]].shape) == 4
                   for a in kern.args if a[0] == "op")


def _pools_then(last) -> tuple:
    """x (16 channels) -> max pool -> ``last`` -> the result, fused and as a graph."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 16, 8, 8), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.max_pool2d(x, 3, padding=1))
            out = bb.emit_output(last(y))
        bb.emit_func_output(out)
    return from_relax(bb.finalize(), "pools")


@pytest.mark.parametrize("last, blocked", [
    (lambda y: relax.op.nn.max_pool2d(y, 2, strides=2), True),  # (another PrimFunc)
    (lambda y: relax.op.nn.softmax(y, axis=-1), False),  # (reads rows: plain)
])
def test_a_tensor_between_two_pools_is_blocked_and_one_a_softmax_reads_is_not(last, blocked):
    mod, graph = _pools_then(last)
    program = runtime_program(mod, graph, load_profile("host"))
    between = program.kernels[0].outputs[0].shape
    assert between == ((1, 1, 8, 8, 16) if blocked else (1, 16, 8, 8))


def test_a_batch_norm_no_conv_absorbs_keeps_its_tensors_blocked():
    """densenet121 normalises each block's input before its conv (per channel, as a conv's
    bias is): its norms' tensors are blocked like the convs'."""
    mod, graph = load_module("densenet121")
    program = runtime_program(mod, graph, load_profile("host"))
    norms = [k for k, op in enumerate(graph.ops) if op.kind == "norm"]
    assert norms and all(len(program.kernels[k].outputs[0].shape) == 5 for k in norms)
