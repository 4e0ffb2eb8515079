"""The kernels of a fused module as data: what each op calls, on which tensors.

The runtime does not run the Relax VM. It reads ``main`` of the fused module the op graph
was made from once: op *k* is its *k*-th ``call_tir`` (as in :mod:`autoplace.frontend.relax`),
each argument is a graph input, a weight (a constant) or an output of an earlier op, and
``main`` returns some of those. A :class:`Program` holds that, the PrimFuncs by name, and the
weights; it is JSON-able (:meth:`Program.to_dict`) for the artefact a board runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import tvm
import tvm_ffi
from tvm import relax

from autoplace.graph import GraphError

CALL_TIR = tvm.ir.Op.get("relax.call_tir")


@dataclass(frozen=True)
class TensorSpec:
    """A tensor's shape and dtype."""

    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        n = tvm.DataType(self.dtype).bits // 8
        for d in self.shape:
            n *= d
        return n

    def to_dict(self) -> dict:
        return {"shape": list(self.shape), "dtype": self.dtype}

    @classmethod
    def from_dict(cls, d: dict) -> TensorSpec:
        return cls(tuple(int(x) for x in d["shape"]), str(d["dtype"]))


#: where a kernel argument or a result comes from: ``("input", i)``, ``("weight", w)`` or
#: ``("op", k, field)`` (field 0 of a single-output op)
Ref = tuple


@dataclass(frozen=True, kw_only=True)
class Kernel:
    """One ``call_tir``: the PrimFunc it calls, its arguments, its outputs."""

    func: str
    args: tuple[Ref, ...]
    outputs: tuple[TensorSpec, ...]

    def to_dict(self) -> dict:
        return {"func": self.func, "args": [list(a) for a in self.args],
                "outputs": [o.to_dict() for o in self.outputs]}

    @classmethod
    def from_dict(cls, d: dict) -> Kernel:
        return cls(func=str(d["func"]), args=tuple(tuple(a) for a in d["args"]),
                   outputs=tuple(TensorSpec.from_dict(o) for o in d["outputs"]))


@dataclass(frozen=True, kw_only=True)
class Program:
    """The kernels of one fused module, in program order (op *k* is ``kernels[k]``)."""

    inputs: tuple[TensorSpec, ...]
    input_names: tuple[str, ...]
    weights: tuple[TensorSpec, ...]
    kernels: tuple[Kernel, ...]
    results: tuple[Ref, ...]
    #: PrimFunc name -> its structural hash (what a compiled library is cached by)
    func_hashes: dict = field(default_factory=dict)
    #: PrimFunc name -> PrimFunc (not part of the JSON form: a program read back from its
    #: JSON runs from compiled libraries only)
    funcs: dict = field(default_factory=dict, compare=False, repr=False)
    #: the weights' values (runtime tensors, by index; not part of the JSON form)
    weight_values: tuple = field(default=(), compare=False, repr=False)

    def to_dict(self) -> dict:
        return {"inputs": [dict(t.to_dict(), name=n)
                           for t, n in zip(self.inputs, self.input_names)],
                "weights": [w.to_dict() for w in self.weights],
                "kernels": [k.to_dict() for k in self.kernels],
                "results": [list(r) for r in self.results],
                "func_hashes": dict(sorted(self.func_hashes.items()))}

    @classmethod
    def from_dict(cls, d: dict, weight_values: tuple = ()) -> Program:
        return cls(inputs=tuple(TensorSpec.from_dict(t) for t in d["inputs"]),
                   input_names=tuple(str(t["name"]) for t in d["inputs"]),
                   weights=tuple(TensorSpec.from_dict(w) for w in d["weights"]),
                   kernels=tuple(Kernel.from_dict(k) for k in d["kernels"]),
                   results=tuple(tuple(r) for r in d["results"]),
                   func_hashes={str(k): str(v) for k, v in d["func_hashes"].items()},
                   weight_values=tuple(weight_values))

    def weight_params(self, func: str) -> frozenset[int]:
        """The parameters of PrimFunc ``func`` that are a weight at every call of it (what
        a build may pack once: :mod:`autoplace.deploy.prepack`)."""
        calls = [k.args for k in self.kernels if k.func == func]
        if not calls:
            return frozenset()
        return frozenset(p for p in range(len(calls[0]))
                         if all(len(a) > p and a[p][0] == "weight" for a in calls))

    def edge_fields(self, src: int, dst: int) -> list[int]:
        """The output fields of op ``src`` that op ``dst`` reads (an edge's tensors)."""
        return sorted({a[2] for a in self.kernels[dst].args if a[0] == "op" and a[1] == src})


def _spec(ty, what: str) -> TensorSpec:
    if not isinstance(ty, relax.TensorType) or ty.shape is None:
        raise GraphError(f"{what} is not a tensor of known shape: {ty}")
    try:
        return TensorSpec(tuple(int(d) for d in ty.shape.values), str(ty.dtype))
    except TypeError:
        raise GraphError(f"{what} has a symbolic shape {ty.shape}; give the input shapes "
                         "when importing the model") from None


