"""One conv of a bundled model in three layouts, tuned by MetaSchedule (issue 32: where the gap
to ONNX Runtime is).

    python experiments/bench_conv_layouts.py [--model squeezenet] [--trials 64]
        [--kernels fused_conv2d17_add9_relu9 fused_conv2d3_add2_relu2]

Per kernel (a fused conv + bias + relu of the model, on the ``host`` profile's ``cpu`` unit,
2 threads), each tuned with ``KernelTuner`` for ``--trials`` candidates into a fresh database
(not kept: a trace of MetaSchedule's layout rewrite has a boolean annotation, ``true`` as
tuned and ``1`` read back, so its finalists would not be found by another process):

- ``NCHW default``: the kernel as autoplace builds it (its default schedule), timed alone;
- ``NCHW8c MS-N``: the same conv converted by Relax's ``ConvertLayout`` to NCHW8c / OIHW8i8o
  and legalized with ``topi.nn.conv2d_NCHWc`` (Relax has none), MetaSchedule's best;
- ``layout-free MS-N``: the NCHW kernel with its weight marked ``layout_free_buffers``, so
  MetaSchedule's RewriteLayout postprocessor may pack it, MetaSchedule's best;

with each one's GFLOP/s and the load. ONNX Runtime's time of the same conv is its profile's
(``enable_profiling``), not matched here: its nodes are named differently.
"""

from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np
from bench_conv_schedules import timer


def _legalize_conv(bb, call):
    """conv2d: NCHWc by ``topi.nn.conv2d_NCHWc``; NCHW by Relax's own legalization."""
    import tvm
    from tvm import topi

    a = call.attrs
    if str(a.data_layout) == "NCHW":
        return tvm.ir.Op.get("relax.nn.conv2d").get_attr("FLegalize")(bb, call)

    def conv(x, w):
        return topi.nn.conv2d_NCHWc(x, w, [int(s) for s in a.strides],
                                    [int(p) for p in a.padding], [int(d) for d in a.dilation],
                                    str(a.data_layout), str(a.out_layout), "float32")

    return bb.call_te(conv, call.args[0], call.args[1], primfunc_name_hint="conv2d_NCHWc")


def blocked(func, target, block: int = 8):
    """The conv + bias + relu of ``func``'s shapes in NCHW{block}c, as one fused kernel."""
    import tvm
    from tvm import relax

    x, w = [tuple(int(d) for d in v.ty.shape) for v in func.params[:2]]
    out = tuple(int(d) for d in func.params[-1].ty.shape)
    k = w[2]
    stride = 1 if out[2] >= x[2] - k + 1 else 2
    pad = ((out[2] - 1) * stride + k - x[2] + 1) // 2
    bb = relax.BlockBuilder()
    data = relax.Var("x", relax.TensorType(x, "float32"))
    rng = np.random.default_rng(0)
    with bb.function("main", [data]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.conv2d(data, relax.const(rng.random(w, dtype=np.float32)),
                                           strides=stride, padding=pad))
            bias = relax.const(rng.random((1, w[0], 1, 1), dtype=np.float32))
            y = bb.emit_output(bb.emit(relax.op.nn.relu(relax.op.add(y, bias))))
        bb.emit_func_output(y)
    layouts = {"relax.nn.conv2d": [f"NCHW{block}c", f"OIHW{block}i{block}o"]}
    mod = relax.transform.ConvertLayout(layouts)(bb.get())
    seq = [relax.transform.LegalizeOps({"relax.nn.conv2d": _legalize_conv}),
           relax.transform.AnnotateTIROpPattern(), relax.transform.FoldConstant(),
           relax.transform.FuseOps(), relax.transform.FuseTIR()]
    with target:
        mod = tvm.transform.Sequential(seq)(mod)
    return next(f for gv, f in mod.functions.items()
                if isinstance(f, tvm.tirx.PrimFunc) and "NCHWc" in gv.name_hint)


def default_us(func, target) -> float:
    """``func`` with its default schedule, timed alone (the fastest of 5 repeats)."""
    import tvm

    from autoplace.deploy.schedule import default_schedule

    args = [tvm.runtime.tensor(np.random.default_rng(0).random(
        [int(d) for d in v.ty.shape], dtype=np.float32)) for v in func.params]
    return timer(default_schedule(func, target), target, args, min_repeat_ms=30)() * 1e6


def tuned_us(tuner, db, name: str, func, target) -> float:
    """MetaSchedule's best of ``func`` (its finalists timed again, as ``tune-kernels``
    does)."""
    from autoplace.deploy.kernel_db import record_seconds
    from autoplace.deploy.kernel_tuning import KernelTask

    tuner.tune(KernelTask(name, func, target, ("cpu",), 1, (0, 1), None))
    return min(record_seconds(r) for r in db.records(func, target)
               if not db.is_default(r, func, target)) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="squeezenet")
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--kernels", nargs="+",
                    default=["fused_conv2d17_add9_relu9", "fused_conv2d3_add2_relu2"])
    args = ap.parse_args()
    import tvm

    from autoplace.deploy.kernel_db import KernelDatabase
    from autoplace.deploy.kernel_tuning import KernelTuner, KernelTuning
    from autoplace.deploy.schedule import cores, use_threads
    from autoplace.deploy.targets import unit_target
    from autoplace.hardware.load import load_profile
    from autoplace.models import load_module

    profile = load_profile("host")
    target = unit_target(profile.unit("cpu"), profile)
    use_threads(cores(target))  # (the default's timing: the unit's threads, as the runner's)
    mod, graph = load_module(args.model)
    funcs = {gv.name_hint: f for gv, f in mod.functions.items()
             if isinstance(f, tvm.tirx.PrimFunc)}
    flops = {op.func: op.flops for op in graph.ops}
    db = KernelDatabase(tempfile.mkdtemp(prefix="conv-layouts-"), create=True)
    tuner = KernelTuner(db, KernelTuning(trials=args.trials))
    n = args.trials
    print(f"| kernel | MFLOP | NCHW default us | NCHW8c MS-{n} us | layout-free MS-{n} us "
          "| GFLOP/s (same order) | load |\n|---|---|---|---|---|---|---|")
    try:
        for name in args.kernels:
            func = funcs[name]
            times = [default_us(func, target),
                     tuned_us(tuner, db, name + "_NCHW8c", blocked(func, target), target),
                     tuned_us(tuner, db, name + "_free",
                              func.with_attr("layout_free_buffers", [1]), target)]
            rates = " / ".join(f"{flops[name] / t * 1e-3:.0f}" for t in times)
            print(f"| {name} | {flops[name] / 1e6:.1f} | "
                  + " | ".join(f"{t:.0f}" for t in times)
                  + f" | {rates} | {os.getloadavg()[0]:.2f} |", flush=True)
    finally:
        tuner.close()


if __name__ == "__main__":
    main()
