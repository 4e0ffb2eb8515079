"""Blocked convs' register tiles: this tree's plan against the previous tie rule (issue 32).

    python experiments/bench_block_tiles.py [--models resnet50 densenet121] [--threads 1 2]
        [--rounds 5] [--out FILE]

:func:`~autoplace.deploy.tile_plan.plan_block_tiles` tiles a conv onto channel blocks (NCHWc)
with up to 4 blocks by a divisor of the width. Of two tiles of as many accumulators it now
takes the one of more rows (a width of 14: 2 x 7); before, the first found, the width alone
before any rows (1 x 14), and 2 rows before 4. Per model and thread count, every kernel of
the runtime's program (``host``'s ``cpu`` for two threads, ``core0`` for one, the process
then on CPU 0) whose schedule the rule changes is built both ways (its packs split off, as
the runtime's libraries hold it) and timed alone (TVM's ``time_evaluator``, 3 repeats of 10
calls), the two interleaved for ``--rounds`` rounds, the fastest kept. A row per kernel and
a total row, the load printed.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
from pathlib import Path

import numpy as np


def previous_plan(extents: list[int], lanes: int, registers: int):
    """The plan before the tie rule: of as many accumulators, the first found."""
    from autoplace.deploy import tile_plan

    tiles = tile_plan.plan_block_tiles(extents, lanes, registers)
    if registers < 32 or len(extents) < 4:
        return tiles
    width = tile_plan.largest_divisor(extents[-2], registers // 2 - 2)
    best = (width, 1, width)
    for rows in range(2, tile_plan.BLOCK_ROWS + 1):
        if extents[-4] % rows == 0:
            columns = tile_plan.largest_divisor(
                extents[-2], min(registers // 2 - 2, tile_plan.BLOCK_TILE // rows))
            best = max(best, (rows * columns, rows, columns), key=lambda b: b[0])
    _, rows, columns = best
    if rows == 1:
        return dataclasses.replace(tiles, register_tile=columns, row=None, row_tile=1)
    return dataclasses.replace(tiles, register_tile=columns, row=len(extents) - 4,
                               row_tile=rows)


def builds(model: str, threads: int, tmp: Path) -> dict:
    """kernel -> {"previous": (library, args), "this": ...} for every kernel the rule
    changes."""
    import tvm

    from autoplace.deploy import cpu_rules
    from autoplace.hardware.load import load_profile
    from autoplace.models import load_module
    from autoplace.runtime.layout import runtime_program
    from autoplace.runtime.libraries import split_kernel

    profile = load_profile("host")
    target = tvm.target.Target(profile.unit("core0" if threads == 1 else "cpu").target)
    program = runtime_program(*load_module(model), profile)
    this, out = cpu_rules.plan_block_tiles, {}
    for name in sorted(program.funcs):
        try:
            cpu_rules.plan_block_tiles = previous_plan
            before = split_kernel(program, name, target)[0]
        finally:
            cpu_rules.plan_block_tiles = this
        after = split_kernel(program, name, target)[0]
        if before.script() != after.script():
            out[name] = {"previous": _built(before, target, tmp / f"{name}-p.so"),
                         "this": _built(after, target, tmp / f"{name}-t.so")}
    return out


def _built(func, target, path: Path):
    import tvm

    tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}),
                target=target).export_library(str(path))
    rng = np.random.default_rng(0)
    args = [tvm.runtime.tensor(rng.standard_normal([int(d) for d in p.ty.shape])
                               .astype("float32")) for p in func.params]
    return tvm.runtime.load_module(str(path)), args


def rows(model: str, threads: int, rounds: int) -> list[dict]:
    import tvm

    with tempfile.TemporaryDirectory() as tmp:
        kernels = builds(model, threads, Path(tmp))
        best = {(k, v): float("inf") for k in kernels for v in ("previous", "this")}
        for _ in range(rounds):
            for (name, variant) in best:
                lib, args = kernels[name][variant]
                timer = lib.time_evaluator("main", tvm.cpu(), number=10, repeat=3)
                best[name, variant] = min(best[name, variant], min(timer(*args).results))
    out = [{"model": model, "threads": threads, "kernel": name,
            "previous us": best[name, "previous"] * 1e6, "this us": best[name, "this"] * 1e6}
           for name in kernels]
    total = {"model": model, "threads": threads, "kernel": f"all {len(out)}",
             "previous us": sum(r["previous us"] for r in out),
             "this us": sum(r["this us"] for r in out)}
    return [*out, total] if out else []


def table(rows_: list[dict]) -> str:
    lines = ["| model | threads | kernel | previous us | this us | this / previous | load |",
             "|---|---|---|---|---|---|---|"]
    for r in rows_:
        lines.append(f"| {r['model']} | {r['threads']} | {r['kernel']} | "
                     f"{r['previous us']:.0f} | {r['this us']:.0f} | "
                     f"{r['this us'] / r['previous us']:.2f} | {r['load']:.2f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["resnet50", "densenet121"])
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if "TVM_NUM_THREADS" not in os.environ:  # one process per thread count (TVM's pool)
        import subprocess

        for threads in args.threads:
            env = {**os.environ, "TVM_NUM_THREADS": str(threads)}
            subprocess.run([sys.executable, __file__, "--models", *args.models, "--threads",
                            str(threads), "--rounds", str(args.rounds),
                            *(["--out", str(args.out)] if args.out else [])],
                           env=env, check=True)
        return
    (threads,) = args.threads
    if threads == 1:
        os.sched_setaffinity(0, {0})  # the core0 unit's CPU
    found = []
    for model in args.models:
        found += [r | {"load": os.getloadavg()[0]} for r in rows(model, threads, args.rounds)]
    text = table(found)
    print(text, flush=True)
    if args.out:
        with args.out.open("a") as f:
            f.write(text + "\n\n")


if __name__ == "__main__":
    main()
