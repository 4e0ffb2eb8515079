"""A CPU kernel's exponentials, error functions and hyperbolic tangents as polynomials.

LLVM has no vector form of ``exp``, ``erf`` or ``tanh``: a vectorised loop that calls one
calls libm's ``expf``/``erff`` once per lane. A transformer calls them for every element
of every attention matrix (softmax) and of its widest activations (GELU): bert_base's
matmul + GELU onto 128 x 3072 took 11.7-18.3 ms on one core with libm's ``erf``, where the
matmul of as many flops beside it took 6.2-9.2, and 6.5-6.6 ms with the polynomial (each
kernel alone, beside a tuning job).
ONNX Runtime computes them with polynomials (MLAS); so does TVM's TOPI (``fast_exp``,
``fast_erf``, ``fast_tanh``, which TVM's ``FastMathTransform`` substitutes at the graph
level). :func:`fast_math` puts TOPI's polynomials, as TOPI writes them, in place of every
float32 call of a kernel: they vectorise. Their error, against float64 over [-30, 30], is at
most 1.1e-6 relative for ``exp`` and 4.2e-7, 3e-7 and 1e-7 absolute for ``erf``, ``tanh``
and ``sigmoid`` (``tests/deploy/test_fast_math.py``).

:func:`for_target` applies it to a kernel for a CPU (LLVM) target only: a GPU has these
functions in hardware. Every build takes a kernel's schedule through it
(:func:`~autoplace.deploy.kernel_db.scheduled`), and so does ``tune-kernels``' builder
with each candidate it measures (:func:`~autoplace.deploy.candidate_build.build_candidate`):
a kernel database holds and is looked up by the kernel as the model has it, its times are
those of what a build compiles. (Applied after the schedule: MetaSchedule's flop count of
what it tunes refuses a ``Let``.)
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import tvm
import tvm_ffi
from tvm import s_tir, te, tirx, topi

#: the TOPI function whose polynomial stands for each intrinsic (a tensor -> a tensor)
POLYNOMIALS: dict[str, Callable] = {
    "tirx.exp": topi.fast_exp,
    "tirx.erf": topi.fast_erf,
    "tirx.tanh": topi.fast_tanh,
    "tirx.sigmoid": lambda a: topi.divide(
        tirx.const(1.0, "float32"),
        topi.add(tirx.const(1.0, "float32"), topi.fast_exp(topi.negative(a)))),
}


def for_target(func: tirx.PrimFunc, target: tvm.target.Target) -> tirx.PrimFunc:
    """``func`` as a kernel for ``target`` is compiled: :func:`fast_math` on a CPU (an LLVM
    target), as it is elsewhere."""
    return fast_math(func) if target.kind.name == "llvm" else func


def fast_math(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with every float32 call of :data:`POLYNOMIALS` replaced by the polynomial,
    its argument bound once (a ``Let`` of a variable of its own), not written out wherever
    the polynomial reads it (18 to 21 times)."""

    def replace(call):
        name = getattr(call.op, "name", None)
        if name not in POLYNOMIALS or str(call.ty) != "float32":
            return call
        var, body = _polynomial(name)
        fresh = tirx.Var(var.name, "float32")
        body = tvm_ffi.structural_map(body, (tvm.ir.expr.Var,
                                             lambda v: fresh if v.same_as(var) else v))
        return tirx.Let(fresh, call.args[0], body)

    return tvm_ffi.structural_map(func, (tvm.ir.expr.Call, replace))


@cache
def _polynomial(name: str) -> tuple:
    """(x, the polynomial of ``name`` in x), taken from TOPI's elementwise kernel of it."""
    a = te.placeholder((1,), "float32", name="a")
    sch = s_tir.Schedule(te.create_prim_func([a, POLYNOMIALS[name](a)]))
    for block in sch.get_child_blocks(sch.get_sblock("root"))[:-1]:
        sch.compute_inline(block)
    value = sch.get(sch.get_child_blocks(sch.get_sblock("root"))[-1]).body.value
    x = tirx.Var("x", "float32")
    return x, tvm_ffi.structural_map(value, (tvm.ir.expr.TensorLoad, lambda _: x))
