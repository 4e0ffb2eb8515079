"""Reductions along contiguous rows (a softmax, a layer norm): a vector of partial results
per row, read a vector at a time; results unchanged."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
import tvm_ffi
from factories import block_nests, legalized_kernel
from tvm import relax, tirx
from tvm.sym.pattern import detect_linear_equation

from autoplace.deploy.row_reduction import along_rows
from autoplace.deploy.schedule import default_schedule

ONE_CORE = tvm.target.Target({"kind": "llvm", "num-cores": 1})
TWO_CORES = tvm.target.Target({"kind": "llvm", "num-cores": 2,
                               "mcpu": tvm.target.codegen.llvm_get_system_cpu()})


KERNELS = {
    "softmax": (lambda x: relax.op.nn.softmax(x), (3, 24, 64)),
    "layer_norm": (lambda x, g, b: relax.op.nn.layer_norm(x, g, b, axes=[-1]),
                   (24, 96), (96,), (96,)),
    "mean": (lambda x: relax.op.mean(x, axis=[-1]), (5, 40)),
}


def _blocks(func) -> dict[str, tuple]:
    """Block name -> (the block, the loops around it, outer first)."""
    return {b.name_hint: (b, around) for b, _, around in block_nests(func.body)}


def _run(func, seed=0) -> list[np.ndarray]:
    lib = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}),
                      target=ONE_CORE)
    rng = np.random.default_rng(seed)
    args = [tvm.runtime.tensor(rng.standard_normal([int(d) for d in p.ty.shape])
                               .astype("float32")) for p in func.params]
    lib["main"](*args)
    return args[-1].numpy()


@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize("target", [TWO_CORES, ONE_CORE], ids=["this-cpu-x2", "sse2-x1"])
def test_each_row_is_reduced_a_vector_at_a_time(name, target):
    """Every reduction gets a partial block (``*_rf``) whose innermost loop is vectorised
    and indexes the row it reads with stride 1 (the lanes of one contiguous load), and the
    kernel computes what it did."""
    make, *shapes = KERNELS[name]
    func = legalized_kernel(make, *shapes)
    scheduled = default_schedule(func, target)
    partial = {n: b for n, b in _blocks(scheduled).items() if n.endswith("_rf")}
    assert partial
    for block, loops in partial.values():
        assert loops[-1].kind == tirx.ForKind.VECTORIZED
        reads = [r for r in block.reads if not any(r.source.same_as(w.source)
                                                   for w in block.writes)]
        lane = [iv.var for iv in block.iter_vars if iv.iter_type == iv.DataPar][0]
        assert any(detect_linear_equation(r.region[-1].min, [lane])[0] == 1
                   for r in reads)
    np.testing.assert_allclose(_run(scheduled), _run(func), rtol=2e-5, atol=2e-6)


def test_a_matmul_does_not_reduce_along_the_rows_of_both_inputs():
    func = legalized_kernel(relax.op.matmul, (16, 32), (32, 48))
    (block,) = [b for b, _ in _blocks(func).values() if b.name_hint == "matmul"]
    assert not along_rows(block)
    assert not any(n.endswith("_rf") for n in _blocks(default_schedule(func, ONE_CORE)))


def test_a_vectorized_partial_is_a_run_of_lanes_in_memory():
    """The partial results' buffer has the lanes as its last dimension: a vector of them is
    one store, not ``lanes`` stores a row apart."""
    func = default_schedule(legalized_kernel(*KERNELS["softmax"][:1], (3, 24, 64)), TWO_CORES)
    block, loops = _blocks(func)["T_softmax_maxelem_rf"]
    (write,) = block.writes
    lanes = int(loops[-1].extent)
    assert int(write.source.shape[-1]) == lanes
    found = []
    tvm_ffi.structural_walk(write.region[-1].min, (tirx.Var, found.append))
    assert [v.same_as(block.iter_vars[0].var) for v in found] == [True]
