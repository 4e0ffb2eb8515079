"""Conditions the innermost iterator cannot change, written without it
(autoplace.runtime.uniform_conditions)."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import s_tir, te, tirx

from autoplace.deploy.schedule import default_schedule
from autoplace.deploy.tir_facts import uses_var
from autoplace.hardware.load import load_profile
from autoplace.models import load_module
from autoplace.runtime.layout import runtime_program
from autoplace.runtime.uniform_conditions import without_uniform_iterators

HERE = tvm.target.Target({"kind": "llvm", "num-cores": 2,
                          "mcpu": tvm.target.codegen.llvm_get_system_cpu()})
ITE = tvm.ir.Op.get("prim.if_then_else")


def _picking(condition):
    """out[c, i] = a[c, i] where ``condition(c, i)`` else b[c, i], over 8 blocks of 16."""
    a, b = te.placeholder((8, 16), name="a"), te.placeholder((8, 16), name="b")
    out = te.compute((8, 16), lambda c, i: tirx.if_then_else(condition(c, i), a[c, i],
                                                             b[c, i]), name="out")
    return te.create_prim_func([a, b, out])


def _conditions(func):
    """(the condition of each if_then_else, the innermost iterator of its block)."""
    found = []

    def visit(block):
        if not block.iter_vars:  # (the root)
            return
        calls = []
        tvm_ffi.structural_walk(block.body, (tvm.ir.expr.Call, calls.append))
        found.extend((c.args[0], block.iter_vars[-1].var) for c in calls
                     if isinstance(c.op, tvm.ir.Op) and c.op.same_as(ITE))

    tvm_ffi.structural_walk(func.body, (s_tir.SBlock, visit))
    return found


@pytest.mark.parametrize("name, condition, rewritten", [
    ("blocks of the concatenation", lambda c, i: 64 <= c * 16 + i, True),
    ("blocks, both sides", lambda c, i: tirx.all(32 <= c * 16 + i, c * 16 + i < 96), True),
    ("a split inside a block", lambda c, i: c * 16 + i < 72, False),
    ("a padding", lambda c, i: tirx.all(1 <= i, i < 15), False),
    ("one channel", lambda c, i: i == 3, False),
    ("not linear", lambda c, i: i % 2 == 0, False),
])
def test_a_condition_is_rewritten_only_where_the_iterator_cannot_change_it(name, condition,
                                                                          rewritten):
    func = _picking(condition)
    ((cond, inner),) = _conditions(without_uniform_iterators(func))
    assert uses_var(cond, inner) != rewritten
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((8, 16)).astype("float32") for _ in range(2))
    outs = []
    for f in (func, without_uniform_iterators(func)):
        out = tvm.runtime.tensor(np.zeros((8, 16), "float32"))
        tvm.compile(tvm.IRModule({"main": f.with_attr("global_symbol", "main")}),
                    target=HERE)["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(b), out)
        outs.append(out.numpy())
    np.testing.assert_array_equal(outs[0], outs[1])


def test_a_concatenation_of_blocked_channels_is_vectorised_and_concatenates():
    """squeezenet's first concatenation as the runtime holds it (two NCHW16c tensors of 4
    blocks onto 8): its condition names the channel block alone, so the default schedule
    vectorises its nest over the block's channels; it concatenates."""
    mod, graph = load_module("squeezenet")
    func = runtime_program(mod, graph, load_profile("host")).funcs["concatenate"]
    ((cond, inner),) = _conditions(func)
    assert not uses_var(cond, inner)
    scheduled = default_schedule(func, HERE)
    loops = []
    tvm_ffi.structural_walk(scheduled.body, (tirx.For, loops.append))
    assert any(loop.kind == tirx.ForKind.VECTORIZED for loop in loops)
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((1, 4, 55, 55, 16)).astype("float32") for _ in range(2))
    out = tvm.runtime.tensor(np.zeros((1, 8, 55, 55, 16), "float32"))
    tvm.compile(tvm.IRModule({"main": scheduled.with_attr("global_symbol", "main")}),
                target=HERE)["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(b), out)
    np.testing.assert_array_equal(out.numpy(), np.concatenate([a, b], axis=1))
