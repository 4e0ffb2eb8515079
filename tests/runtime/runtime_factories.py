"""Modules and profiles that make concurrency observable, models with telling weights.

A *meeting* kernel calls back into Python (``T.call_packed``) and waits at a barrier for a
second party before it copies its input to its output: it can only finish if the other
party (another kernel, or a copy) is in flight at the same time. A runtime that serialises
what the schedule overlaps breaks the barrier, and the run fails.
"""

from __future__ import annotations

import threading

import numpy as np
import tvm
from tvm import relax, te

from autoplace.frontend.relax import op_graph
from autoplace.hardware.load import profile_from_toml

MEET = "autoplace_test.meet"
BARRIER: dict[str, threading.Barrier] = {}


@tvm.register_global_func(MEET, override=True)
def _meet(x, y) -> None:
    BARRIER["now"].wait()
    y.copyfrom(x)


def arm(parties: int = 2, timeout: float = 10.0) -> threading.Barrier:
    """A fresh barrier for the meeting kernels (and copies) of the next run."""
    BARRIER["now"] = threading.Barrier(parties, timeout=timeout)
    return BARRIER["now"]


def meeting_copy(src, dst) -> None:
    """A copy engine's copy that meets a kernel before it copies."""
    BARRIER["now"].wait()
    dst.copyfrom(src)


def _meeting(x):
    return te.extern(x.shape, [x], lambda ins, outs: tvm.tirx.call_packed(MEET, ins[0], outs[0]),
                     name="meet", dtype="float32")


def _plus_one(x):
    return te.compute(x.shape, lambda i: x[i] + 1.0, name="plus_one")


def _add(a, b):
    return te.compute(a.shape, lambda i: a[i] + b[i], name="add")


def meeting_module(ops: list[tuple[str, int | None]], n: int = 64):
    """A module of ``ops`` (``("meet", arg)``, ``("plus_one", arg)``, ``("add", (a, b))``:
    arg is the index of an earlier op, None for the input), returning every op's output
    that nothing reads; and its op graph."""
    fns = {"meet": _meeting, "plus_one": _plus_one, "add": _add}
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((n,), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            outs, read = [], set()
            for kind, arg in ops:
                args = arg if isinstance(arg, tuple) else (arg,)
                read.update(a for a in args if a is not None)
                vals = [x if a is None else outs[a] for a in args]
                outs.append(bb.emit_te(fns[kind], *vals, primfunc_name_hint=kind))
            last = [v for i, v in enumerate(outs) if i not in read]
            out = bb.emit_output(relax.Tuple(last) if len(last) > 1 else last[0])
        bb.emit_func_output(out)
    mod = bb.finalize()
    return mod, op_graph(mod, "meeting")


def two_unit_profile(*, sram: bool = False, modes: str = '["sync", "async"]',
                     u1_cpus: tuple[int, ...] = ()):
    """u0 (host) and u1, one core each, a shared DRAM; with ``sram``, an SRAM only u1 sees
    and copies between them (``modes``) on the engine dma0; u1 pinned to ``u1_cpus``."""
    text = ("" if sram else "copies = []\n") + """
name = "two"
host = "u0"
default_scope = "dram"
[units.u0]
target = { kind = "llvm", num-cores = 1 }
accepts = ["*"]
[units.u0.gflops]
default = 1.0
[units.u1]
target = { kind = "llvm", num-cores = 1 }
accepts = ["*"]
""" + (f"cpus = {list(u1_cpus)}\n" if u1_cpus else "") + """[units.u1.gflops]
default = 1.0
[scopes.dram]
capacity_mib = 64
bandwidth_gbps = 10
access = ["*"]
"""
    if sram:
        text += f"""
[scopes.sram]
capacity_mib = 1
bandwidth_gbps = 50
access = ["u1"]
[[copies]]
src = "dram"
dst = "sram"
bandwidth_gbps = 5
latency_us = 1
modes = {modes}
dma = "dma0"
bidirectional = true
"""
    return profile_from_toml(text, "two.toml")


def inputs_of(program, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.random(s.shape).astype(s.dtype) for s in program.inputs]


@relax.expr_functor.mutator
class _Reweigh(relax.PyExprMutator):
    """Replaces every constant by seeded random values of its shape (one per constant)."""

    def __init__(self, mod, seed: int):
        super().__init__(mod)
        self.rng, self.seen = np.random.default_rng(seed), {}

    def visit_generic_const_(self, const):
        key = hash(const)
        if key not in self.seen:
            shape, dtype = const.value.shape, const.value.dtype
            if len(shape) >= 2:  # He-scaled, so that deep ReLU networks stay finite
                fan_in = int(np.prod(shape[1:])) or 1
                value = self.rng.normal(0.0, np.sqrt(2.0 / fan_in), shape)
            else:  # biases, scales, means, variances: positive and near 1
                value = self.rng.uniform(0.5, 1.0, shape)
            self.seen[key] = relax.const(value.astype(dtype), dtype)
        return self.seen[key]


def randomized(mod, seed: int = 0):
    """``mod`` with random weights: the bundled models' weights are all 0.02, which makes
    every output the same whatever the wiring; random ones make outputs tell."""
    main = mod["main"]
    out = mod.clone()
    out["main"] = relax.Function(main.params, _Reweigh(mod, seed).visit_expr(main.body),
                                 main.ret_ty, main.is_pure, main.attrs)
    return out


def unplaced_outputs(mod, inputs) -> list[np.ndarray]:
    """What TVM's default build of ``mod`` computes: the reference every placement meets."""
    from autoplace.deploy import compile_unplaced
    from autoplace.deploy.run import to_numpy

    vm = relax.VirtualMachine(compile_unplaced(mod), tvm.cpu())
    return to_numpy(vm["main"](*[tvm.runtime.tensor(x) for x in inputs]))
