"""Relax IRModule -> fused kernels -> :class:`~autoplace.graph.OpGraph`.

One :class:`~autoplace.graph.Op` per ``call_tir`` of the (fused) ``main`` function, in
program order; one :class:`~autoplace.graph.Edge` per producer/consumer pair of kernels.

Weights: a kernel argument that is not another kernel's output is external; it counts as
a weight (``Op.weight_bytes``) if it is a Relax constant, or a function parameter at index
``>= attrs["num_input"]`` (the Relax convention for parameters kept as inputs, e.g. ONNX
``from_onnx(..., keep_params_in_input=True)``), or an alias / tuple item of one of those.
Everything else external (the first ``num_input`` parameters, or all of them when the
function has no ``num_input``) is a graph input.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import tvm
from tvm import relax
from tvm.s_tir.analysis import estimate_tir_flops

from autoplace.frontend.fold import fold
from autoplace.frontend.patterns import find_matches, kernel_calls
from autoplace.graph import Edge, GraphError, Op, OpGraph

_CALL_TIR = tvm.ir.Op.get("relax.call_tir")

# op_pattern values set by AnnotateTIROpPattern (relay/relax OpPatternKind).
_PATTERN_KINDS = {0: "elementwise", 1: "elementwise", 2: "injective", 3: "reduce"}
_REDUCE_TOKENS = frozenset(
    {"sum", "mean", "max", "min", "prod", "variance", "std", "argmax", "argmin", "logsumexp"}
)


def _legalize(mod: tvm.IRModule) -> tvm.IRModule:
    seq = [relax.transform.LegalizeOps(), relax.transform.AnnotateTIROpPattern(),
           relax.transform.FoldConstant()]
    return tvm.transform.Sequential(seq)(mod)


def fuse(mod: tvm.IRModule) -> tvm.IRModule:
    """Legalize and fuse ``mod`` into TIR kernels (one ``call_tir`` per fused kernel).

    Runs :func:`~autoplace.frontend.fold.fold` (constant weights, batch norms into convs,
    sums as adds), then TVM's LegalizeOps, AnnotateTIROpPattern, FoldConstant, FuseOps and
    FuseTIR. FoldConstant comes after LegalizeOps so that weights built at run time from
    constants that numpy did not fold become constants, not kernels.
    """
    return relax.transform.FuseTIR()(relax.transform.FuseOps()(_legalize(fold(mod))))


def kernel_of_calls(before: tvm.IRModule) -> dict[str, int]:
    """The name of each Relax call of ``before["main"]`` (folded:
    :func:`~autoplace.frontend.fold.fold`) -> the index of the kernel (op) that runs it
    once fused as :func:`fuse` fuses."""
    legal = _legalize(before)
    kernels = kernel_calls(legal["main"], relax.transform.FuseOps()(legal))
    return {name: k for k, names in enumerate(kernels) for name in names}


def from_relax(mod: tvm.IRModule, name: str, patterns: tuple[str, ...] = ()
               ) -> tuple[tvm.IRModule, OpGraph]:
    """Fuse ``mod`` as :func:`fuse` does and return the fused module with its op graph,
    whose ``matches`` say where the composite patterns (the table's, and the entry points
    ``patterns``) cover its kernels (:func:`autoplace.frontend.patterns.find_matches`)."""
    before = fold(mod)
    legal = _legalize(before)
    grouped = relax.transform.FuseOps()(legal)
    fused = relax.transform.FuseTIR()(grouped)
    graph = op_graph(fused, name)
    if "main" not in [gv.name_hint for gv in before.get_global_vars()]:
        return fused, graph
    matches = find_matches(before["main"], legal["main"], grouped, tuple(patterns))
    return fused, dataclasses.replace(graph, matches=matches)


# -- sizes -----------------------------------------------------------------------------
def type_bytes(ty: relax.Type, what: str = "value") -> int:
    """Bytes of a tensor type (sum over the fields of a tuple type); shapes must be static."""
    if isinstance(ty, relax.TupleType):
        return sum(type_bytes(t, what) for t in ty.fields)
    if not isinstance(ty, relax.TensorType) or ty.shape is None:
        raise GraphError(f"{what}: need a tensor of known shape, got {ty}")
    elems = 1
    for dim in ty.shape.values:
        if not isinstance(dim, tvm.tirx.IntImm):
            raise GraphError(f"{what}: shape {ty.shape} is not static")
        elems *= int(dim)
    dtype = tvm.DataType(str(ty.dtype))
    return elems * max(1, (dtype.bits * dtype.lanes + 7) // 8)


# -- kind ------------------------------------------------------------------------------
def _tokens(name: str) -> list[str]:
    return [t.rstrip("0123456789") for t in name.split("_")]


def kind_from_name(name: str) -> str | None:
    """The dominant op named in a (fused) PrimFunc name, or None if the name does not tell."""
    toks = _tokens(name)
    if any(t.startswith("conv") for t in toks):
        return "conv2d"
    if any(t in ("matmul", "dense") for t in toks):
        return "matmul"
    if any(t.startswith("pool") for t in toks):
        return "pool"
    if "softmax" in toks:
        return "softmax"
    if any(t.endswith("norm") for t in toks):
        return "norm"
    if "stack" in toks and "sum" in toks:
        # ONNX Sum(a, b, ...) legalizes to sum(stack(a, b, ...), axis=0): an n-ary add.
        return "elementwise"
    if any(t in _REDUCE_TOKENS for t in toks):
        return "reduce"
    first = toks[1] if toks[0] == "fused" and len(toks) > 1 else toks[0]
    if first in ("take", "gather"):  # ONNX Gather, which TVM marks opaque (op_pattern 8)
        return "injective"
    return None


def _op_pattern(pf: tvm.tirx.PrimFunc) -> int | None:
    """``op_pattern`` of ``pf``; fused kernels lack it, so analyse them on the fly."""
    pattern = pf.attrs.get("op_pattern") if pf.attrs is not None else None
    if pattern is None:
        annotated = relax.transform.AnnotateTIROpPattern()(tvm.IRModule({"main": pf}))
        attrs = annotated["main"].attrs
        pattern = attrs.get("op_pattern") if attrs is not None else None
    return None if pattern is None else int(pattern)


def op_kind(func_name: str, pf: tvm.tirx.PrimFunc) -> str:
    """Kind (one of ``OP_KINDS``) of kernel ``pf`` called ``func_name``."""
    kind = kind_from_name(func_name)
    if kind is not None:
        return kind
    return _PATTERN_KINDS.get(_op_pattern(pf), "other")


# -- graph walk ------------------------------------------------------------------------
@dataclass(frozen=True)
class _Tensor:
    """One kernel output: field ``field`` of op ``op``'s result (-1: a single tensor)."""

    op: int
    field: int
    nbytes: int


