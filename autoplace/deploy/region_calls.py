"""What each offloaded region of a partitioned ``main`` reads and writes, as graph values.

``MergeCompositeFunctions`` gives each region a signature of its own: its parameters and
results are new variables, in an order of its making. A runtime that calls the region's
function with its own buffers (:mod:`autoplace.runtime`) needs to know which value of the
model each parameter and result is. :func:`region_calls` finds out by *replaying* each
region against ``main`` as it was before the partition: every call inside a region (through
its composite functions) is the binding of the old ``main`` with the same operator whose
arguments are the values found for the call's arguments. A value is then named as the
graph names it: ``("input", i)``, ``("op", k, shape, dtype)`` (computed by op *k*, the
fused kernel that runs the old binding) or ``("weight", k, shape, dtype)`` (a weight op *k*
reads, where ``main`` binds a weight to a variable and hands it to the region).
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import relax

from autoplace.deploy.targets import BuildError

#: a value of the model: ``("input", i)``, ``("op" | "weight", k, shape, dtype)``
Value = tuple


@dataclass(frozen=True)
class RegionCall:
    """One call of an offloaded region in ``main``: its unit, its symbol (the function
    its code generator registered or exported), the values it reads (in its parameters'
    order) and those it writes (in its results' order)."""

    unit: str
    symbol: str
    args: tuple[Value, ...]
    outputs: tuple[Value, ...]
    #: the graph ops it runs
    ops: tuple[int, ...]

    def to_dict(self) -> dict:
        """JSON form (an artefact's ``regions``)."""
        def plain(v):
            return [x if not isinstance(x, tuple) else list(x) for x in v]
        return {"unit": self.unit, "symbol": self.symbol, "ops": list(self.ops),
                "args": [plain(a) for a in self.args],
                "outputs": [plain(o) for o in self.outputs]}


def _bindings(func: relax.Function) -> dict:
    return {b.var: b.value for block in func.body.blocks for b in block.bindings}


class _Replay:
    """Finds the old ``main``'s variable of every value of the partitioned ``main``."""

    def __init__(self, before: relax.Function, after: relax.Function, mod: tvm.IRModule):
        self.params = {p: i for i, p in enumerate(before.params)}
        self.old = _bindings(before)
        self.new = _bindings(after)
        self.mod = mod
        #: the old variables replayed (the calls a region runs)
        self.seen: list = []
        #: a variable of main bound to a weight -> the first call that reads it
        self.reader: dict = {}
        self.by_op: dict[str, list] = {}
        for var, value in self.old.items():
            if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op):
                self.by_op.setdefault(value.op.name, []).append(var)

    def value(self, expr, env: dict):
        """The old variable (or parameter) ``expr`` is, given ``env`` (a function's own
        variables -> old ones)."""
        if isinstance(expr, relax.Var) and expr in env:
            return env[expr]
        if isinstance(expr, relax.Var) and (expr in self.params or expr in self.old):
            return expr
        if isinstance(expr, relax.Var) and expr in self.new:
            return self.value(self.new[expr], env)
        if isinstance(expr, relax.TupleGetItem):
            return self.result(expr.tuple_value, env)[expr.index]
        if isinstance(expr, relax.Call):
            return self.result(expr, env)
        raise BuildError(f"offload: cannot tell which value of the model {expr} is")

    def result(self, expr, env: dict):
        """The old variable of ``expr``'s result (a list for a tuple)."""
        if isinstance(expr, relax.Var) and expr in env:
            return env[expr]
        if isinstance(expr, relax.Var):
            return self.result(self.new[expr], env)
        if isinstance(expr, relax.Tuple):
            return [self.value(f, env) for f in expr.fields]
        callee = self._function(expr.op, env)
        if callee is not None:
            return self.inline(callee, [self.value(a, env) for a in expr.args])
        return self._match(expr, env)

    def _function(self, op, env: dict) -> relax.Function | None:
        if isinstance(op, relax.Function):
            return op
        if isinstance(op, tvm.ir.GlobalVar):
            return self.mod[op]
        if isinstance(op, relax.Var) and isinstance(env.get(("fn", op)), relax.Function):
            return env[("fn", op)]
        return None

    def inline(self, func: relax.Function, args: list):
        """The old variables of ``func``'s results, called with old variables ``args``."""
        env: dict = dict(zip(func.params, args))
        body = func.body
        for block in body.blocks:
            for b in block.bindings:
                if isinstance(b.value, relax.Function):
                    env[("fn", b.var)] = b.value
                else:
                    env[b.var] = self.result(b.value, env) if isinstance(
                        b.value, relax.Call | relax.Tuple) else self.value(b.value, env)
        return self.result(body.body, env)

    def _arg(self, expr, env: dict):
        """What an argument is: an old variable, a list (a tuple's), or itself (a constant,
        a shape: a leaf)."""
        if isinstance(expr, relax.Tuple):
            return [self._arg(f, env) for f in expr.fields]
        if isinstance(expr, relax.Var | relax.Call | relax.TupleGetItem):
            return self.value(expr, env)
        return expr

    def _match(self, call: relax.Call, env: dict):
        """The old binding of ``call``: the same operator, on the same old values."""
        args = [self._arg(a, env) for a in call.args]
        found = [var for var in self.by_op.get(call.op.name, [])
                 if _same(args, list(self.old[var].args))]
        if len(found) != 1:
            raise BuildError(f"offload: {len(found)} calls of {call.op.name} in main on a "
                             "region's values (one expected)")
        self.seen.append(found[0])
        for a in self.old[found[0]].args:
            if isinstance(self.old.get(a), tvm.ir.expr.Constant):
                self.reader.setdefault(a, found[0])
        return found[0]


