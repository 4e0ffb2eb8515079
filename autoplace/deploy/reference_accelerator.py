"""The reference accelerator: a Relax BYOC code generator, ``relax.ext.autoplace_ref``, whose
runtime functions compute each offloaded region on the host and report its modelled time.

A vendor's accelerator docks onto TVM the same way (docs/offload.md): a unit of the profile
names its code generator (``codegen = "..."``); the build partitions the model by the
unit's pattern table where the placement put matches on it (:mod:`autoplace.deploy.offload`)
and ``RunCodegen`` hands each offloaded region (a Relax function with ``Codegen`` and
``global_symbol`` attributes, calling ``Composite`` functions) to ``relax.ext.<codegen>``.
What this one does with a region:

- compiles it for the host (its weights bound in it; its kernels fused and scheduled as
  the runtime's own), as a vendor's would for its device;
- registers a packed function under the region's ``global_symbol`` (the name the VM calls
  with ``call_dps_packed``: inputs, then the output to fill) that runs it;
- models the region's time as the unit's profile says (``options``: a launch overhead
  plus, per composite, its FLOPs at its pattern's rate) and records each call with it
  (:func:`calls`), as a real device's driver reports its cycle counts, and with the name
  of the thread that made it (the unit's worker, ``autoplace-<unit>``, when the runtime
  runs it).

So an offloaded module runs here and its outputs equal the unplaced model's; a vendor's
generator registered as ``relax.ext.<name>`` replaces this one by name.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import tvm
from tvm import relax
from tvm.s_tir.analysis import estimate_tir_flops

from autoplace.deploy.compiler import placed_pipeline
from autoplace.deploy.schedule import default_schedule
from autoplace.frontend.relax import fuse

#: the code generator's name (``codegen = "autoplace_ref"`` in a profile unit)
NAME = "autoplace_ref"

_lock = threading.Lock()
_calls: list[Call] = []
_keep: dict[str, object] = {}  # symbol -> its VM (kept alive while its function is registered)
_modelled: dict[str, float] = {}  # symbol -> modelled seconds per call


@dataclass(frozen=True)
class Call:
    """One call of an offloaded region: its symbol, modelled seconds, and the name of the
    thread that called it."""

    symbol: str
    modelled_s: float
    thread: str = ""


def calls() -> list[Call]:
    """Every call of an offloaded region since the last :func:`clear`, in order."""
    with _lock:
        return list(_calls)


def modelled_s(symbol: str) -> float | None:
    """The modelled seconds of a call of the region ``symbol`` (None: not built here)."""
    with _lock:
        return _modelled.get(symbol)


def clear() -> None:
    with _lock:
        _calls.clear()


def _flat(region: relax.Function) -> tvm.IRModule:
    """The region as a module whose ``main`` holds its ops (its composites inlined)."""
    main = region.without_attr("Codegen").with_attr("global_symbol", "main")
    mod = relax.transform.LambdaLift()(tvm.IRModule({"main": main}))
    return relax.transform.InlinePrivateFunctions()(mod)


def _composites(region: relax.Function) -> list[str]:
    """The pattern names of the ``Composite`` functions the region calls (``codegen.name``)."""
    found = []

    def visit(expr):
        if isinstance(expr, relax.Function) and expr.attrs is not None \
                and "Composite" in expr.attrs:
            found.append(str(expr.attrs["Composite"]).split(".", 1)[1])

    relax.analysis.post_order_visit(region.body, visit)
    return found


def modelled_seconds(region: relax.Function, options) -> float:
    """``launch_s`` plus the region's FLOPs at the rate of its (first) composite's pattern
    (``options["gflops"][pattern]``, else ``options["gflops"]["default"]``)."""
    legal = relax.transform.LegalizeOps()(_flat(region))
    flops = sum(float(estimate_tir_flops(tvm.IRModule({"main": f})))
                for _, f in legal.functions_items() if isinstance(f, tvm.tirx.PrimFunc))
    gflops = {str(k): float(v) for k, v in options.get("gflops", {}).items()}
    names = _composites(region)
    rate = next((gflops[n] for n in names if n in gflops), gflops.get("default", 0.0))
    return float(options.get("launch_s", 0.0)) + (flops / (rate * 1e9) if rate else 0.0)


def _compiled(region: relax.Function) -> tvm.runtime.Executable:
    """The region compiled for the host: fused as the frontend fuses a model, each kernel
    scheduled as the runtime's kernels are (:func:`autoplace.deploy.schedule.default_schedule`)."""
    target = tvm.target.Target({"kind": "llvm"})
    mod = fuse(_flat(region))
    for gv, func in mod.functions_items():
        if isinstance(func, tvm.tirx.PrimFunc):
            mod[gv] = default_schedule(func, target).with_attr("target", target)
    return tvm.compile(mod, target=target, relax_pipeline=placed_pipeline())


def _register(region: relax.Function, options) -> None:
    symbol = str(region.attrs["global_symbol"])
    vm = relax.VirtualMachine(_compiled(region), tvm.cpu())
    run, seconds = vm["main"], modelled_seconds(region, options)
    outs = len(region.ret_ty.fields) if isinstance(region.ret_ty, relax.TupleType) else 1

    def call(*args):  # destination passing: inputs..., then the outputs to fill
        got = run(*args[:-outs])
        for out, value in zip(args[-outs:], got if outs > 1 else [got]):
            out.copyfrom(value)
        with _lock:
            _calls.append(Call(symbol, seconds, threading.current_thread().name))

    with _lock:
        _keep[symbol], _modelled[symbol] = vm, seconds
    tvm.register_global_func(symbol, call, override=True)


@tvm.register_global_func(f"relax.ext.{NAME}", override=True)
def _codegen(functions, options, constant_names) -> list:
    """``RunCodegen``'s call: register every region; no module to link (the functions are
    global, so the VM finds them by name)."""
    for region in functions:
        _register(region, options or {})
    return []