# A value: a kernel output, a tuple of values, or None (graph param, constant, shape...).
_Value = _Tensor | tuple | None


def _leaves(value: _Value) -> list[_Tensor]:
    if isinstance(value, _Tensor):
        return [value]
    if isinstance(value, tuple):
        return [t for v in value for t in _leaves(v)]
    return []


@dataclass
class _Walker:
    """Walks the bindings of one Relax function and collects kernels and edges."""

    mod: tvm.IRModule
    ops: list[Op] = field(default_factory=list)
    values: dict = field(default_factory=dict)  # relax.Var -> _Value
    flows: dict = field(default_factory=dict)  # (src, dst) -> {_Tensor}
    calls: dict = field(default_factory=dict)  # PrimFunc name -> times called so far
    costs: dict = field(default_factory=dict)  # PrimFunc name -> (kind, flops)
    weights: set = field(default_factory=set)  # relax.Vars that stand for weights

    def is_weight(self, expr: relax.Expr) -> bool:
        """Whether ``expr`` is a weight: a constant, a weight var, or a tuple (item) of them."""
        if isinstance(expr, tvm.ir.expr.Constant):
            return True
        if isinstance(expr, relax.Var):
            return expr in self.weights
        if isinstance(expr, relax.TupleGetItem):
            return self.is_weight(expr.tuple_value)
        if isinstance(expr, relax.Tuple):
            return bool(expr.fields) and all(self.is_weight(f) for f in expr.fields)
        return False

    def resolve(self, expr: relax.Expr) -> _Value:
        """The kernel outputs ``expr`` stands for; aliases are transparent."""
        if isinstance(expr, relax.Var):
            return self.values.get(expr)
        if isinstance(expr, relax.TupleGetItem):
            tup = self.resolve(expr.tuple_value)
            return tup[expr.index] if isinstance(tup, tuple) else None
        if isinstance(expr, relax.Tuple):
            fields = tuple(self.resolve(f) for f in expr.fields)
            return fields if any(f is not None for f in fields) else None
        if isinstance(expr, relax.Call) and any(_leaves(self.resolve(a)) for a in expr.args):
            raise GraphError(f"op graph: unsupported non-kernel call {expr.op} on kernel outputs")
        return None

    def bind(self, binding: relax.Binding) -> None:
        value = binding.value
        if isinstance(value, relax.Call) and value.op.same_as(_CALL_TIR):
            self.values[binding.var] = self.add_kernel(value)
        else:
            resolved = self.resolve(value)
            if resolved is not None:
                self.values[binding.var] = resolved
            elif self.is_weight(value):
                self.weights.add(binding.var)

    def cost(self, func: str, pf: tvm.tirx.PrimFunc) -> tuple[str, float]:
        if func not in self.costs:
            flops = float(estimate_tir_flops(tvm.IRModule({"main": pf})))
            self.costs[func] = (op_kind(func, pf), flops)
        return self.costs[func]

    def add_kernel(self, call: relax.Call) -> _Value:
        """Record one ``call_tir`` as an op; return its output value."""
        gv, args = call.args[0], call.args[1].fields
        k, func = len(self.ops), gv.name_hint
        reads: dict = {}  # distinct tensor -> bytes
        external = weight = 0
        for arg in args:
            leaves = _leaves(self.resolve(arg))
            for t in leaves:
                reads[t] = t.nbytes
                self.flows.setdefault((t.op, k), set()).add(t)
            if not leaves and arg not in reads:
                reads[arg] = type_bytes(arg.ty, f"{func} argument")
                external += reads[arg]
                weight += reads[arg] if self.is_weight(arg) else 0
        nth = self.calls.get(func, 0)
        self.calls[func] = nth + 1
        kind, flops = self.cost(func, self.mod[gv])
        out_bytes = type_bytes(call.ty, f"{func} output")
        self.ops.append(
            Op(name=func if nth == 0 else f"{func}#{nth}", kind=kind, flops=flops,
               bytes_read=sum(reads.values()), output_bytes=out_bytes,
               external_bytes=external, weight_bytes=weight, func=func)
        )
        if isinstance(call.ty, relax.TupleType):
            return tuple(_Tensor(k, i, type_bytes(t)) for i, t in enumerate(call.ty.fields))
        return _Tensor(k, -1, out_bytes)

    def graph(self, name: str) -> OpGraph:
        edges = tuple(
            Edge(src=s, dst=d, nbytes=sum(t.nbytes for t in self.flows[s, d]))
            for s, d in sorted(self.flows)
        )
        return OpGraph(name=name, ops=tuple(self.ops), edges=edges)


def _weight_params(func: relax.Function) -> set:
    """Parameters of ``func`` that are weights: those at index >= ``attrs["num_input"]``."""
    num_input = func.attrs.get("num_input") if func.attrs is not None else None
    if num_input is None:
        return set()
    return set(list(func.params)[int(num_input):])


def op_graph(fused_mod: tvm.IRModule, name: str, fname: str = "main") -> OpGraph:
    """The op graph of function ``fname`` of a fused module: one op per ``call_tir``.

    Ops are in program order (topological); ops calling the same PrimFunc again are named
    ``func#1``, ``func#2``, ... Edges carry the bytes of the distinct tensors that flow.
    External arguments are split into weights and graph inputs as the module docstring says.
    """
    try:
        func = fused_mod[fname]
    except (KeyError, ValueError, tvm.error.InternalError):
        raise GraphError(f"op graph {name!r}: module has no function {fname!r}") from None
    if not isinstance(func, relax.Function) or not isinstance(func.body, relax.SeqExpr):
        raise GraphError(f"op graph {name!r}: {fname!r} is not a Relax function")
    walker = _Walker(fused_mod, weights=_weight_params(func))
    for block in func.body.blocks:
        for binding in block.bindings:
            walker.bind(binding)
    return walker.graph(name)