def _same(new, old) -> bool:
    """Whether replayed argument(s) ``new`` are the old ``main``'s ``old``."""
    if isinstance(new, list):
        fields = old if isinstance(old, list) else getattr(old, "fields", None)
        return fields is not None and len(fields) == len(new) and all(
            _same(a, b) for a, b in zip(new, fields))
    if isinstance(new, relax.Var):
        return isinstance(old, relax.Var) and old.same_as(new)
    return not isinstance(old, relax.Var) and tvm_ffi.structural_equal(new, old)


def _named(var, replay: _Replay, kernel_of: dict[str, int]) -> Value:
    if var in replay.params:
        return ("input", replay.params[var])
    kind, name = "op", var.name
    if var in replay.reader:  # a weight main binds to a variable: the kernel reading it
        kind, name = "weight", replay.reader[var].name
    held = replay.old.get(var)
    while name not in kernel_of and isinstance(held, relax.TupleGetItem):
        name, held = held.tuple_value.name, replay.old.get(held.tuple_value)  # (a field of)
    if name not in kernel_of:
        raise BuildError(f"offload: value {var.name} is computed by no kernel of the graph")
    ty = var.ty
    return (kind, kernel_of[name], tuple(int(d) for d in ty.shape.values), str(ty.dtype))


def region_calls(before: tvm.IRModule, merged: tvm.IRModule, kernel_of: dict[str, int],
                 units: dict[str, str]) -> tuple[RegionCall, ...]:
    """The calls of the regions of ``merged`` (``MergeCompositeFunctions``' output) in
    ``main``'s order, their values named after ``before`` (weights folded) and
    ``kernel_of`` (its call names -> kernels); ``units``: code generator -> unit."""
    ours = {gv: f for gv, f in merged.functions_items() if isinstance(f, relax.Function)
            and f.attrs is not None and str(f.attrs.get("Codegen", "")) in units}
    replay = _Replay(before["main"], merged["main"], merged)
    return tuple(_call(replay, ours[v.op], v.args, kernel_of, units)
                 for v in replay.new.values()
                 if isinstance(v, relax.Call) and v.op in ours)


def _call(replay: _Replay, region: relax.Function, args, kernel_of: dict[str, int],
          units: dict[str, str]) -> RegionCall:
    """A call of ``region`` on ``args`` (variables of the partitioned ``main``)."""
    values = [replay.value(a, {}) for a in args]
    replay.seen = []
    results = replay.inline(region, values)
    results = results if isinstance(results, list) else [results]
    return RegionCall(
        unit=units[str(region.attrs["Codegen"])], symbol=str(region.attrs["global_symbol"]),
        args=tuple(_named(a, replay, kernel_of) for a in values),
        outputs=tuple(_named(r, replay, kernel_of) for r in results),
        ops=tuple(sorted({kernel_of[v.name] for v in replay.seen if v.name in kernel_of})))
