"""Placement -> a Relax module with one VDevice per (target, scope) and ``to_vdevice`` copies.

Mapping (docs/build.md has the whole story):

- every scope in use gets a device index: the default scope 0 (graph inputs and weights
  live there), the others in profile order; a VDevice is a unit's target on a scope's
  device, so a kernel's inputs must be on its scope's device, as on a real chip;
- an argument on another device gets a ``to_vdevice`` copy named after its mode
  (``copy_sync``, ``copy_async``; ``stage`` for graph inputs and streamed weights staged
  out of the default scope on every run; ``device`` for a change of device type within one
  scope);
- a weight of an op whose placement keeps it ``resident`` is copied to the op's VDevice
  once, by the function :data:`LOAD_FUNC` the loader runs when it loads the library; its
  result (a map: key -> weight on its VDevice) is ``main``'s last parameter;
- ``main`` carries the whole mapping as JSON attributes (``autoplace.vdevices``,
  ``autoplace.copies``, ``autoplace.placement``, ``autoplace.load``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import tvm
from tvm import relax

from autoplace.deploy.kernel_db import KernelDatabase, scheduled
from autoplace.deploy.prepack import mark_weights
from autoplace.deploy.targets import BuildError, target_key, unit_target
from autoplace.graph import OpGraph
from autoplace.hardware.profile import Profile
from autoplace.space import Placement, SearchSpace

CALL_TIR = tvm.ir.Op.get("relax.call_tir")

#: The function that places resident weights; the loader runs it once (docs/build.md).
LOAD_FUNC = "place_weights"


@dataclass
class DevicePlan:
    """VDevices of a placement and the one each op runs on."""

    vdevices: list = field(default_factory=list)  # relax.VDevice, index = VM device index
    info: list[dict] = field(default_factory=list)  # per vdevice: units, scope, target, device
    op_vdevice: list[int] = field(default_factory=list)  # per op: vdevice index
    op_target: list[str] = field(default_factory=list)  # per op: target key


def _scope_ids(placement: Placement, profile: Profile) -> dict[str, int]:
    used = {s for _, s in placement.ops.values()}
    order = [profile.default_scope] + [s.name for s in profile.scopes
                                       if s.name in used and s.name != profile.default_scope]
    return {s: i for i, s in enumerate(order)}


def plan_devices(graph: OpGraph, placement: Placement, profile: Profile,
                 memory_scopes: str = "global") -> DevicePlan:
    """One VDevice per distinct (unit target, scope), index 0 = (host, default scope)."""
    if memory_scopes not in ("global", "profile"):
        raise BuildError(f"memory_scopes must be 'global' or 'profile', got {memory_scopes!r}")
    ids = _scope_ids(placement, profile)
    targets = {u: unit_target(profile.unit(u), profile)
               for u in sorted(placement.units_used() | {profile.host})}
    plan, index = DevicePlan(), {}

    def vdevice(unit: str, scope: str) -> int:
        key = (target_key(targets[unit]), scope)
        if key not in index:
            index[key] = len(plan.vdevices)
            mem = "global" if memory_scopes == "global" else scope
            plan.vdevices.append(relax.VDevice(targets[unit], ids[scope], mem))
            plan.info.append({"units": [], "scope": scope, "memory_scope": mem,
                              "target": json.loads(key[0]),
                              "device": [int(targets[unit].get_target_device_type()),
                                         ids[scope]]})
        return index[key]

    vdevice(profile.host, profile.default_scope)  # graph inputs and weights
    for op in graph.ops:
        unit, scope = placement.ops[op.name]
        k = vdevice(unit, scope)
        if unit not in plan.info[k]["units"]:
            plan.info[k]["units"].append(unit)
        plan.op_vdevice.append(k)
        plan.op_target.append(target_key(targets[unit]))
    return plan


def _device(vd) -> tuple[int, int]:
    return int(vd.target.get_target_device_type()), int(vd.vdevice_id)


def _typed(ty, vd):
    """``ty`` (a tensor or tuple of tensors type) on VDevice ``vd``; tuples as a list."""
    if isinstance(ty, relax.TupleType):
        return [relax.TensorType(t.shape, t.dtype, vdevice=vd) for t in ty.fields]
    return relax.TensorType(ty.shape, ty.dtype, vdevice=vd)


def _constant_params(func: relax.Function) -> dict[str, frozenset[int]]:
    """PrimFunc name -> the positions of its parameters given a constant (a weight) at
    every ``call_tir`` of it in ``func``."""
    seen: dict[str, frozenset[int]] = {}
    for block in func.body.blocks:
        for b in block.bindings:
            v = b.value
            if isinstance(v, relax.Call) and v.op.same_as(CALL_TIR):
                here = frozenset(i for i, a in enumerate(v.args[1].fields)
                                 if isinstance(a, tvm.ir.expr.Constant))
                name = v.args[0].name_hint
                seen[name] = seen[name] & here if name in seen else here
    return seen


def _producers(func: relax.Function) -> dict:
    """Original Var -> index of the op (call_tir, program order) whose output it is."""
    out, k = {}, 0
    for block in func.body.blocks:
        for b in block.bindings:
            v = b.value
            if isinstance(v, relax.Call) and v.op.same_as(CALL_TIR):
                out[b.var], k = k, k + 1
            elif isinstance(v, relax.TupleGetItem) and v.tuple_value in out:
                out[b.var] = out[v.tuple_value]
            elif isinstance(v, relax.Var) and v in out:
                out[b.var] = out[v]
    return out


@relax.expr_functor.mutator
class _KernelPlacer(relax.PyExprMutator):
    """Rewrites each ``call_tir`` onto its op's VDevice, copying arguments that live elsewhere."""

    def __init__(self, mod, graph: OpGraph, placement: Placement, plan: DevicePlan,
                 producers: dict, kernels: KernelDatabase | None = None):
        super().__init__(mod)
        self.kernels = kernels
        self.mod_, self.graph, self.placement, self.plan = mod, graph, placement, plan
        self.producers = producers
        self.constants = _constant_params(mod["main"])
        self.k = 0  # index of the next call_tir (op)
        self.funcs: dict[tuple[str, str], object] = {}  # (PrimFunc, target key) -> GlobalVar
        self.copies: list[dict] = []
        self.cache: dict = {}  # (original argument, consumer op) -> copied Var
        self.weights = relax.Var("resident_weights", relax.ObjectType())  # main's last param
        self.resident: list[tuple] = []  # (constant, VDevice), index = key in the weights map
        self.resident_vars: dict = {}  # (constant, vdevice index) -> Var in main
        self.error: BuildError | None = None  # TVM's FFI turns exceptions into RuntimeError

    def visit_call_(self, call: relax.Call) -> relax.Expr:
        new = self.visit_expr_post_order(call)
        if not new.op.same_as(CALL_TIR):
            return new
        k = self._next_op(new.args[0].name_hint)
        vd = self.plan.vdevices[self.plan.op_vdevice[k]]
        args = [self._arg(o, n, k) for o, n in zip(call.args[1].fields, new.args[1].fields)]
        extra = {"tir_vars": new.args[2]} if len(new.args) > 2 else {}
        return relax.call_tir(self._func(new.args[0], k, vd), relax.Tuple(args),
                              _typed(call.ty, vd), **extra)

    def _next_op(self, func: str) -> int:
        k, ops = self.k, self.graph.ops
        if k >= len(ops) or (ops[k].func and ops[k].func != func):
            want = ops[k].func if k < len(ops) else "nothing"
            self.error = BuildError(f"module does not match graph {self.graph.name!r}: kernel "
                                    f"{k} calls {func!r}, the graph expects {want!r}")
            raise self.error
        self.k += 1
        return k

    def _func(self, gv, k: int, vd) -> object:
        """The PrimFunc ``gv`` with the target of op ``k`` (one clone per target), its
        weights marked as the runtime's libraries mark them, scheduled for it as every
        build schedules it (:func:`autoplace.deploy.kernel_db.scheduled`: the kernel
        database's best record, else the default schedule). This module does not split
        the weights' packing off: it runs on every call."""
        key = (gv.name_hint, self.plan.op_target[k])
        if key not in self.funcs:
            n = sum(1 for f, _ in self.funcs if f == gv.name_hint)
            pf = mark_weights(self.mod_[gv], self.constants.get(gv.name_hint, ()))
            pf = scheduled(pf, vd.target, self.kernels).with_attr("target", vd.target)
            self.funcs[key] = self.builder_.add_func(pf, f"{gv.name_hint}_t{n}")
        return self.funcs[key]

    def _arg(self, orig, new, k: int):
        """``new`` as seen from op ``k``: itself, or a ``to_vdevice`` copy onto k's device."""
        plan, dst = self.plan, self.plan.op_vdevice[k]
        src_op = self.producers.get(orig)
        src = 0 if src_op is None else plan.op_vdevice[src_op]
        if _device(plan.vdevices[src]) == _device(plan.vdevices[dst]):
            return new
        if src_op is None and self._is_resident(orig, k):
            return self._resident_weight(orig, k)
        if (orig, k) not in self.cache:
            edge, mode = self._copy_mode(src_op, k, orig)
            var = self.builder_.emit(relax.op.to_vdevice(new, plan.vdevices[dst]), f"copy_{mode}")
            self.copies.append({"var": var.name, "edge": edge, "mode": mode,
                                "src": plan.info[src]["scope"], "dst": plan.info[dst]["scope"],
                                "src_vdevice": src, "dst_vdevice": dst})
            self.cache[orig, k] = var
        return self.cache[orig, k]

    def _is_resident(self, orig, k: int) -> bool:
        """Whether ``orig`` is a weight (a constant) op ``k`` keeps resident in its scope."""
        op = self.graph.ops[k].name
        return (isinstance(orig, tvm.ir.expr.Constant)
                and self.placement.weights.get(op) == "resident")

    def _resident_weight(self, const, k: int):
        """The weight ``const`` on op ``k``'s VDevice, placed there at load time: an item of
        ``main``'s weights map (no copy in ``main``; :func:`place_weights_func` copies it)."""
        dst = self.plan.op_vdevice[k]
        if (const, dst) not in self.resident_vars:
            key, vd = len(self.resident), self.plan.vdevices[dst]
            self.resident.append((const, vd))
            item = relax.call_pure_packed("ffi.MapGetItem", self.weights, _key(key),
                                          ty_args=[_typed(const.ty, vd)])
            var = self.builder_.emit(item, "weight_resident")
            self.copies.append({"var": var.name, "edge": f"constant->{self.graph.ops[k].name}",
                                "mode": "resident", "key": key, "func": LOAD_FUNC,
                                "src": self.plan.info[0]["scope"],
                                "dst": self.plan.info[dst]["scope"],
                                "src_vdevice": 0, "dst_vdevice": dst})
            self.resident_vars[const, dst] = var
        return self.resident_vars[const, dst]

    def _copy_mode(self, src_op: int | None, k: int, orig) -> tuple[str, str]:
        ops, placement = self.graph.ops, self.placement
        if src_op is None:
            what = orig.name if isinstance(orig, relax.Var) else "constant"
            return f"{what}->{ops[k].name}", "stage"
        edge = f"{ops[src_op].name}->{ops[k].name}"
        if placement.ops[ops[src_op].name][1] == placement.ops[ops[k].name][1]:
            return edge, "device"
        return edge, placement.copies[edge]


