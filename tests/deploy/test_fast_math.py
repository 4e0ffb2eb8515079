"""A CPU kernel's exp, erf, tanh and sigmoid as TOPI's polynomials: their error, and where
they replace the intrinsics."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tvm
import tvm_ffi
from factories import legalized_kernel
from tvm import relax, te, tirx

from autoplace.deploy.fast_math import fast_math, for_target
from autoplace.deploy.kernel_db import scheduled

CPU = tvm.target.Target({"kind": "llvm", "num-cores": 1})
CUDA = tvm.target.Target({"kind": "cuda", "arch": "sm_80"}, host={"kind": "llvm"})
X = np.linspace(-30, 30, 200001).astype("float32")


def _calls(func) -> set[str]:
    found = []
    tvm_ffi.structural_walk(func, (tvm.ir.expr.Call,
                                   lambda c: found.append(getattr(c.op, "name", ""))))
    return set(found)


def _elementwise(fn) -> tirx.PrimFunc:
    a = te.placeholder(X.shape, "float32", name="a")
    return te.create_prim_func([a, te.compute(a.shape, lambda i: fn(a[i]), name="out")])


def _run(func) -> np.ndarray:
    lib = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}),
                      target=CPU)
    out = tvm.runtime.tensor(np.zeros_like(X))
    lib(tvm.runtime.tensor(X), out)
    return out.numpy().astype("float64")


# the module docstring's bounds, over [-30, 30] against float64
@pytest.mark.parametrize("fn, exact, absolute, relative", [
    (tirx.exp, np.exp, None, 1.1e-6),
    (tirx.erf, np.vectorize(math.erf), 4.2e-7, None),
    (tirx.tanh, np.tanh, 3e-7, None),
    (tirx.sigmoid, lambda v: 1 / (1 + np.exp(-v)), 1e-7, None),
], ids=["exp", "erf", "tanh", "sigmoid"])
def test_the_polynomials_err_by_at_most_the_documented_bounds(fn, exact, absolute, relative):
    func = fast_math(_elementwise(fn))
    assert fn(tirx.Var("x", "float32")).op.name not in _calls(func)
    error = np.abs(_run(func) - exact(X.astype("float64")))
    if absolute is not None:
        assert error.max() <= absolute
    if relative is not None:
        assert (error / exact(X.astype("float64"))).max() <= relative


def test_libm_is_what_they_replace_and_each_call_gets_its_own_binding():
    """Two calls in one expression: each polynomial binds its own argument (a ``Let`` of a
    fresh variable), and the result is both functions'."""
    func = fast_math(_elementwise(lambda v: tirx.exp(v * tirx.const(0.5, "float32"))
                                  + tirx.tanh(v)))
    lets = []
    tvm_ffi.structural_walk(func, (tvm.ir.prim.expr.Let, lets.append))
    assert len(lets) == 2 and not lets[0].var.same_as(lets[1].var)
    want = np.exp(X.astype("float64") * 0.5) + np.tanh(X.astype("float64"))
    np.testing.assert_allclose(_run(func), want, rtol=2e-6, atol=1e-6)


def _softmax() -> tirx.PrimFunc:
    return legalized_kernel(relax.op.nn.softmax, (4, 64))


def test_a_cpu_build_takes_the_polynomials_and_a_gpu_keeps_its_own():
    func = _softmax()
    assert "tirx.exp" in _calls(func)
    assert "tirx.exp" not in _calls(scheduled(func, CPU))
    assert "tirx.exp" not in _calls(for_target(func, CPU))
    assert for_target(func, CUDA).same_as(func)


def test_a_candidate_metaschedule_measures_is_built_with_the_polynomials():
    """What ``tune-kernels`` times is what a build runs: its builder's candidates call no
    libm ``expf`` on a CPU."""
    from autoplace.deploy.candidate_build import build_candidate
    from autoplace.deploy.schedule import default_schedule

    func = default_schedule(_softmax(), CPU).with_attr("global_symbol", "main")
    mod = tvm.IRModule({"main": func})
    assert "expf" not in build_candidate(mod, CPU, None).inspect_source("asm")
    assert "expf" in tvm.tirx.build(mod, target=CPU).inspect_source("asm")
