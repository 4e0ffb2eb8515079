"""Each kernel's time in the model: default schedules against a kernel database (issue 32).

    python experiments/bench_kernel_db_in_model.py MODEL UNIT DB [--rounds 15] [--over 20]

Two builds of ``MODEL`` with every op on ``UNIT`` of the ``host`` profile, run by
autoplace's runtime on the same random input (seed 0): one with the default schedules, one
with the kernels of the MetaSchedule database ``DB`` (``autoplace tune-kernels``). Their
outputs are checked equal to each other; then they run in turn, ``--rounds`` times, each
run traced (``Runtime.trace``: when each kernel started and ended). Printed: the fastest
wall time of each build, the sum of each kernel's fastest time, and the kernels whose
fastest times differ by more than ``--over`` us, slowest first. What a database does to a
model, kernel by kernel, where it runs: what ``tune-kernels`` measured alone and what
the model gets can differ (a database tuned beside other load).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import numpy as np


def fastest_kernels(rts: dict, placed: dict, rounds: int) -> dict[str, tuple]:
    """Per build: (fastest wall ms, kernel name -> sum over its calls of each call's fastest
    us) of ``rounds`` traced runs, the builds in turn each round."""
    best = {k: None for k in rts}
    wall = {k: float("inf") for k in rts}
    for _ in range(rounds):
        for k, rt in rts.items():
            trace = rt.trace(placed[k])
            wall[k] = min(wall[k], trace.wall_ns / 1e6)
            took = np.array(trace.end) - np.array(trace.start)
            best[k] = took if best[k] is None else np.minimum(best[k], took)
    out = {}
    for k, rt in rts.items():
        per: dict[str, float] = {}
        for i, work in enumerate(placed[k].schedule.work):
            if work.kind == "op":
                name = rt.program.kernels[work.op].func
                per[name] = per.get(name, 0.0) + best[k][i] / 1e3
        out[k] = (wall[k], per)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("unit")
    ap.add_argument("db")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--over", type=float, default=20.0, help="us of difference shown")
    args = ap.parse_args()
    from autoplace.deploy.kernel_db import KernelDatabase
    from autoplace.hardware.load import load_profile
    from autoplace.models import load_module
    from autoplace.runtime import Runtime

    profile = load_profile("host")
    os.sched_setaffinity(0, profile.unit(args.unit).cpus or os.sched_getaffinity(0))
    mod, graph = load_module(args.model)
    with tempfile.TemporaryDirectory() as cache:
        rts = {"default": Runtime(mod, graph, profile, cache_dir=Path(cache) / "default"),
               "database": Runtime(mod, graph, profile, cache_dir=Path(cache) / "database",
                                   kernels=KernelDatabase(args.db))}
        try:
            report(args, rts)
        finally:
            for rt in rts.values():
                rt.close()


def report(args, rts: dict) -> None:
    """Check the builds' outputs equal, time them, print the tables."""
    placed = {k: rt.assemble(rt.space.uniform(args.unit)) for k, rt in rts.items()}
    rng = np.random.default_rng(0)
    xs = [rng.random(s.shape).astype(s.dtype) for s in rts["default"].program.inputs]
    outs = [rt.run(placed[k], xs) for k, rt in rts.items()]
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)
    timed = fastest_kernels(rts, placed, args.rounds)
    print(f"{args.model} on {args.unit}, {args.db}, {args.rounds} rounds, load "
          f"{os.getloadavg()[0]:.2f}\n")
    print("| build | fastest wall ms | kernels' sum ms |\n|---|---|---|")
    for name, (wall, per) in timed.items():
        print(f"| {name} | {wall:.2f} | {sum(per.values()) / 1e3:.2f} |")
    per_d, per_t = timed["default"][1], timed["database"][1]
    print("\n| kernel | default us | database us | database / default |\n|---|---|---|---|")
    for name in sorted(per_d, key=lambda n: per_d[n] - per_t[n]):
        if abs(per_t[name] - per_d[name]) > args.over:
            print(f"| {name} | {per_d[name]:.1f} | {per_t[name]:.1f} | "
                  f"{per_t[name] / per_d[name]:.2f} |")


if __name__ == "__main__":
    main()
