"""Offloaded regions in the runtime: a placement's BYOC build runs region by region, each
region one piece of work on its unit's worker, beside the other units' kernels (observed
with a meeting region, not timed), and computes what the unplaced model computes."""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest
import tvm
from runtime_factories import BARRIER, arm, inputs_of
from tvm import relax, te

from autoplace.deploy import reference_accelerator
from autoplace.deploy.targets import BuildError
from autoplace.frontend.relax import from_relax
from autoplace.hardware.load import load_profile
from autoplace.models import import_model, load_module
from autoplace.runtime import PoolError, RunError, Runtime
from autoplace.space import Placement, SearchSpace

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def npu_profile(codegen: str = reference_accelerator.NAME):
    """The bundled npu profile, its npu built by ``codegen``."""
    p = load_profile("npu")
    npu = dataclasses.replace(p.unit("npu"), codegen=codegen)
    return dataclasses.replace(p, units=tuple(npu if u.name == "npu" else u for u in p.units))


def mixed_placement(graph, profile, space, rng) -> Placement:
    """About 60% of the npu's matches on it, each op in DRAM or the npu's SRAM (half of
    those in the SRAM with their weights resident there); every copy in a mode of its
    route, at random."""
    patterns, ops = profile.unit("npu").patterns, {op.name: ("cpu", "dram") for op in graph.ops}
    for m in graph.matches:
        if m.pattern in patterns and rng.random() < 0.6 and \
                all(ops[graph.ops[i].name][0] == "cpu" for i in m.ops):
            for i in m.ops:
                ops[graph.ops[i].name] = ("npu", "sram" if rng.random() < 0.5 else "dram")
    copies = {}
    for k, e in enumerate(graph.edges):
        a, b = ops[graph.ops[e.src].name][1], ops[graph.ops[e.dst].name][1]
        if a != b:
            copies[space.edge_names[k]] = str(rng.choice(space.modes_between(a, b)))
    resident = {op.name: "resident" for op in graph.ops
                if ops[op.name][1] == "sram" and op.weight_bytes and rng.random() < 0.5}
    return Placement(ops=ops, copies=copies, weights=resident)


def unplaced(mod, x) -> list[np.ndarray]:
    out = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())["main"](*x)
    return [out.numpy()] if hasattr(out, "numpy") else [o.numpy() for o in out]


# squeezenet's main hands its weights to the regions (bound to variables), bert_tiny's
# regions hold theirs
@pytest.mark.parametrize(("name", "weights_read"), [("bert_tiny", False), ("squeezenet", True)])
def test_regions_run_on_the_npu_worker_and_compute_the_unplaced_outputs(name, weights_read,
                                                                        kernel_cache):
    mod, graph = load_module(name)
    profile, rng = npu_profile(), np.random.default_rng(3)
    space = SearchSpace(graph, profile)
    with Runtime(mod, graph, profile, cache_dir=kernel_cache, space=space,
                 source=import_model(name)) as rt:
        x, runs = inputs_of(rt.program), 0
        want = unplaced(mod, x)
        while runs < 2:
            placement = mixed_placement(graph, profile, space, rng)
            assert space.check(placement) is None
            try:
                a = rt.assemble(placement)
            except PoolError:  # (too much in the SRAM for the runtime's pools)
                continue
            regions, runs = rt.regions(placement), runs + 1
            on_npu = {i for i, op in enumerate(graph.ops) if placement.ops[op.name][0] == "npu"}
            assert {i for c in regions for i in c.ops} == on_npu
            assert any(v[0] == "weight" for c in regions for v in c.args) == weights_read
            work = a.schedule.work
            assert sorted(w.ops for w in work if w.kind == "region") == \
                sorted(c.ops for c in regions)
            assert not any(w.kind == "op" and w.resource == "npu" for w in work)
            reference_accelerator.clear()
            for got, expected in zip(rt.run(a, x), want, strict=True):
                np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
            calls = reference_accelerator.calls()
            assert [c.symbol for c in calls if c.symbol in {r.symbol for r in regions}] and \
                len(calls) == len(regions)
            assert {c.thread for c in calls} == {"autoplace-npu"}


MEETING_NPU = "autoplace_test_meeting_npu"


@tvm.register_global_func(f"relax.ext.{MEETING_NPU}", override=True)
def _meeting_npu(functions, options, constant_names):
    """A vendor's code generator (as docs/offload.md shows one): the reference
    accelerator's regions, each waiting at the test's barrier before it computes."""
    tvm.get_global_func(f"relax.ext.{reference_accelerator.NAME}")(
        functions, options, constant_names)
    for region in functions:
        symbol = str(region.attrs["global_symbol"])
        inner = tvm.get_global_func(symbol)

        def call(*args, inner=inner):
            BARRIER["now"].wait()
            inner(*args)

        tvm.register_global_func(symbol, call, override=True)
    return []


MET: list[str] = []


