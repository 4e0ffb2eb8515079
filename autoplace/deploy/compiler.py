"""Compile a placed module into a Relax VM executable that knows how to run itself.

TVM's default Relax build pipeline runs ``StaticPlanBlockMemory``, which in TVM 0.27
reuses a storage block allocated on one VDevice for a tensor on another: placed modules
then fail at run time with ``Mismatched ... device_id`` (tests/deploy/test_build.py keeps a
case that shows it). :func:`placed_pipeline` is that pipeline without the planner; tensors are
allocated through the VM's pooled allocator instead.
"""

from __future__ import annotations

import json

import tvm
from tvm import relax

from autoplace.deploy.targets import BuildError

#: Name of the Relax function every built module carries: its metadata, as JSON.
META_FUNC = "autoplace_meta"
#: 2: ``load`` (a function to run once at load, its result ``main``'s last argument)
META_VERSION = 2


def placed_pipeline(*, plan_memory: bool = False) -> tvm.transform.Pass:
    """The Relax default build pipeline, with ``StaticPlanBlockMemory`` only if asked.

    ``RewriteDataflowReshape`` is left out too: on a reshape whose result feeds a
    ``to_vdevice`` it renames the result and leaves the copy reading an undefined variable
    (``Var lv333 is not defined`` in VM codegen, inception_v1). Reshape kernels then run as
    the copy kernels they are in the op graph, which is also what the simulator charges.
    """
    from tvm.relax import backend, transform

    passes = [backend.DispatchSampling(), backend.DispatchSortScan(), transform.LegalizeOps(),
              transform.ToNonDataflow(),
              transform.RemovePurityChecking(), transform.CallTIRRewrite()]
    if plan_memory:
        passes.append(transform.StaticPlanBlockMemory())
    passes += [transform.LowerAllocTensor(), transform.KillAfterLastUse(),
               transform.LowerRuntimeBuiltin(), transform.ComputePrimValue(),
               transform.VMShapeLower(), transform.AttachGlobalSymbol()]
    return tvm.transform.Sequential(passes, name="autoplace_placed_pipeline")


def _attr_json(func: relax.Function, key: str, default):
    attrs = func.attrs
    if attrs is None or key not in attrs:
        return default
    return json.loads(str(attrs[key]))


def _inputs(func: relax.Function, load: str | None) -> list[dict]:
    """The graph inputs: ``main``'s parameters, but for the last if ``load`` fills it."""
    out = []
    for p in list(func.params)[:-1] if load else func.params:
        ty = p.ty
        if not isinstance(ty, relax.TensorType) or ty.shape is None:
            raise BuildError(f"main parameter {p.name!r} is not a tensor of known shape")
        out.append({"name": p.name, "shape": [int(d) for d in ty.shape.values],
                    "dtype": str(ty.dtype)})
    return out


def metadata(mod: tvm.IRModule) -> dict:
    """What a runner needs: the inputs, the VM devices, the function to run once at load
    (``load``: its result is ``main``'s last argument, or None), the placement's records."""
    main = mod["main"]
    vdevices = _attr_json(main, "autoplace.vdevices", [{"device": [1, 0], "scope": "",
                                                        "units": []}])
    load = _attr_json(main, "autoplace.load", None)
    return {"version": META_VERSION, "inputs": _inputs(main, load), "load": load,
            "devices": [v["device"] for v in vdevices], "vdevices": vdevices,
            "copies": _attr_json(main, "autoplace.copies", []),
            "placement": _attr_json(main, "autoplace.placement", None),
            "graph": _attr_json(main, "autoplace.graph", None),
            "profile": _attr_json(main, "autoplace.profile", None)}


def with_metadata(mod: tvm.IRModule, extra: dict | None = None) -> tvm.IRModule:
    """``mod`` plus a Relax function :data:`META_FUNC` returning its metadata as JSON."""
    return attach_meta(mod, {**metadata(mod), **(extra or {})})


def attach_meta(mod: tvm.IRModule, meta: dict) -> tvm.IRModule:
    """``mod`` plus a Relax function :data:`META_FUNC` returning ``meta`` as JSON."""
    bb = relax.BlockBuilder()
    with bb.function(META_FUNC, []):
        bb.emit_func_output(tvm.ir.expr.StringImm(json.dumps(meta, sort_keys=True)))
    out = mod.clone()
    out[META_FUNC] = bb.finalize()[META_FUNC]
    return out


def compile_placed(placed: tvm.IRModule, *, plan_memory: bool = False,
                   extra_meta: dict | None = None) -> tvm.runtime.Executable:
    """Compile the output of :func:`autoplace.deploy.apply` (each kernel for its target)."""
    mod = with_metadata(placed, extra_meta)
    return tvm.compile(mod, target=None, relax_pipeline=placed_pipeline(plan_memory=plan_memory))


def compile_unplaced(mod: tvm.IRModule, target: tvm.target.Target | None = None, *,
                     extra_meta: dict | None = None) -> tvm.runtime.Executable:
    """Compile ``mod`` unplaced, everything on ``target`` (default llvm), TVM's own pipeline."""
    target = target or tvm.target.Target({"kind": "llvm"})
    return tvm.compile(with_metadata(mod, extra_meta), target=target)
