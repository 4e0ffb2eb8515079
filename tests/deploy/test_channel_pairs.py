"""Reductions onto channel blocks narrower than a vector, merged (deploy.channel_pairs)."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import s_tir, tirx

from autoplace.deploy.channel_pairs import blocks_per_vector
from autoplace.deploy.schedule import default_schedule
from autoplace.hardware.load import load_profile
from autoplace.models import load_module
from autoplace.runtime.layout import runtime_program
from autoplace.runtime.libraries import kernel_func

#: scheduled for, never run on: 16 float32 lanes; the schedule then runs on this machine's
#: CPU, whose LLVM splits a vector wider than its registers (so any x86-64 runs it)
AVX512 = tvm.target.Target({"kind": "llvm", "num-cores": 2, "mcpu": "x86-64-v4"})
HERE = tvm.target.Target({"kind": "llvm", "num-cores": 2})
#: squeezenet's classifier: a 1x1 conv of 512 channels (NCHW16c) to 1,000 (NCHW8c)
CLASSIFIER = "fused_conv2d17_add9_relu9"


@pytest.fixture(scope="module")
def program():
    mod, graph = load_module("squeezenet")
    return runtime_program(mod, graph, load_profile("host"))


def _update(func: tirx.PrimFunc) -> tuple[s_tir.SBlock, list[tirx.For]]:
    """The block of ``func`` that accumulates and the loops around it, outer first."""
    found = []

    def visit(stmt, around):
        if isinstance(stmt, tirx.For):
            visit(stmt.body, (*around, stmt))
        elif isinstance(stmt, s_tir.SBlockRealize):
            if stmt.block.name_hint.endswith("_update"):
                found.append((stmt.block, list(around)))
            visit(stmt.block.body, around)
        elif isinstance(stmt, tirx.SeqStmt):
            for s in stmt.seq:
                visit(s, around)
        elif hasattr(stmt, "body"):
            visit(stmt.body, around)

    visit(func.body, ())
    (update,) = found
    return update


def _run(func: tirx.PrimFunc, seed: int = 0) -> np.ndarray:
    lib = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}),
                      target=HERE)
    rng = np.random.default_rng(seed)
    args = [tvm.runtime.tensor(rng.standard_normal([int(d) for d in p.ty.shape])
                               .astype(str(p.ty.dtype))) for p in func.params]
    lib["main"](*args)
    return args[-1].numpy()


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
    block, around = _update(scheduled)
    assert around[-1].kind == tirx.ForKind.VECTORIZED and int(around[-1].extent) == 16
    assert around[-2].kind == tirx.ForKind.UNROLLED and int(around[-2].extent) == 13
    (pack,) = _preprocs(scheduled)
    assert [int(d) for d in pack.writes[0].source.shape] == [63, 32, 16, 1, 1, 16]
    assert [int(d) for d in scheduled.params[-1].ty.shape] == [1, 125, 13, 13, 8]
    np.testing.assert_allclose(_run(scheduled), _run(func), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("how", ["a weight not constant", "8 lanes"])
def test_a_conv_onto_blocks_of_8_keeps_a_block_a_vector_otherwise(program, how):
    """Not merged, a block of 8 a vector: when its weight is not a constant (a padded copy
    would be made on every call) or when 8 lanes are the vector (AVX2)."""
    func = program.funcs[CLASSIFIER] if how == "a weight not constant" else kernel_func(
        program, CLASSIFIER)
    target = AVX512 if how == "a weight not constant" else tvm.target.Target(
        {"kind": "llvm", "num-cores": 2, "mcpu": "x86-64-v3"})
    block, around = _update(default_schedule(func, target))
    assert int(around[-1].extent) == 8 and around[-1].kind == tirx.ForKind.VECTORIZED
    assert not any(r.source.name.endswith("_pad") for r in block.reads)
