"""Reductions onto channel blocks narrower than a vector, merged (deploy.channel_pairs)."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
import tvm_ffi
from deploy.test_schedule import _run, _update
from tvm import s_tir, te, tirx

from autoplace.deploy.channel_pairs import blocks_per_vector
from autoplace.deploy.cpu_rules import vector_bits
from autoplace.deploy.prepack import layout_free, split_packs
from autoplace.deploy.schedule import default_schedule
from autoplace.hardware.load import load_profile
from autoplace.models import load_module
from autoplace.runtime.layout import runtime_program
from autoplace.runtime.libraries import kernel_func

#: scheduled for, never run on: 16 float32 lanes; the schedule then runs on this machine's
#: CPU, whose LLVM splits a vector wider than its registers (so any x86-64 runs it)
AVX512 = tvm.target.Target({"kind": "llvm", "num-cores": 2, "mcpu": "x86-64-v4"})
HERE = tvm.target.Target({"kind": "llvm", "num-cores": 2})
#: this machine's CPU (AVX2 or wider: 8 lanes or more; blocks of 4 channels merge here)
THIS_CPU = tvm.target.Target({"kind": "llvm", "num-cores": 2,
                              "mcpu": tvm.target.codegen.llvm_get_system_cpu()})
#: squeezenet's classifier: a 1x1 conv of 512 channels (NCHW16c) to 1,000 (NCHW8c)
CLASSIFIER = "fused_conv2d17_add9_relu9"


def blocks_of_4(channels: int = 20, epilogue: bool = True):
    """A 1x1 conv of 32 channels (NCHW16c) onto ``channels`` in blocks of 4 (NCHW4c) and
    7 x 7, with a bias and a ReLU (with ``epilogue``; else the bias is unused), its weight
    a constant: 5 blocks, an odd number, so merging them pads (on AVX2 two a vector, on
    AVX-512 four)."""
    x = te.placeholder((1, 2, 7, 7, 16), name="x")
    w = te.placeholder((channels, 32, 1, 1), name="w")
    b = te.placeholder((channels,), name="b")
    rc, ri = te.reduce_axis((0, 2), name="rc"), te.reduce_axis((0, 16), name="ri")
    conv = te.compute((1, channels // 4, 7, 7, 4), lambda n, c, h, v, i: te.sum(  # (as the
        x[n, rc, h, v, ri] * w[c * 4 + i, rc * 16 + ri, 0, 0], axis=[rc, ri]),  # runtime's
        name="conv")  # layout writes a conv: an iterator per block of channels, and within)
    out = te.compute(conv.shape, lambda n, c, h, v, i: te.max(
        conv[n, c, h, v, i] + b[c * 4 + i], tvm.tirx.const(0.0, "float32")), name="relu")
    return layout_free(te.create_prim_func([x, w, b, out if epilogue else conv]), [1])


@pytest.fixture(scope="module")
def program():
    mod, graph = load_module("squeezenet")
    return runtime_program(mod, graph, load_profile("host"))


def _preprocs(func: tirx.PrimFunc) -> list[s_tir.SBlock]:
    found = []
    tvm_ffi.structural_walk(func.body, (s_tir.SBlock, lambda b: found.append(b)
                                        if "meta_schedule.layout_rewrite_preproc"
                                        in b.annotations else None))
    return found


@pytest.mark.parametrize("block, lanes, k", [(8, 16, 2), (4, 16, 4), (8, 8, 1), (16, 16, 1),
                                             (16, 8, 1), (12, 16, 1), (None, 16, 1)])
def test_a_vector_holds_as_many_blocks_as_fill_it(block, lanes, k):
    assert blocks_per_vector(block, lanes) == k


def test_a_conv_onto_blocks_of_8_computes_two_blocks_a_vector_and_what_it_did(program):
    """On AVX-512, the classifier's 125 blocks of 8 channels are computed in 63 vectors of
    16 (two blocks each, the last padded), its weight packed once with zeros for the
    padding; the padding's channels are never written: the outputs are the unscheduled
    kernel's."""
    func = kernel_func(program, CLASSIFIER)
    scheduled = default_schedule(func, AVX512)
    block, _, around = _update(scheduled)
    assert around[-1].kind == tirx.ForKind.VECTORIZED and int(around[-1].extent) == 16
    assert around[-2].kind == tirx.ForKind.UNROLLED and int(around[-2].extent) == 13
    (pack,) = _preprocs(scheduled)
    assert [int(d) for d in pack.writes[0].source.shape] == [63, 32, 16, 1, 1, 16]
    assert [int(d) for d in scheduled.params[-1].ty.shape] == [1, 125, 13, 13, 8]
    np.testing.assert_allclose(_run(scheduled, HERE), _run(func, HERE), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("how", ["a weight not constant", "8 lanes"])
def test_a_conv_onto_blocks_of_8_keeps_a_block_a_vector_otherwise(program, how):
    """Not merged, a block of 8 a vector: when its weight is not a constant (a padded copy
    would be made on every call) or when 8 lanes are the vector (AVX2)."""
    func = program.funcs[CLASSIFIER] if how == "a weight not constant" else kernel_func(
        program, CLASSIFIER)
    target = AVX512 if how == "a weight not constant" else tvm.target.Target(
        {"kind": "llvm", "num-cores": 2, "mcpu": "x86-64-v3"})
    block, _, around = _update(default_schedule(func, target))
    assert int(around[-1].extent) == 8 and around[-1].kind == tirx.ForKind.VECTORIZED
    assert not any(r.source.name.endswith("_pad") for r in block.reads)


@pytest.mark.parametrize("epilogue", [True, False], ids=["bias-relu", "conv-alone"])
def test_blocks_of_4_merge_on_this_cpu_and_compute_what_they_did(epilogue):
    """On this CPU (8 lanes or 16) a vector holds 2 or 4 blocks of 4 channels: the conv's
    5 blocks are padded to a multiple of that, its weight packed with zeros for the
    padding (split off, packed once); packing then computing gives the unscheduled
    kernel's output, the padding's channels never written (trimmed in the epilogue, or,
    without one, by the copy into the output)."""
    func = blocks_of_4(epilogue=epilogue)
    lanes = vector_bits(THIS_CPU) // 32
    k = blocks_per_vector(4, lanes)
    assert k >= 2  # (any x86-64 CPU since 2013)
    scheduled = default_schedule(func, THIS_CPU)
    block, _, around = _update(scheduled)
    assert around[-1].kind == tirx.ForKind.VECTORIZED and int(around[-1].extent) == 4 * k
    compute, (pack,) = split_packs(scheduled, 1)
    blocks = -(-5 // k) * k  # padded
    assert pack.param == 1 and pack.shape[0] * pack.shape[-1] == blocks * 4
    rng = np.random.default_rng(1)
    x, w, b = (rng.standard_normal([int(d) for d in p.ty.shape]).astype("float32")
               for p in func.params[:3])
    out = np.full((1, 5, 7, 7, 4), np.nan, "float32")
    want = tvm.runtime.tensor(out.copy())
    _lib(func)(*(tvm.runtime.tensor(a) for a in (x, w, b)), want)
    packed = tvm.runtime.tensor(np.full(pack.shape, np.nan, "float32"))
    _lib(pack.func)(tvm.runtime.tensor(w), packed)
    got = tvm.runtime.tensor(out.copy())
    _lib(compute)(tvm.runtime.tensor(x), packed, tvm.runtime.tensor(b), got)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    assert not np.isnan(packed.numpy()).any()  # the padding was written: zeros


def _lib(func: tirx.PrimFunc):
    return tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}),
                       target=THIS_CPU)["main"]
