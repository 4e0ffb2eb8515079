"""Weights packed once, not per call: a kernel's layout-rewrite blocks split off.

A conv vectorised over output channels reads its weight in a packed layout, the vector's
channels innermost (:mod:`autoplace.deploy.cpu_rules`). When the caller says which of a
kernel's parameters are constants (:func:`layout_free`: TVM's ``layout_free_buffers``
attribute, as Relax's ``AttachAttrLayoutFreeBuffers`` sets it), the default schedule packs
such a weight in a block of its own at the kernel's root, annotated as MetaSchedule's
``RewriteLayout`` annotates its own (:data:`PREPROC`); :func:`split_packs` then splits it
off into a function of its own with TVM's ``SplitLayoutRewritePreproc``, so that the
runtime packs each weight once when it loads and the kernel reads the packed copy. On
resnet50's 7x7 convs (512 x 512 x 3 x 3 weights) a copy per call took as long as the conv
(experiments/results/bench_weight_packing.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import relax, s_tir, tirx

#: the PrimFunc attribute listing the parameters that are constants (weights)
LAYOUT_FREE = "layout_free_buffers"
#: the annotation of a block that packs a layout-free parameter (MetaSchedule's name)
PREPROC = "meta_schedule.layout_rewrite_preproc"
_CALL_TIR = tvm.ir.Op.get("relax.call_tir")


def layout_free(func: tirx.PrimFunc, params: Iterable[int]) -> tirx.PrimFunc:
    """``func`` with its parameters ``params`` (positions) marked as constants that a
    schedule may pack once at build time; ``func`` itself when there are none."""
    params = sorted({int(p) for p in params})
    return func.with_attr(LAYOUT_FREE, params) if params else func


def mark_weights(func: tirx.PrimFunc, constants: Iterable[int]) -> tirx.PrimFunc:
    """``func`` with those of its ``constants`` (parameter positions) that a reduction
    reads (a conv's or a matmul's weight: what a schedule packs) marked layout free
    (:func:`layout_free`). A constant read elementwise (a bias, a scale) is left unmarked:
    MetaSchedule's ``RewriteLayout`` would pack it in the weight's packing function, one
    function for two arguments, which the runtime does not split off."""
    reduced = _reduction_reads(func)
    return layout_free(func, [p for p in constants
                              if any(func.params[int(p)].same_as(r) for r in reduced)])


def _reduction_reads(func: tirx.PrimFunc) -> list:
    """What ``func``'s blocks with a reduction iterator read."""
    found: list = []

    def visit(block):
        if any(v.iter_type == tirx.IterVar.CommReduce for v in block.iter_vars):
            found.extend(r.source for r in block.reads)

    tvm_ffi.structural_walk(func.body, (s_tir.SBlock, visit))
    return found


def free_params(func: tirx.PrimFunc) -> frozenset[int]:
    """The positions of ``func``'s parameters marked by :func:`layout_free`."""
    value = func.attrs.get(LAYOUT_FREE) if func.attrs is not None else None
    return frozenset(int(p) for p in value) if value is not None else frozenset()


@dataclass(frozen=True)
class Pack:
    """One packed parameter of a split kernel: ``func`` packs it, from its original shape
    into ``shape`` (the shape the kernel's compute takes)."""

    param: int
    func: tirx.PrimFunc
    shape: tuple[int, ...]
    dtype: str


def split_packs(func: tirx.PrimFunc, n_outputs: int) -> tuple[tirx.PrimFunc, tuple[Pack, ...]]:
    """``func`` (scheduled, its last ``n_outputs`` parameters its outputs) as its compute,
    which reads every packed parameter packed, and the packs: ``(func, ())`` when it has no
    :data:`PREPROC` block."""
    if not _has_preproc(func):
        return func, ()
    n_in = len(func.params) - n_outputs
    bb = relax.BlockBuilder()
    args = [relax.Var(f"a{i}", relax.TensorType(_shape(p), p.ty.dtype))
            for i, p in enumerate(func.params[:n_in])]
    outs = [relax.TensorType(_shape(p), p.ty.dtype) for p in func.params[n_in:]]
    with bb.function("main", args):
        gv = bb.add_func(func, "kernel")
        result = bb.emit(relax.call_tir(gv, args, outs if n_outputs > 1 else outs[0]))
        bb.emit_func_output(result)
    split = _read_split(relax.transform.SplitLayoutRewritePreproc()(bb.get()), args)
    return split if split is not None else (func, ())


