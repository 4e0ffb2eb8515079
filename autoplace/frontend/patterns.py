"""Where the composite patterns (:data:`autoplace.patterns.PATTERNS`) match a model's ops.

Each pattern is a ``tvm.relax.dpl`` pattern, made by ``tvm.relax.backend.patterns`` where
TVM has one (conv2d and matmul with bias and activation, layer norm) and here where it
has none for what ONNX models hold (attention written out as matmul, softmax, matmul; rms
norm). Patterns match the Relax ops before legalization; the op graph's ops are TVM's
fused kernels after it. :func:`find_matches` ties the two: it follows every legalized call
(named as its Relax op was) into the fused kernel that runs it, by dataflow, and keeps a
match only where it covers whole kernels: one (the kernel *is* the composite) or several
(a composite TVM's fusion split, such as attention across its softmax).
"""

from __future__ import annotations

import functools
import importlib

import tvm
from tvm import relax
from tvm.relax.backend import patterns as tvm_patterns
from tvm.relax.dpl import CallPattern, DFPattern, is_op, wildcard

from autoplace.graph import Match
from autoplace.patterns import PATTERNS

_CALL_TIR = tvm.ir.Op.get("relax.call_tir")
_ACTIVATION_OPS = {"": None, "_relu": "relax.nn.relu", "_gelu": "relax.nn.gelu",
                   "_gelu_tanh": "relax.nn.gelu_tanh"}


def _attention() -> DFPattern:
    scores = is_op("relax.matmul")(wildcard(), wildcard())
    scaled = scores | is_op("relax.multiply")(scores, wildcard()) | \
        is_op("relax.divide")(scores, wildcard())
    masked = scaled | is_op("relax.add")(scaled, wildcard())
    return is_op("relax.matmul")(is_op("relax.nn.softmax")(masked), wildcard())


def _residual(name: str) -> DFPattern:
    """``<op>_bias_residual[_relu]``: the op with its bias, plus a residual input (TVM's
    residual block, as CUTLASS's ``*_residual_add`` entries), then the activation."""
    base, _, act = name.partition("_residual")
    pattern = _bias_activation(base)
    return tvm_patterns.make_residual_block_pattern(pattern, "relax.add",
                                                    _ACTIVATION_OPS[act])[0]


def _bias_activation(name: str) -> DFPattern:
    """conv2d / matmul / matmul_transposed, then ``_bias``, then ``_relu`` or ``_gelu``."""
    if "_residual" in name:
        return _residual(name)
    act = next((a for a in ("_relu", "_gelu_tanh", "_gelu") if name.endswith(a)), "")
    base = name.removesuffix(act)
    kwargs = {"with_bias": base.endswith("_bias"), "activation": _ACTIVATION_OPS[act]}
    base = base.removesuffix("_bias")
    if base == "conv2d":
        return tvm_patterns.make_fused_bias_activation_pattern("relax.nn.conv2d", **kwargs)[0]
    return tvm_patterns.make_matmul_pattern(transposed_rhs=base == "matmul_transposed",
                                            **kwargs)[0]


@functools.cache
def table() -> dict[str, DFPattern]:
    """Every name of :data:`~autoplace.patterns.PATTERNS` as a dpl pattern."""
    out = {"layer_norm": tvm_patterns.make_layer_norm_pattern()[0],
           "rms_norm": is_op("relax.nn.rms_norm")(wildcard(), wildcard()),
           "attention": _attention()}
    for name in PATTERNS:
        if name not in out:
            out[name] = _bias_activation(name)
    return out


def entry_point(name: str) -> DFPattern:
    """The pattern a unit names by entry point ``package.module:function``: the function's
    result (a dpl pattern, or TVM's ``(pattern, annotations)``). ValueError saying what is
    wrong, in one line."""
    module, _, attr = name.partition(":")
    try:
        made = getattr(importlib.import_module(module), attr)()
    except Exception as exc:  # a user's module: anything from ImportError on
        raise ValueError(f"entry point {name!r}: {type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")) \
            from None
    made = made[0] if isinstance(made, tuple) and made else made
    if not isinstance(made, DFPattern):
        raise ValueError(f"entry point {name!r} returned {type(made).__name__}, not a "
                         "tvm.relax.dpl pattern")
    return made


def pattern(name: str) -> DFPattern:
    """The dpl pattern of ``name``: one of the table's, or an entry point's."""
    return table()[name] if name in PATTERNS else entry_point(name)


def check_entry_points(profile) -> None:
    """Resolve every pattern the profile's units name by entry point; a failure is a
    ProfileError naming the file and the unit's key."""
    from autoplace.hardware.profile import ProfileError

    for name, unit in profile.entry_points.items():
        try:
            entry_point(name)
        except ValueError as exc:
            raise ProfileError(f"{profile.source}: units.{unit}.patterns: {exc}") from None


def _bindings(func: relax.Function) -> list[relax.Binding]:
    return [b for block in func.body.blocks for b in block.bindings]