def _key(i: int) -> relax.Expr:
    return relax.prim_value(tvm.tirx.IntImm("int64", i))


def place_weights_func(resident: list[tuple]) -> relax.Function:
    """:data:`LOAD_FUNC`: each (constant, VDevice) copied to its VDevice, as a map from its
    key (index in ``resident``) to the copy; run once when the library is loaded."""
    bb = relax.BlockBuilder()
    with bb.function(LOAD_FUNC, []):
        items = []
        for i, (const, vd) in enumerate(resident):
            items += [_key(i), bb.emit(relax.op.to_vdevice(const, vd), "copy_resident")]
        out = bb.emit(relax.call_pure_packed("ffi.Map", *items, ty_args=[relax.ObjectType()]))
        bb.emit_func_output(out)
    return bb.finalize()[LOAD_FUNC]


def check_placement(graph: OpGraph, placement: Placement, profile: Profile) -> None:
    """Raise :class:`BuildError` if ``placement`` does not fit ``graph`` and ``profile``."""
    problem = SearchSpace(graph, profile).check(placement)
    if problem:
        raise BuildError(f"cannot build: {problem.detail} (graph {graph.name}, profile "
                         f"{profile.name})")


def _placed_main(func: relax.Function, placer: _KernelPlacer, vd0) -> relax.Function:
    params = []
    for p in func.params:
        if not isinstance(p.ty, relax.TensorType):
            raise BuildError(f"main parameter {p.name!r} is not a tensor: {p.ty}")
        params.append(relax.Var(p.name, _typed(p.ty, vd0)))
        placer.set_var_remap(p, params[-1])
    try:
        body = placer.visit_expr(func.body)
    except Exception:
        if placer.error is not None:
            raise placer.error from None
        raise
    if placer.resident:  # the weights LOAD_FUNC placed, as main's last parameter
        params.append(placer.weights)
    return relax.Function(params, body, None, func.is_pure, func.attrs)