def _read_split(mod: tvm.IRModule, args: list) -> tuple[tirx.PrimFunc, tuple[Pack, ...]] | None:
    """The compute and the packs of ``mod``'s ``main`` as SplitLayoutRewritePreproc left
    it: one call per packed argument (that argument alone in, its packed copy out), then
    the compute's call. None for another form (MetaSchedule's ``RewriteLayout`` packs
    several arguments in one call: such a kernel stays whole, packing on every call)."""
    calls = [(b.var, b.value) for block in mod["main"].body.blocks for b in block.bindings
             if isinstance(b.value, relax.Call) and b.value.op.same_as(_CALL_TIR)]
    *pack_calls, (_, last) = calls
    func, given = mod[last.args[0]], list(last.args[1].fields)
    packs = []
    for var, call in pack_calls:
        sources = list(call.args[1].fields)
        at = [j for j, a in enumerate(given) if a.same_as(var)]
        if len(sources) != 1 or len(at) != 1 or not sources[0].same_as(args[at[0]]):
            return None
        j = at[0]
        packs.append(Pack(param=j, func=mod[call.args[0]], shape=tuple(_shape(func.params[j])),
                          dtype=str(func.params[j].ty.dtype)))
    return func, tuple(sorted(packs, key=lambda p: p.param))


def _has_preproc(func: tirx.PrimFunc) -> bool:
    found = []
    tvm_ffi.structural_walk(func.body, (s_tir.SBlock, lambda b: found.append(
        PREPROC in b.annotations)))
    return any(found)


def _shape(param) -> list[int]:
    return [int(d) for d in param.ty.shape]


def measurable(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` as MetaSchedule's ``RemoveWeightLayoutRewriteBlock`` takes it (its builder
    and ``ArgInfo.from_entry_func(remove_preproc=True)`` run it to time a kernel without
    its packing): that pass drops each :data:`PREPROC` block and passes the kernel the
    packed buffer instead of the parameter, but checks first that the block is a plain
    copy, ``packed[...] = param[v0, v1, ...]``. A pack that pads
    (:mod:`autoplace.deploy.channel_pairs`: ``if_then_else(v < 125, param[v * 8 + c], 0)``)
    is not one, so each such block is given that form here; the pass removes it anyway,
    and reads only which parameter it packs into which buffer."""
    return tvm_ffi.structural_map(mod, (s_tir.SBlockRealize, _as_plain_copy))


def _as_plain_copy(realize: s_tir.SBlockRealize) -> s_tir.SBlockRealize:
    """``realize`` itself, or, for a :data:`PREPROC` block whose copy is not plain, a
    plain copy of the same parameter into the same buffer (bound at index 0: it is
    never run)."""
    block, body = realize.block, realize.block.body
    if PREPROC not in block.annotations or not isinstance(body, tirx.BufferStore):
        return realize
    loads: list = []
    tvm_ffi.structural_walk(body.value, (tvm.ir.expr.TensorLoad, loads.append))
    if len(loads) != 1 or all(isinstance(i, tirx.Var) for i in loads[0].indices):
        return realize
    source = loads[0].source
    iters = [tirx.IterVar(tvm.ir.Range(0, d), tirx.Var(f"v{i}", d.ty), tirx.IterVar.DataPar)
             for i, d in enumerate(source.shape)]
    copy = tirx.BufferStore(body.buffer, tirx.BufferLoad(source, [iv.var for iv in iters]),
                            [tirx.const(0, d.ty) for d in body.buffer.shape])
    plain = s_tir.SBlock(iters, list(block.reads), list(block.writes), block.name_hint, copy,
                         annotations=dict(block.annotations))
    return s_tir.SBlockRealize([tirx.const(0, d.ty) for d in source.shape], True, plain)
