"""A model's conv kernels alone, with warm caches and with cold ones (issue 32: why a conv is
slower inside a run than alone).

    python experiments/bench_conv_cold.py [--model resnet50] [--threads 2] [--calls 30]
        [--flush-mb 64] [--kernels fused_conv2d3_add2 ...]

Each distinct conv kernel of the model is scheduled as the runtime's libraries schedule it
(the default schedule for the ``host`` profile's CPU, its weights packed once: the pack is
split off and not timed), compiled for this machine's CPU and called ``--calls`` times in
three ways, its fastest call (us) printed for each:

- ``warm``: back to back (what TVM's ``time_evaluator`` and a loop over one kernel see: its
  input, weights and output in cache);
- ``idle``: each call after the thread spins as long as a flush takes, touching nothing (the
  thread pool's workers may have gone to sleep: the control for ``cold``);
- ``cold``: each call after ``--flush-mb`` MB are written, evicting the kernel's data from
  every cache level (as in a run, where the ops between two uses of a buffer evict it).

``cold / warm`` is what cache misses cost the kernel (``idle / warm`` what waking the pool
does). The load is printed on each row. TVM's pool has ``--threads`` threads.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time

import numpy as np


def computes(model: str):
    """``(name, count in the model, MFLOP, compute PrimFunc)`` per distinct conv kernel,
    scheduled as the runtime schedules it for this host's CPU, and the target."""
    from autoplace.deploy.kernel_db import scheduled
    from autoplace.deploy.prepack import layout_free, split_packs
    from autoplace.deploy.targets import unit_target
    from autoplace.hardware.load import load_profile
    from autoplace.models import load_module
    from autoplace.runtime.program import read_program

    mod, graph = load_module(model)
    profile = load_profile("host")
    target = unit_target(profile.unit("cpu"), profile)
    program = read_program(mod)
    outputs = {k.func: len(k.outputs) for k in program.kernels}
    count, flops = {}, {}
    for op in graph.ops:
        count[op.func] = count.get(op.func, 0) + 1
        flops[op.func] = op.flops
    out = []
    for name in sorted(f for f in count if "conv" in f):
        func = scheduled(layout_free(mod[name], program.weight_params(name)), target, None)
        compute, _ = split_packs(func, outputs[name])
        out.append((name, count[name], flops[name] / 1e6, compute))
    return out, target


def arguments(compute, rng):
    """Random arguments of ``compute`` (a packed weight: random in its packed shape)."""
    import tvm

    return [tvm.runtime.tensor(rng.random([int(d) for d in p.ty.shape]).astype(str(p.ty.dtype)))
            for p in compute.params]


def timed(call, before, calls: int) -> float:
    """The fastest of ``calls`` calls (us), each after ``before()``."""
    best = float("inf")
    for _ in range(calls):
        before()
        t = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - t)
    return best * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--flush-mb", type=int, default=64)
    ap.add_argument("--kernels", nargs="*")
    args = ap.parse_args()
    os.environ["TVM_NUM_THREADS"] = str(args.threads)
    import tvm

    kernels, target = computes(args.model)
    junk = np.ones(args.flush_mb << 18, dtype=np.float32)
    t = time.perf_counter()
    junk += 1.0
    flush_s = time.perf_counter() - t

    def spin():
        end = time.perf_counter() + flush_s
        while time.perf_counter() < end:
            pass

    def flush():
        nonlocal junk
        junk += 1.0

    print(f"`python experiments/bench_conv_cold.py --model {args.model} --threads "
          f"{args.threads}`: a flush of {args.flush_mb} MB takes {flush_s * 1e3:.1f} ms\n")
    print("| kernel | count | MFLOP | warm us | idle us | cold us | idle / warm | cold / warm "
          "| load |")
    print("|---|---|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for name, count, mflop, compute in kernels:
        if args.kernels and name not in args.kernels:
            continue
        lib = tvm.compile(tvm.IRModule({"main": compute.with_attr("global_symbol", "main")}),
                          target=target).jit()
        call = functools.partial(lib["main"], *arguments(compute, rng))
        call()
        warm = timed(call, lambda: None, args.calls)
        idle = timed(call, spin, args.calls)
        cold = timed(call, flush, args.calls)
        print(f"| {name} | {count} | {mflop:.1f} | {warm:.0f} | {idle:.0f} | {cold:.0f} | "
              f"{idle / warm:.2f} | {cold / warm:.2f} | {os.getloadavg()[0]:.2f} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