def apply(mod: tvm.IRModule, placement: Placement, profile: Profile, *,
          graph: OpGraph | None = None, memory_scopes: str = "global",
          kernels: KernelDatabase | None = None) -> tvm.IRModule:
    """``mod`` (the fused module the op graph was made from) placed as ``placement`` says.

    Returns the module after RealizeVDevice: kernels on VDevices, ``to_vdevice`` copies,
    JSON attributes on ``main`` recording VDevices, copies and the placement, and, if some
    weights are resident out of the default scope, :data:`LOAD_FUNC` placing them. With
    ``memory_scopes="global"`` (the default) every VDevice has memory scope ``"global"`` so
    the module runs on a CPU; ``"profile"`` uses the profile's scope names (docs/build.md).
    Each kernel is scheduled by ``kernels`` (a MetaSchedule database) where it has a record
    for the kernel's target, else by the default schedule.
    """
    if graph is None:
        from autoplace.frontend.relax import op_graph

        graph = op_graph(mod, "module")
    check_placement(graph, placement, profile)
    plan = plan_devices(graph, placement, profile, memory_scopes)
    func = mod["main"]
    placer = _KernelPlacer(mod, graph, placement, plan, _producers(func), kernels)
    main = _placed_main(func, placer, plan.vdevices[0])
    if placer.k != len(graph.ops):
        raise BuildError(f"module does not match graph {graph.name!r}: {placer.k} kernels, "
                         f"the graph has {len(graph.ops)} ops")
    attrs = _main_attrs(placer, graph, placement, profile)
    for key, value in attrs.items():
        main = main.with_attr(key, json.dumps(value, sort_keys=True))
    return _placed_module(placer, main)


def _main_attrs(placer: _KernelPlacer, graph: OpGraph, placement: Placement,
                profile: Profile) -> dict:
    """``main``'s JSON attributes: the mapping, and the load function if there is one."""
    attrs = {"autoplace.vdevices": placer.plan.info, "autoplace.copies": placer.copies,
             "autoplace.placement": placement.to_dict(),
             "autoplace.graph": {"name": graph.name, "fingerprint": graph.fingerprint},
             "autoplace.profile": {"name": profile.name, "hash": profile.hash}}
    if placer.resident:
        attrs["autoplace.load"] = LOAD_FUNC
    return attrs


def _placed_module(placer: _KernelPlacer, main: relax.Function) -> tvm.IRModule:
    """The placer's module with ``main``, :data:`LOAD_FUNC` if needed, VDevices realized."""
    out = placer.builder_.get()
    out.update_func(out.get_global_var("main"), main)
    out = relax.transform.DeadCodeElimination(["main"])(out)
    if placer.resident:
        out[LOAD_FUNC] = place_weights_func(placer.resident)
    out.update_global_info("vdevice", list(placer.plan.vdevices))
    return relax.transform.RealizeVDevice()(out)