class _Reader:
    """Walks ``main``'s bindings into kernels."""

    def __init__(self, mod: tvm.IRModule, func: relax.Function):
        self.mod = mod
        self.values: dict = {p: ("input", i) for i, p in enumerate(func.params)}
        self.weights: list = []  # constants, by index
        self.kernels: list[Kernel] = []
        self.funcs: dict = {}

    def ref(self, expr, what: str) -> Ref | tuple:
        if isinstance(expr, relax.Var) and expr in self.values:
            return self.values[expr]
        if isinstance(expr, tvm.ir.expr.Constant):
            for w, const in enumerate(self.weights):
                if const.same_as(expr):
                    return ("weight", w)
            self.weights.append(expr)
            return ("weight", len(self.weights) - 1)
        if isinstance(expr, relax.TupleGetItem):
            whole = self.ref(expr.tuple_value, what)
            if isinstance(whole, list):
                return whole[expr.index]
        if isinstance(expr, relax.Tuple):
            return [self.ref(f, what) for f in expr.fields]
        raise GraphError(f"runtime: {what} is not a kernel output, input or weight: "
                         f"{type(expr).__name__}")

    def bind(self, binding) -> None:
        value = binding.value
        if isinstance(value, relax.Call) and value.op.same_as(CALL_TIR):
            self.values[binding.var] = self.kernel(value)
        else:
            self.values[binding.var] = self.ref(value, f"binding {binding.var.name}")

    def kernel(self, call: relax.Call):
        gv, k = call.args[0], len(self.kernels)
        if len(call.args) > 2:
            raise GraphError(f"runtime: kernel {gv.name_hint} takes symbolic shape "
                             "arguments (tir_vars), which the runtime does not pass")
        args = tuple(self.ref(a, f"argument of {gv.name_hint}") for a in call.args[1].fields)
        if any(isinstance(a, list) for a in args):
            raise GraphError(f"runtime: kernel {gv.name_hint} takes a tuple argument")
        ty = call.ty
        outs = [ty] if isinstance(ty, relax.TensorType) else list(ty.fields)
        specs = tuple(_spec(t, f"output of {gv.name_hint}") for t in outs)
        self.kernels.append(Kernel(func=gv.name_hint, args=args, outputs=specs))
        self.funcs[gv.name_hint] = self.mod[gv]
        if isinstance(ty, relax.TensorType):
            return ("op", k, 0)
        return [("op", k, f) for f in range(len(specs))]


def read_program(mod: tvm.IRModule) -> Program:
    """The :class:`Program` of ``main`` of a fused module (``models.load_module``)."""
    func = mod["main"]
    reader = _Reader(mod, func)
    for block in func.body.blocks:
        for binding in block.bindings:
            reader.bind(binding)
    out = reader.ref(func.body.body, "main's result")
    results = tuple(out) if isinstance(out, list) else (out,)
    if any(isinstance(r, list) for r in results):
        raise GraphError("runtime: main returns a nested tuple")
    inputs = tuple(_spec(p.ty, f"input {p.name}") for p in func.params)
    return Program(inputs=inputs, input_names=tuple(p.name for p in func.params),
                   weights=tuple(_spec(c.ty, "a weight") for c in reader.weights),
                   kernels=tuple(reader.kernels), results=results, funcs=reader.funcs,
                   func_hashes={f: str(tvm_ffi.structural_hash(pf))
                                for f, pf in reader.funcs.items()},
                   weight_values=tuple(c.value for c in reader.weights))


PROGRAM_FILE = "program.json"
WEIGHTS_FILE = "weights.params"


def save_program(program: Program, directory: str | Path) -> Path:
    """Write ``program`` into ``directory``: its JSON form and its weights (TVM's binary
    tensor format)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / PROGRAM_FILE).write_text(json.dumps(program.to_dict()))
    weights = {f"w{i}": v for i, v in enumerate(program.weight_values)}
    (directory / WEIGHTS_FILE).write_bytes(tvm.runtime.save_param_dict(weights))
    return directory


def load_program(directory: str | Path) -> Program:
    """The program :func:`save_program` wrote (no PrimFuncs: it runs from libraries)."""
    directory = Path(directory)
    return read_program_files(directory / PROGRAM_FILE, directory / WEIGHTS_FILE)


def read_program_files(program: Path, weights: Path) -> Program:
    """A program from its JSON file and its weights file; ValueError if they disagree."""
    data = json.loads(Path(program).read_text())
    values = tvm.runtime.load_param_dict(Path(weights).read_bytes())
    if sorted(values) != sorted(f"w{i}" for i in range(len(data["weights"]))):
        raise ValueError(f"{weights}: {len(values)} tensors, the program reads "
                         f"{len(data['weights'])}")
    return Program.from_dict(data, tuple(values[f"w{i}"] for i in range(len(values))))