@tvm.register_global_func("autoplace_test.meet_and_say", override=True)
def _meet_and_say(x, y) -> None:
    MET.append(threading.current_thread().name)
    BARRIER["now"].wait()
    y.copyfrom(x)


def _meeting(t):
    return te.extern(t.shape, [t], lambda ins, outs: tvm.tirx.call_packed(
        "autoplace_test.meet_and_say", ins[0], outs[0]), name="meet", dtype="float32")


W, B = np.random.default_rng(0).random((8, 8)).astype("float32"), np.ones(8, "float32")


def dense_beside_meeting():
    """x @ W + B (a matmul_bias an npu runs) and, on x too, a kernel that meets."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((4, 8), "float32"))
    w, b = relax.const(W), relax.const(B)
    with bb.function("main", [x]):
        with bb.dataflow():
            dense = bb.emit(relax.op.add(bb.emit(relax.op.matmul(x, w)), b))
            met = bb.emit_te(_meeting, x, primfunc_name_hint="meet")
            out = bb.emit_output(relax.Tuple([dense, met]))
        bb.emit_func_output(out)
    return bb.finalize()


def test_a_region_is_in_flight_on_the_npu_worker_while_the_cpu_runs_a_kernel(kernel_cache,
                                                                                loop):
    source = dense_beside_meeting()
    mod, graph = from_relax(source, "dense_meet")
    assert [m.pattern for m in graph.matches if m.pattern == "matmul_bias"]
    profile = npu_profile(MEETING_NPU)
    space = SearchSpace(graph, profile)
    dense = next(m for m in graph.matches if m.pattern == "matmul_bias").ops
    with Runtime(mod, graph, profile, cache_dir=kernel_cache, space=space, native=loop,
                 source=source) as rt:
        x = inputs_of(rt.program)
        apart = rt.assemble(Placement(ops={op.name: ("npu" if i in dense else "cpu", "dram")
                                           for i, op in enumerate(graph.ops)}, copies={}))
        arm()
        MET.clear()
        reference_accelerator.clear()
        got = rt.run(apart, x, timeout=60)
        np.testing.assert_allclose(got[1], x[0])
        np.testing.assert_allclose(got[0], x[0] @ W + B, rtol=1e-5, atol=1e-6)
        assert MET == ["autoplace-cpu"]
        assert [c.thread for c in reference_accelerator.calls()] == ["autoplace-npu"]
        together = rt.assemble(Placement(ops={op.name: ("cpu", "dram") for op in graph.ops},
                                         copies={}))
        arm(timeout=0.5)
        with pytest.raises(RunError, match="op meet"):  # no region: the kernel meets nobody
            rt.run(together, x, timeout=60)


def test_a_code_generator_not_registered_is_a_one_line_error_naming_the_key(kernel_cache):
    mod, graph = load_module("bert_tiny")
    with pytest.raises(BuildError) as info:
        Runtime(mod, graph, npu_profile("no_such_npu"), cache_dir=kernel_cache,
                source=import_model("bert_tiny"))
    assert "units.npu.codegen: no code generator relax.ext.no_such_npu" in str(info.value)
    assert "\n" not in str(info.value)


MODULE_NPU = "autoplace_test_module_npu"


@tvm.register_global_func(f"relax.ext.{MODULE_NPU}", override=True)
def _module_npu(functions, options, constant_names):
    """A vendor's code generator that returns modules: each exports the region's symbol, a
    kernel that does not compute the region (0.5 * the row sum of x, + 1) so that the test
    sees whose function ran."""
    return [tvm.compile(_half_row_sum().with_attr("global_symbol",
                                                  str(region.attrs["global_symbol"])),
                        target={"kind": "llvm"}).mod for region in functions]


def _half_row_sum() -> tvm.tirx.PrimFunc:
    x = te.placeholder((4, 8), "float32", name="x")
    k = te.reduce_axis((0, 8), name="k")
    total = te.compute((4,), lambda i: te.sum(x[i, k], axis=k), name="total")
    y = te.compute((4, 8), lambda i, j: total[i] * 0.5 + 1.0, name="y")
    return te.create_prim_func([x, y])


def test_a_region_runs_the_function_a_module_of_its_code_generator_exports(kernel_cache):
    source = dense_beside_meeting()
    mod, graph = from_relax(source, "dense_meet")
    dense = next(m for m in graph.matches if m.pattern == "matmul_bias").ops
    with Runtime(mod, graph, npu_profile(MODULE_NPU), cache_dir=kernel_cache,
                 source=source) as rt:
        x = inputs_of(rt.program)
        placement = Placement(ops={op.name: ("npu" if i in dense else "cpu", "dram")
                                   for i, op in enumerate(graph.ops)}, copies={})
        a = rt.assemble(placement)
        arm(parties=1)  # (the meeting kernel meets nobody)
        got = rt.run(a, x, timeout=60)
    np.testing.assert_allclose(got[0], np.repeat(x[0].sum(1, keepdims=True) * 0.5 + 1, 8, 1),
                               rtol=1e-5)
