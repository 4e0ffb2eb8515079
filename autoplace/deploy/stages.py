"""A pipeline's stages as Relax functions, and their TVM libraries (docs/pipeline.md).

:func:`slice_stages` cuts the fused ``main`` of a model at op boundaries: stage ``s`` gets the
kernels of its ops, in program order, as a function ``main`` of the values it reads (graph
inputs, or outputs of earlier stages' ops, named after those ops) returning a tuple of the
values later stages read; the last stage returns the model's output. Bindings that are not
kernels (tuple items, aliases) are copied into every stage that reads them. Weights stay
constants inside the stage that uses them, so a stage's library holds only its own weights.

An op the plan splits ``k`` ways is split inside its stage's library where its kernel allows
(:mod:`autoplace.deploy.shard`: conv2d and matmul kernels along their output channels): ``k``
calls of one shard kernel on ``k`` slices of its weights, and the concat of their outputs;
``StageModule.shards`` says which ops are, how many ways and the shard kernel's name. Every
stage compiles for ``llvm`` (the host, or the ``mtriple`` of the units that run it, linked by
their cross compiler: :func:`autoplace.deploy.toolchain.llvm_for`). Imports TVM.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import tvm
from tvm import relax

from autoplace.deploy.artefact import file_entry
from autoplace.deploy.compiler import attach_meta
from autoplace.deploy.shard import is_kernel_call, shard_call, shard_kernel
from autoplace.deploy.targets import BuildError
from autoplace.deploy.toolchain import export_library

#: the value the last stage returns: the model's output
OUTPUT = "output"
#: ``StageModule.meta()["format"]``: what a stage library's metadata function returns
STAGE_FORMAT = "autoplace-stage"


@dataclass(frozen=True)
class StageModule:
    """One stage: ``main(*inputs) -> (*outputs)`` over named values."""

    index: int
    module: tvm.IRModule
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    #: op name -> ``{"ways", "axis", "kernel"}`` for each op split inside the library
    shards: dict = field(default_factory=dict)

    def meta(self) -> dict:
        """What a runner needs to call the stage: its inputs' names, shapes and dtypes (as
        :class:`~autoplace.deploy.run.Loaded` reads them), its outputs' names."""
        params = self.module["main"].params
        return {"format": STAGE_FORMAT, "stage": self.index, "load": None,
                "devices": [[1, 0]], "outputs": list(self.outputs),
                "inputs": [_spec(name, p) for name, p in zip(self.inputs, params)]}

    def compile(self, target: dict | None = None) -> tvm.runtime.Executable:
        """The stage's library (TVM's default Relax pipeline) for ``target``, an llvm
        target dict (default: this host)."""
        mod = attach_meta(self.module, self.meta())
        return tvm.compile(mod, target=tvm.target.Target(target or {"kind": "llvm"}))


def _spec(name: str, param: relax.Var) -> dict:
    ty = param.ty
    if not isinstance(ty, relax.TensorType) or ty.shape is None:
        raise BuildError(f"value {name!r} passed between stages is not a tensor of known "
                         f"shape ({ty}); cut the stages elsewhere")
    return {"name": name, "shape": [int(d) for d in ty.shape.values], "dtype": str(ty.dtype)}


@dataclass
class _Main:
    """The bindings of a fused ``main``, the stage that owns each, and value names."""

    fused: tvm.IRModule
    func: relax.Function
    bindings: list  # relax.VarBinding, program order
    names: dict  # relax.Var -> value name: a graph input's, an op's, or var@binding
    defined_at: dict  # relax.Var -> binding index
    owner: dict  # binding index -> stage, or None: recomputed by every stage reading it
    #: (kernel, ways, which arguments are constants) -> its Shards or None, found once
    sharded: dict = field(default_factory=dict)


def _main(fused: tvm.IRModule, op_names: Sequence[str], stage_of_op: list[int]) -> _Main:
    """Kernels are owned by their op's stage; another binding by the one stage whose values
    it reads (a tuple item of a kernel's output goes with the kernel), else by none."""
    func = relax.transform.ToNonDataflow()(fused)["main"]
    bindings = [b for block in func.body.blocks for b in block.bindings]
    m = _Main(fused, func, bindings, {p: p.name for p in func.params}, {}, {})
    kernels = 0
    for i, b in enumerate(bindings):
        m.defined_at[b.var] = i
        if is_kernel_call(b.value):
            m.owner[i] = stage_of_op[kernels] if kernels < len(op_names) else None
            m.names[b.var] = op_names[kernels] if kernels < len(op_names) else b.var.name
            kernels += 1
            continue
        owners = {m.owner[m.defined_at[v]] for v in relax.analysis.free_vars(b.value)
                  if v in m.defined_at}
        m.owner[i] = owners.pop() if len(owners) == 1 else None
        m.names[b.var] = f"{b.var.name}@{i}"
    if kernels != len(op_names):
        raise BuildError(f"the module has {kernels} kernels, its op graph {len(op_names)} ops")
    return m


