"""An op split along its output channels inside a stage library, by TVM's own sharding passes.

A split op's kernel (a fused ``call_tir``) becomes ``ways`` calls of one *local* kernel, each
computing its shard of the output from its shard of the weights, and a ``concat`` of the
shards (the gather its consumers read). TVM's Relax ``distributed`` passes do the work: the
kernel's output is annotated as sharded along its channel axis over a mesh of ``ways``
devices, ``PropagateSharding`` finds through the kernel's TIR which axis of each argument
follows it (a weight's output-channel axis, a bias's channel, a channel-wise input's channel;
nothing for an input every output channel reads), and ``LowerGlobalViewToLocalView`` rewrites
the kernel for one shard. Where the channels do not divide ``ways``, the op is split the most
ways up to ``ways`` that divide them; conv2d and matmul kernels are split (docs/pipeline.md,
"Op splits inside the libraries"), others run whole. Imports TVM.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tvm
from tvm import relax
from tvm.relax import distributed

#: op kinds whose kernels are split (their output channel is never reduced over)
SPLIT_KINDS = ("conv2d", "matmul")
_CALL_TIR = tvm.ir.Op.get("relax.call_tir")


@dataclass(frozen=True)
class Shards:
    """A kernel for one of ``ways`` shards of the output along ``axis``; ``arg_axes[i]``: the
    axis of the kernel's ``i``-th argument each shard gets its part of (None: all of it)."""

    kernel: tvm.tirx.PrimFunc
    ways: int
    axis: int
    arg_axes: tuple[int | None, ...]
    out_type: relax.TensorType  # one shard's output


def channel_axis(ty: relax.Type) -> int | None:
    """The output-channel axis of a kernel's output: 1 for NCHW-like (3+ dims), the last of
    a 2-D one; None for fewer dims or a shape not known."""
    if not isinstance(ty, relax.TensorType) or ty.shape is None or ty.ndim < 2:
        return None
    return 1 if ty.ndim >= 3 else ty.ndim - 1


def shard_ways(channels: int, ways: int) -> int:
    """The most ways, at most ``ways``, that divide ``channels`` (1: none)."""
    return max((w for w in range(1, min(ways, channels) + 1) if channels % w == 0), default=1)


def shard_kernel(kernel: tvm.tirx.PrimFunc, args: list[relax.Expr],
                 out_type: relax.TensorType, ways: int) -> Shards | None:
    """The kernel split ``ways`` ways (fewer where the channels do not divide) along its
    output's channel axis, or None where it cannot be: one way, or TVM cannot shard it, or
    a shard reads only part of an input that is not a constant and the shards, run on
    random inputs, do not give the kernel's output. (TVM's propagation takes a grouped
    conv's input channels for its output channels, so its shards read the wrong ones:
    alexnet's grouped convs, found by the test; a depthwise conv's are right.)"""
    axis = channel_axis(out_type)
    if axis is None:
        return None
    ways = shard_ways(int(out_type.shape.values[axis]), ways)
    if ways < 2:
        return None
    try:
        local = _lower(kernel, [a.ty for a in args], out_type, ways, axis)
    except (tvm.error.InternalError, tvm.error.DiagnosticError, ValueError):
        return None  # a kernel TVM's passes cannot shard runs whole
    if local is None:
        return None
    if any(ax is not None and not isinstance(a, tvm.ir.expr.Constant)
           for a, ax in zip(args, local.arg_axes)) and not _agrees(kernel, local, args, out_type):
        return None
    return local


def _lower(kernel, arg_types, out_type, ways: int, axis: int) -> Shards | None:
    mesh = distributed.device_mesh((ways,), tvm.ir.Range(0, ways))
    bb = relax.BlockBuilder()
    params = [relax.Var(f"a{i}", ty) for i, ty in enumerate(arg_types)]
    kernel_gv = bb.add_func(kernel, "kernel")
    with bb.function("main", params):
        with bb.dataflow():
            y = bb.emit(relax.call_tir(kernel_gv, params, out_type))
            y = bb.emit(relax.op.distributed.annotate_sharding(
                y, mesh, distributed.Placement.from_text(f"S[{axis}]")))
            out = bb.emit_output(y)
        bb.emit_func_output(out)
    mod = bb.get()
    mod.update_global_info("mesh", [mesh])
    mod = distributed.transform.PropagateSharding()(mod.with_attr("device_num", ways))
    mod = distributed.transform.LowerGlobalViewToLocalView()(mod)
    return _read(mod, ways, axis)


