"""The default schedule of a model's convs, this tree against another's, per kernel (issue 32).

    git worktree add /tmp/old REV
    python experiments/bench_conv_schedules.py /tmp/old [--model squeezenet]
        [--mcpu x86-64-v3 x86-64-v4] [--rounds 3]
    python experiments/bench_conv_schedules.py --plans [--model resnet50] [--kernels ...]

Per distinct conv kernel of the model (on the ``host`` profile's ``cpu``: two cores, a pool
of two threads), for each ``--mcpu`` this machine runs (LLVM's x86-64 levels: v3 is AVX2,
v4 AVX-512), the kernel scheduled by the other tree's ``cpu_rules`` ("old") and by this
tree's ("new"), each compiled and timed alone (TVM's ``time_evaluator``, the fastest of 5
repeats of at least 20 ms), interleaved old, new, old, new for ``--rounds`` rounds, the
fastest kept. A row per kernel, its count in the model, its MFLOP; a total row (each kernel
times its count); the load printed beside each row.

``--plans``: this tree's rules with each plan of :mod:`autoplace.deploy.tile_plan` forced
(the width's vector, channels in vectors of 8, channels in vectors of 16), for the first
``--mcpu``, per ``--kernels`` (default: the model's conv kernels), interleaved likewise.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

import numpy as np


def old_rules(tree: Path):
    """The other tree's ``cpu_rules`` module (it imports only TVM)."""
    spec = importlib.util.spec_from_file_location(
        "old_cpu_rules", tree / "autoplace" / "deploy" / "cpu_rules.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (its dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


def timer(func, target, args, min_repeat_ms: int = 20):
    """A callable giving the seconds of one call of ``func`` built for ``target`` (the
    fastest of 5 repeats of at least ``min_repeat_ms``)."""
    import tvm

    lib = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}),
                      target=target).jit()
    evaluate = lib.time_evaluator("main", tvm.cpu(), number=10, repeat=5,
                                  min_repeat_ms=min_repeat_ms)
    return lambda: min(evaluate(*args).results)


def runs(mcpu: str) -> bool:
    """Whether this machine runs code for LLVM's ``mcpu``."""
    import tvm

    features = {"x86-64-v4": "avx512f", "x86-64-v3": "avx2"}.get(mcpu)
    host = tvm.target.Target({"kind": "llvm", "mcpu": tvm.target.codegen.llvm_get_system_cpu()})
    return features is None or tvm.target.codegen.target_has_features(features, host)


def _plans():
    """Plan name -> a forced ``plan_reduction_tiles`` (None from one means: not possible;
    what the rules say of the kernel, its stride and group, is not asked)."""
    from autoplace.deploy import tile_plan

    return {"width": lambda e, lanes, r, **_: tile_plan.plan_tiles(e, lanes, r),
            "channels x8": lambda e, lanes, r, **_: tile_plan.plan_channel_tiles(
                e, 8, r, most=tile_plan.CHANNEL_TILE),
            "channels x16": lambda e, lanes, r, **_: tile_plan.plan_channel_tiles(
                e, 16, r, most=tile_plan.CHANNEL_TILE)}


def compare_plans(mod, names: list[str], mcpu: str, rounds: int) -> None:
    """A row per kernel: its time with each forced plan (us)."""
    import tvm

    from autoplace.deploy import cpu_rules

    target = tvm.target.Target({"kind": "llvm", "num-cores": 2, "mcpu": mcpu})
    plans, chosen = _plans(), cpu_rules.plan_reduction_tiles
    print(f"| kernel ({mcpu}) | " + " | ".join(plans) + " | load |")
    print("|---|" + "---|" * len(plans) + "---|")
    for name in names:
        func, rng = mod[name], np.random.default_rng(0)
        data = [tvm.runtime.tensor(rng.random([int(d) for d in p.ty.shape], dtype=np.float32))
                for p in func.params]
        timers = {}
        try:
            for label, plan in plans.items():
                cpu_rules.plan_reduction_tiles = plan
                timers[label] = timer(cpu_rules.cpu_schedule(func, target, True), target, data)
        finally:
            cpu_rules.plan_reduction_tiles = chosen
        best = {label: float("inf") for label in timers}
        for _ in range(rounds):
            for label, t in timers.items():
                best[label] = min(best[label], t() * 1e6)
        print(f"| {name} | " + " | ".join(f"{best[label]:.0f}" for label in plans)
              + f" | {os.getloadavg()[0]:.2f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", type=Path, nargs="?")
    ap.add_argument("--plans", action="store_true")
    ap.add_argument("--kernels", nargs="*")
    ap.add_argument("--model", default="squeezenet")
    ap.add_argument("--mcpu", nargs="+", default=["x86-64-v3", "x86-64-v4"])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    os.environ.setdefault("TVM_NUM_THREADS", "2")
    import tvm

    from autoplace.deploy import cpu_rules
    from autoplace.models import load_module

    mod, graph = load_module(args.model)
    count, flops = {}, {}
    for op in graph.ops:
        count[op.func] = count.get(op.func, 0) + 1
        flops[op.func] = op.flops
    convs = sorted(f for f in count if "conv" in f)
    mcpus = [m for m in args.mcpu if runs(m)]
    if args.plans:
        return compare_plans(mod, args.kernels or convs, mcpus[0], args.rounds)
    if args.old is None:
        ap.error("give the other tree (or --plans)")
    old = old_rules(args.old)
    print(f"`python experiments/bench_conv_schedules.py {args.old} --model {args.model}`: "
          f"{len(convs)} conv kernels, old = {args.old}, two threads\n")
    print("| kernel | count | MFLOP | " + " | ".join(f"{m} old us | {m} new us | new/old"
                                               for m in mcpus) + " | load |")
    print("|---|---|---|" + "---|---|---|" * len(mcpus) + "---|")
    total = {(m, v): 0.0 for m in mcpus for v in ("old", "new")}
    for name in convs:
        func, rng = mod[name], np.random.default_rng(0)
        data = [tvm.runtime.tensor(rng.random([int(d) for d in p.ty.shape], dtype=np.float32))
                for p in func.params]
        cells = []
        for m in mcpus:
            target = tvm.target.Target({"kind": "llvm", "num-cores": 2, "mcpu": m})
            timers = {"old": timer(old.cpu_schedule(func, target, True), target, data),
                      "new": timer(cpu_rules.cpu_schedule(func, target, True), target, data)}
            best = {v: float("inf") for v in timers}
            for _ in range(args.rounds):
                for v, t in timers.items():
                    best[v] = min(best[v], t() * 1e6)
            for v in best:
                total[m, v] += best[v] * count[name]
            cells.append(f"{best['old']:.0f} | {best['new']:.0f} | {best['new'] / best['old']:.2f}")
        print(f"| {name} | {count[name]} | {flops[name] / 1e6:.1f} | " + " | ".join(cells)
              + f" | {os.getloadavg()[0]:.2f} |", flush=True)
    cells = [f"{total[m, 'old']:.0f} | {total[m, 'new']:.0f} | "
             f"{total[m, 'new'] / total[m, 'old']:.2f}" for m in mcpus]
    print("| **all (each times its count)** | | | " + " | ".join(cells)
          + f" | {os.getloadavg()[0]:.2f} |")


if __name__ == "__main__":
    sys.exit(main())