def _closure(m: _Main, s: int, roots: list[relax.Expr]) -> tuple[set, list]:
    """The bindings stage ``s`` computes for ``roots`` (its own, and unowned ones they
    read), and the vars it takes as inputs (graph inputs, other stages' values)."""
    chosen = {i for i, owner in m.owner.items() if owner == s}
    inputs, seen = [], set()
    stack = [v for e in roots for v in relax.analysis.free_vars(e)]
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        i = m.defined_at.get(v)
        if i is None or m.owner[i] not in (s, None):
            inputs.append(v)
        else:  # this stage's own binding, or an unowned one it recomputes
            chosen.add(i)
            stack.extend(relax.analysis.free_vars(m.bindings[i].value))
    return chosen, inputs


def slice_stages(fused: tvm.IRModule, op_names: Sequence[str],
                 bounds: Sequence[tuple[int, int]],
                 splits: Mapping[str, int] | None = None) -> list[StageModule]:
    """The stages ``[start, end)`` of ops (contiguous, covering every op) of ``fused``;
    ``splits``: the ways to split ops (by name) inside their stage, where they can be."""
    if not bounds or bounds[0][0] != 0 or bounds[-1][1] != len(op_names) \
            or any(a[1] != b[0] for a, b in zip(bounds, bounds[1:])) \
            or any(end <= start for start, end in bounds):
        raise BuildError(f"stages {list(bounds)} do not cover ops [0, {len(op_names)}) in order")
    m = _main(fused, op_names, [s for s, (a, b) in enumerate(bounds) for _ in range(a, b)])
    last = len(bounds) - 1
    parts = []
    for s in range(len(bounds)):
        roots = [m.bindings[i].value for i, owner in m.owner.items() if owner == s]
        parts.append(_closure(m, s, roots + ([m.func.body.body] if s == last else [])))
    needed = [{m.names[v] for v in inputs} for _, inputs in parts]
    return [_stage(m, s, parts[s], set().union(*needed[s + 1:]), s == last, splits or {})
            for s in range(len(bounds))]


def _stage(m: _Main, s: int, part: tuple[set, list], later: set, last: bool,
           splits: Mapping[str, int]) -> StageModule:
    chosen, inputs = part
    inputs = sorted(inputs, key=lambda v: m.names[v])
    mine = [m.bindings[i] for i in sorted(chosen)]
    exported = [b.var for b in mine if m.owner[m.defined_at[b.var]] == s
                and m.names[b.var] in later]
    out = [m.func.body.body] if last else exported
    mod, mine, shards = _split(m, mine, splits)
    body = relax.BlockBuilder().normalize(
        relax.SeqExpr([relax.BindingBlock(mine)], relax.Tuple(out)))
    mod["main"] = relax.Function(inputs, body).with_attr("global_symbol", "main")
    mod = relax.transform.DeadCodeElimination(["main"])(relax.transform.Normalize()(mod))
    return StageModule(index=s, module=mod, inputs=tuple(m.names[v] for v in inputs),
                       outputs=(OUTPUT,) if last else tuple(m.names[v] for v in exported),
                       shards=shards)


def _split(m: _Main, bindings: list, splits: Mapping[str, int]) -> tuple[tvm.IRModule, list,
                                                                          dict]:
    """``bindings`` with each kernel of an op in ``splits`` replaced by its shards and
    their concat (where it can be split), the module with the shard kernels, and per op
    split its ways, axis and shard kernel."""
    bb, out, shards = relax.BlockBuilder(m.fused.clone()), [], {}
    for b in bindings:
        name = m.names[b.var]
        ways = splits.get(name, 1)
        sharded = _sharded(m, b.value, ways) if ways > 1 and is_kernel_call(b.value) else None
        if sharded is None:
            out.append(b)
            continue
        kernel = bb.add_func(sharded.kernel, f"{b.value.args[0].name_hint}_shard{sharded.ways}")
        parts, concat = shard_call(b.value, sharded, kernel, re.sub(r"\W", "_", name))
        out += parts + [relax.VarBinding(b.var, concat)]
        shards[name] = {"ways": sharded.ways, "axis": sharded.axis, "kernel": kernel.name_hint}
    return bb.get(), out, shards


def _sharded(m: _Main, call: relax.Call, ways: int):
    """:func:`shard_kernel` of a kernel call, once per kernel, ways and constant arguments
    (ops sharing a kernel share its shards)."""
    args = list(call.args[1].fields)
    key = (call.args[0].name_hint, ways,
           tuple(isinstance(a, tvm.ir.expr.Constant) for a in args))
    if key not in m.sharded:
        m.sharded[key] = shard_kernel(m.fused[call.args[0]], args, call.ty, ways)
    return m.sharded[key]


def export_stages(stages: Sequence[StageModule], out_dir: str | Path,
                  builds: Sequence[tuple[dict, str | None]] | None = None) -> list[dict]:
    """Compile each stage and write ``stage<i>.so`` in ``out_dir``; per stage, the manifest's
    ``library`` entry (its file and SHA-256, and the values it reads and returns).
    ``builds``: per stage, its llvm target dict and compiler (default: this host's)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    entries = []
    builds = builds or [({"kind": "llvm"}, None)] * len(stages)
    for stage, (target, compiler) in zip(stages, builds):
        name = f"stage{stage.index}.so"
        export_library(stage.compile(target), out / name, compiler, f"stage {stage.index}")
        entries.append({**file_entry(out, out / name), "inputs": list(stage.inputs),
                        "outputs": list(stage.outputs), "shards": stage.shards})
    return entries