def _read(mod: tvm.IRModule, ways: int, axis: int) -> Shards | None:
    """The local kernel and each argument's sharded axis, if the output is sharded as asked
    and nothing is split along a reduced axis (every placement is ``R`` or ``S[i]``)."""
    main = mod["main"]
    axes = [_sharded_axis(p.ty) for p in main.params]
    out = _sharded_axis(main.ret_ty)
    call = next(b.value for blk in main.body.blocks for b in blk.bindings
                if isinstance(b.value, relax.Call) and isinstance(b.value.args[0], relax.GlobalVar))
    if out != axis or any(a == "?" for a in axes):
        return None
    ty = main.ret_ty.tensor_ty
    shape = [int(d) for d in ty.shape.values]
    shape[axis] //= ways
    return Shards(kernel=mod[call.args[0]], ways=ways, axis=axis, arg_axes=tuple(axes),
                  out_type=relax.TensorType(shape, ty.dtype))


def _sharded_axis(ty) -> int | None | str:
    """The axis a one-dimensional mesh's placement shards (None: replicated; "?": other)."""
    specs = list(ty.placement.dim_specs)
    if len(specs) != 1:
        return "?"
    if specs[0].kind == distributed.PlacementSpec.replica().kind:
        return None
    return int(specs[0].axis)


def shard_call(call: relax.Call, shards: Shards, kernel: relax.GlobalVar,
               name: str) -> tuple[list[relax.VarBinding], relax.Expr]:
    """Bindings computing each shard of ``call`` (a ``call_tir`` of the unsplit kernel) with
    ``kernel`` (``shards.kernel`` in the module), and the concat of the shards."""
    args = list(call.args[1].fields)
    bindings, outs = [], []
    for i in range(shards.ways):
        parts = []
        for arg, ax in zip(args, shards.arg_axes):
            part, extra = _part(arg, ax, i, shards.ways, f"{name}_in{len(parts)}_s{i}")
            parts.append(part)
            bindings += extra
        var = relax.Var(f"{name}_s{i}", shards.out_type)
        bindings.append(relax.VarBinding(var, relax.call_tir(kernel, parts, shards.out_type)))
        outs.append(var)
    return bindings, relax.op.concat(outs, axis=shards.axis)


def _part(arg: relax.Expr, axis: int | None, i: int, ways: int,
          name: str) -> tuple[relax.Expr, list[relax.VarBinding]]:
    """Shard ``i`` of ``ways`` of an argument along ``axis``: a constant sliced here, a value
    sliced by a ``strided_slice`` binding; all of it where ``axis`` is None."""
    if axis is None:
        return arg, []
    size = int(arg.ty.shape.values[axis]) // ways
    if isinstance(arg, tvm.ir.expr.Constant):
        data = np.take(arg.value.numpy(), np.arange(i * size, (i + 1) * size), axis=axis)
        return relax.const(np.ascontiguousarray(data), str(arg.ty.dtype)), []
    shape = [int(d) for d in arg.ty.shape.values]
    shape[axis] = size
    var = relax.Var(name, relax.TensorType(shape, arg.ty.dtype))
    value = relax.op.strided_slice(arg, axes=[axis], begin=[i * size], end=[(i + 1) * size])
    return var, [relax.VarBinding(var, value)]


def _agrees(kernel: tvm.tirx.PrimFunc, shards: Shards, args: list[relax.Expr],
            out_type: relax.TensorType) -> bool:
    """Whether the shards' concat equals the kernel's output on random inputs (llvm)."""
    bb = relax.BlockBuilder()
    whole, local = bb.add_func(kernel, "whole"), bb.add_func(shards.kernel, "shard")
    params = [relax.Var(f"a{i}", a.ty) for i, a in enumerate(args)
              if not isinstance(a, tvm.ir.expr.Constant)]
    free = iter(params)
    inputs = [a if isinstance(a, tvm.ir.expr.Constant) else next(free) for a in args]
    call = relax.call_tir(whole, inputs, out_type)
    parts, concat = shard_call(call, shards, local, "x")
    full, joined = relax.Var("full", out_type), relax.Var("joined", out_type)
    body = relax.SeqExpr([relax.BindingBlock([relax.VarBinding(full, call), *parts,
                                              relax.VarBinding(joined, concat)])],
                         relax.Tuple([full, joined]))
    mod = bb.get()
    mod["main"] = relax.Function(params, relax.BlockBuilder().normalize(body)).with_attr(
        "global_symbol", "main")
    vm = relax.VirtualMachine(tvm.compile(relax.transform.Normalize()(mod), target="llvm"),
                              tvm.cpu())
    rng = np.random.default_rng(0)
    feed = [tvm.runtime.tensor(rng.standard_normal([int(d) for d in p.ty.shape.values])
                               .astype(str(p.ty.dtype)), tvm.cpu()) for p in params]
    want, got = (x.numpy() for x in vm["main"](*feed))
    return bool(np.allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max()))


def is_kernel_call(value: relax.Expr) -> bool:
    """Whether a binding's value is a ``call_tir`` (an op's kernel)."""
    return isinstance(value, relax.Call) and value.op.same_as(_CALL_TIR)
