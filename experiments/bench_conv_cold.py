"""A model's conv kernels alone, with warm caches and with cold ones (issue 32: why a conv is
slower inside a run than alone).

    python experiments/bench_conv_cold.py [--model resnet50] [--threads 2] [--calls 30]
        [--flush-mb 64] [--kernels fused_conv2d3_add2 ...]
    git worktree add /tmp/old REV
    python experiments/bench_conv_cold.py --old /tmp/old [--model resnet50] [--rounds 3]

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

``--old TREE``: each kernel scheduled by the other tree's ``cpu_rules`` ("old") and by this
tree's ("new"), warm and cold, interleaved old, new for ``--rounds`` rounds of ``--calls``
calls, the fastest of each; the kernels whose schedules are the same are left out.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from pathlib import Path

import numpy as np


def computes(model: str, rules=None):
    """``(name, count in the model, MFLOP, compute PrimFunc)`` per distinct conv kernel,
    scheduled as the runtime schedules it for this host's CPU (by ``rules``' ``cpu_schedule``
    where given: another tree's), and the target."""
    from autoplace.deploy.targets import unit_target
    from autoplace.hardware.load import load_profile
    from autoplace.models import load_module
    from autoplace.runtime.layout import runtime_program
    from autoplace.runtime.libraries import split_kernel

    mod, graph = load_module(model)
    profile = load_profile("host")
    target = unit_target(profile.unit("cpu"), profile)
    program = runtime_program(mod, graph, profile)
    schedule = None if rules is None else lambda f, t: rules.cpu_schedule(f, t, True)
    count, flops = {}, {}
    for op in graph.ops:
        count[op.func] = count.get(op.func, 0) + 1
        flops[op.func] = op.flops
    return [(name, count[name], flops[name] / 1e6,
             split_kernel(program, name, target, schedule=schedule)[0])
            for name in sorted(f for f in count if "conv" in f)], target


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


def compiled(compute, target, rng):
    """A call of ``compute`` compiled for ``target`` on random arguments, made once."""
    import tvm

    lib = tvm.compile(tvm.IRModule({"main": compute.with_attr("global_symbol", "main")}),
                      target=target).jit()
    call = functools.partial(lib["main"], *arguments(compute, rng))
    call()
    return call


def flusher(mb: int):
    """``(flush, spin)``: write ``mb`` MB; spin as long as that takes, touching nothing;
    and the seconds a flush takes."""
    junk = np.ones(mb << 18, dtype=np.float32)

    def flush():
        np.add(junk, 1.0, out=junk)

    t = time.perf_counter()
    flush()
    seconds = time.perf_counter() - t

    def spin():
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    return flush, spin, seconds


def against_old(args, kernels, target, flush) -> None:
    """A row per kernel whose schedule differs in the other tree: warm and cold, old, new."""
    from bench_conv_schedules import old_rules

    old = {name: c for name, _, _, c in computes(args.model, old_rules(args.old))[0]}
    print("| kernel | count | MFLOP | warm old us | warm new us | new/old | cold old us | "
          "cold new us | new/old | load |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for name, count, mflop, compute in kernels:
        if (args.kernels and name not in args.kernels) or \
                old[name].script() == compute.script():
            continue
        calls = {"old": compiled(old[name], target, rng), "new": compiled(compute, target, rng)}
        best = {(v, w): float("inf") for v in calls for w in ("warm", "cold")}
        for _ in range(args.rounds):
            for v, call in calls.items():
                best[v, "warm"] = min(best[v, "warm"], timed(call, lambda: None, args.calls))
                best[v, "cold"] = min(best[v, "cold"], timed(call, flush, args.calls))
        cells = [f"{best['old', w]:.0f} | {best['new', w]:.0f} | "
                 f"{best['new', w] / best['old', w]:.2f}" for w in ("warm", "cold")]
        print(f"| {name} | {count} | {mflop:.1f} | " + " | ".join(cells)
              + f" | {os.getloadavg()[0]:.2f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--flush-mb", type=int, default=64)
    ap.add_argument("--kernels", nargs="*")
    ap.add_argument("--old", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    os.environ["TVM_NUM_THREADS"] = str(args.threads)
    kernels, target = computes(args.model)
    flush, spin, seconds = flusher(args.flush_mb)
    print(f"`python experiments/bench_conv_cold.py --model {args.model} --threads "
          f"{args.threads}{' --old ' + str(args.old) if args.old else ''}`: a flush of "
          f"{args.flush_mb} MB takes {seconds * 1e3:.1f} ms\n")
    if args.old is not None:
        return against_old(args, kernels, target, flush)
    print("| kernel | count | MFLOP | warm us | idle us | cold us | idle / warm | cold / warm "
          "| load |")
    print("|---|---|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for name, count, mflop, compute in kernels:
        if args.kernels and name not in args.kernels:
            continue
        call = compiled(compute, target, rng)
        warm = timed(call, lambda: None, args.calls)
        idle = timed(call, spin, args.calls)
        cold = timed(call, flush, args.calls)
        print(f"| {name} | {count} | {mflop:.1f} | {warm:.0f} | {idle:.0f} | {cold:.0f} | "
              f"{idle / warm:.2f} | {cold / warm:.2f} | {os.getloadavg()[0]:.2f} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