def pattern_matches(func: relax.Function, extra: tuple[str, ...] = ()
                    ) -> list[tuple[str, frozenset[str]]]:
    """(pattern name, names of the Relax calls it covers) of every match in ``func``, of
    the table's patterns and the entry points ``extra``."""
    var2val = relax.analysis.get_var2val(func)
    named = {b.value: b.var.name for b in _bindings(func)}
    found = []
    patterns = {**table(), **{name: entry_point(name) for name in extra}}
    for name, dpl in patterns.items():
        for b in _bindings(func):
            got = dpl.extract_matched_expr(b.value, var2val)
            if got is not None:
                calls = {named[e] for p, e in got.items() if isinstance(p, CallPattern)
                         and e in named}
                found.append((name, frozenset(calls)))
    return found


class _Dataflow:
    """Identities of values by where they come from, so that a legalized call and the
    same call inside a fused kernel get the same key (the fused module renames variables
    and shares one function between kernels that compute alike)."""

    def __init__(self):
        self.ids: dict = {}

    def of(self, expr: relax.Expr):
        if isinstance(expr, tvm.ir.expr.Constant):
            return ("const", expr)
        if isinstance(expr, relax.TupleGetItem):
            return (self.of(expr.tuple_value), expr.index)
        if isinstance(expr, relax.Tuple):
            return tuple(self.of(f) for f in expr.fields)
        return self.ids.get(expr, ("input", getattr(expr, "name", str(expr))))

    def key(self, call: relax.Call) -> tuple:
        """A ``call_tir``'s key: its kernel and where each argument comes from."""
        return (call.args[0].name_hint, self.of(call.args[1]))


def _legalized_calls(func: relax.Function) -> dict[tuple, list[str]]:
    """Key (:meth:`_Dataflow.key`) -> names of the ``call_tir`` bindings of ``func``."""
    flow, calls = _Dataflow(), {}
    for b in _bindings(func):
        if isinstance(b.value, relax.Call) and b.value.op.same_as(_CALL_TIR):
            calls.setdefault(flow.key(b.value), []).append(b.var.name)
            flow.ids[b.var] = ("call", b.var.name)
        else:
            flow.ids[b.var] = flow.of(b.value)
    return calls


def kernel_calls(legalized: relax.Function, fused: tvm.IRModule) -> list[set[str]]:
    """Per kernel of ``fused["main"]`` (before FuseTIR, in program order): the names of the
    legalized calls (bindings of ``legalized``) it runs."""
    calls, flow, kernels = _legalized_calls(legalized), _Dataflow(), []
    for b in _bindings(fused["main"]):
        value = b.value
        if not isinstance(value, relax.Call):
            flow.ids[b.var] = flow.of(value)
        elif value.op.same_as(_CALL_TIR):
            name = _take(calls, flow.key(value))
            kernels.append({name} - {None})
            flow.ids[b.var] = ("call", name) if name else ("unaligned", b.var)
        else:  # a fused function's call: follow its body
            names, flow.ids[b.var] = _run_fused(fused[value.op], value.args, flow, calls)
            kernels.append(names)
    return kernels


def _take(calls: dict[tuple, list[str]], key: tuple) -> str | None:
    """The next legalized call of ``key``; None if there is none (a kernel TVM's fusion
    made that no legalized call accounts for: it matches no pattern)."""
    names = calls.get(key)
    return names.pop(0) if names else None


def _run_fused(func: relax.Function, args, outer: _Dataflow, calls: dict):
    inner, names = _Dataflow(), set()
    inner.ids = {p: outer.of(a) for p, a in zip(func.params, args)}
    for b in _bindings(func):
        if isinstance(b.value, relax.Call) and b.value.op.same_as(_CALL_TIR):
            name = _take(calls, inner.key(b.value))
            names |= {name} - {None}
            inner.ids[b.var] = ("call", name) if name else ("unaligned", b.var)
        else:
            inner.ids[b.var] = inner.of(b.value)
    return names, inner.of(func.body.body)


def find_matches(before: relax.Function, legalized: relax.Function, fused: tvm.IRModule,
                 extra: tuple[str, ...] = ()) -> tuple[Match, ...]:
    """The matches of every pattern (the table's, and the entry points ``extra``) in
    ``before`` (the Relax function before legalization) that cover whole kernels of
    ``fused`` (before FuseTIR; ``legalized`` between them), by pattern name, then ops."""
    kernels = kernel_calls(legalized, fused)
    kernel_of = {name: k for k, names in enumerate(kernels) for name in names}
    found = set()
    for name, calls in pattern_matches(before, extra):
        ops = sorted({kernel_of[c] for c in calls if c in kernel_of})
        if ops and all(kernels[k] <= calls for k in ops):
            found.add(Match(pattern=name, ops=tuple(ops)))
    order = [*PATTERNS, *extra]
    return tuple(sorted(found, key=lambda m: (order.index(m.pattern), m.ops)))
