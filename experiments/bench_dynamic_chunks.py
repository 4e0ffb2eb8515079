"""Kernels whose parallel loops are claimed in chunks against TVM's equal shares, on two
threads, with how unequal the two CPUs are in the same minute (issue 32;
``autoplace/deploy/dynamic_chunks.py``).

    python experiments/bench_dynamic_chunks.py [--rounds 10] [--pause 20] [--out FILE]

Each round, per kernel (the default schedule, the ``host`` profile's two-core ``cpu``
target), interleaved: the kernel with TVM's static shares on one thread pinned to CPU 0,
on one pinned to CPU 1, on two threads; and with claimed chunks on two threads; the fastest
of 3 x 10 calls (warm) of each. ``cpu1 / cpu0`` is how much slower CPU 1 ran the kernel
alone: on a VM a vCPU whose host core is busy with another tenant runs slower for minutes,
and a static share then waits for it. Rounds are ``--pause`` seconds apart, to meet more
than one minute's machine. Rows are printed as they come (the load beside them).
"""

from __future__ import annotations

import argparse
import os
import queue
import sys
import tempfile
from pathlib import Path

import numpy as np

#: (model, kernel): big convs of the bundled models (squeezenet's two largest)
KERNELS = (("squeezenet", "fused_conv2d17_add9_relu9"), ("squeezenet", "fused_conv2d3_add2_relu2"),
           ("resnet50", "fused_conv2d_add_relu"), ("resnet50", "fused_conv2d6_add5_relu4"),
           ("resnet50", "fused_conv2d18_add13_relu10"))


def libraries(tmp: Path) -> dict:
    """(model, kernel, variant) -> (library, its arguments)."""
    import tvm

    from autoplace.deploy.dynamic_chunks import CLAIM_SOURCE, dynamic_chunks
    from autoplace.deploy.targets import unit_target
    from autoplace.deploy.toolchain import export_library
    from autoplace.hardware.load import load_profile
    from autoplace.models import load_module
    from autoplace.runtime.layout import runtime_program
    from autoplace.runtime.libraries import split_kernel

    profile, rng, out = load_profile("host"), np.random.default_rng(0), {}
    target = unit_target(profile.unit("cpu"), profile)
    programs = {}
    for model, name in KERNELS:
        if model not in programs:
            programs[model] = runtime_program(*load_module(model), profile)
        compute, _ = split_kernel(programs[model], name, target)
        args = [rng.random([int(d) for d in p.ty.shape]).astype("float32")
                for p in compute.params]
        for variant, func in (("static", compute), ("chunks", dynamic_chunks(compute, 2))):
            lib = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}),
                              target=target)
            path = tmp / f"{name}-{variant}.so"
            export_library(lib, path, None, "bench", [CLAIM_SOURCE])
            out[model, name, variant] = (tvm.runtime.load_module(str(path)),
                                         [tvm.runtime.tensor(a) for a in args])
    return out


def best_us(lib, args) -> float:
    import tvm

    timer = lib.time_evaluator("main", tvm.cpu(), number=10, repeat=3)
    return min(timer(*args).results) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--pause", type=float, default=20.0)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    import time

    from autoplace.runtime.workers import Worker, pool_setup

    if len(os.sched_getaffinity(0)) < 2:
        sys.exit("needs two CPUs")
    cpu0, cpu1 = sorted(os.sched_getaffinity(0))[:2]
    pools = {"cpu0": Worker("cpu0", pool_setup(1, [cpu0])),
             "cpu1": Worker("cpu1", pool_setup(1, [cpu1])),
             "both": Worker("both", pool_setup(2, [cpu0, cpu1]))}

    def timed(pool: str, lib, largs) -> float:
        done: queue.SimpleQueue = queue.SimpleQueue()
        pools[pool].submit(lambda: done.put(best_us(lib, largs)))
        return done.get()

    rows = ["| round | kernel | cpu1 / cpu0 | static us | chunks us | chunks / static | load |",
            "|---|---|---|---|---|---|---|"]
    print("\n".join(rows), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        libs = libraries(Path(tmp))
        for r in range(1, args.rounds + 1):
            for model, name in KERNELS:
                static, chunks = libs[model, name, "static"], libs[model, name, "chunks"]
                alone = [timed(p, *static) for p in ("cpu0", "cpu1")]
                two = timed("both", *static), timed("both", *chunks)
                rows.append(f"| {r} | {model} {name} | {alone[1] / alone[0]:.2f} "
                            f"| {two[0]:.0f} | {two[1]:.0f} | {two[1] / two[0]:.2f} "
                            f"| {os.getloadavg()[0]:.2f} |")
                print(rows[-1], flush=True)
            time.sleep(args.pause if r < args.rounds else 0)
    for worker in pools.values():
        worker.close()
    if args.out:
        args.out.write_text("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
