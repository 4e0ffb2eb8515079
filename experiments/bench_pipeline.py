"""Pipeline planning at scale: the stage model's dynamic program on meshes of 256 to 7,296 PEs.

    python experiments/bench_pipeline.py [--cases ...] [--out experiments/results/bench_pipeline.md]

Each case runs in a fresh subprocess on one core (``taskset -c 0``): the mesh is the bundled
``hwprofiles/mesh.toml`` with rows and cols changed; the graph a bundled model, or
``densenet121x3`` (three densenet121 one after another: 903 ops). Figures: planning time
(profile load, stage tables, :func:`best_pipeline`, the numba kernel compiled or loaded from
its cache beforehand) and peak RSS; throughput of the DP's plan, of the equal-FLOP baseline
beside it (their ratio) and the bound (``throughput_bound``); PEs used; the 1-minute load
average. The search over pipelines (1,000 trials) is not part of this table yet.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = [(model, mesh) for mesh in ((16, 16), (32, 32), (96, 76))
         for model in ("resnet50", "densenet121", "densenet121x3")]


def sequence(graph, times: int):
    """``times`` copies of ``graph`` one after another (each copy's first op reads the
    previous copy's last op)."""
    from autoplace.graph import Edge, OpGraph

    ops, edges, n = [], [], len(graph.ops)
    for c in range(times):
        ops += [type(op)(**{**op.__dict__, "name": f"{op.name}@{c}"}) for op in graph.ops]
        edges += [Edge(src=e.src + c * n, dst=e.dst + c * n, nbytes=e.nbytes)
                  for e in graph.edges]
        if c:
            edges.append(Edge(src=c * n - 1, dst=c * n, nbytes=graph.ops[-1].output_bytes))
    return OpGraph(name=f"{graph.name}x{times}", ops=tuple(ops), edges=tuple(edges))


def one_case(model: str, rows: int, cols: int) -> dict:
    """Plan one case in this process (run by the parent in a subprocess)."""
    from autoplace.models import load_graph
    from autoplace.pipeline import (
        MeshMachine,
        StageCosts,
        best_pipeline,
        evaluate,
        throughput_bound,
    )
    from autoplace.pipeline.baselines import equal_flops
    from autoplace.profile_io import load_profile

    base, times = (model.split("x")[0], int(model.split("x")[1])) if "x" in model else \
        (model, 1)
    graph = load_graph(base)
    graph = sequence(graph, times) if times > 1 else graph
    text = (ROOT / "hwprofiles" / "mesh.toml").read_text()
    text = re.sub(r"(?m)^rows = \d+", f"rows = {rows}", text)
    text = re.sub(r"(?m)^cols = \d+", f"cols = {cols}", text)
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as fh:
        fh.write(text)
    warm = StageCosts(load_graph("squeezenet"), MeshMachine.of(load_profile("mesh")))
    best_pipeline(warm)  # the kernel compiled or loaded, outside the timing
    t0 = time.perf_counter()
    costs = StageCosts(graph, MeshMachine.of(load_profile(fh.name)))
    plan = best_pipeline(costs)
    plan_s = time.perf_counter() - t0
    os.unlink(fh.name)
    naive = equal_flops(costs)
    out = {"ops": len(graph.ops), "plan_s": plan_s, "load": os.getloadavg()[0],
           "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
           "bound": throughput_bound(costs, rows * cols)}
    if plan is not None:
        f = evaluate(plan, costs)
        out.update(dp=f.throughput, stages=len(plan.stages), pes=plan.pes,
                   replicas=plan.replicas, used=f.pes_used)
    if naive is not None:
        out["naive"] = evaluate(naive, costs).throughput
    return out


def run(model: str, rows: int, cols: int) -> dict:
    cmd = ["taskset", "-c", "0", sys.executable, __file__, "--one", model, str(rows), str(cols)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if proc.returncode:
        return {"error": proc.stderr.strip().splitlines()[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def table(results: list[tuple[str, tuple[int, int], dict]]) -> str:
    lines = ["| graph (ops) | mesh (PEs) | plan s | peak RSS MiB | DP inferences/s | "
             "equal-FLOP | DP / equal-FLOP | DP / bound | stages x PEs x replicas (used) | "
             "load |", "|---" * 10 + "|"]
    for model, (rows, cols), r in results:
        if "error" in r:
            lines.append(f"| {model} | {rows}x{cols} | error: {r['error']} |" + " |" * 7)
            continue
        dp, naive = r.get("dp"), r.get("naive")
        shape = (f"{r['stages']} x {r['pes']} x {r['replicas']} ({r['used']})" if dp
                 else "no plan fits")
        lines.append(
            f"| {model} ({r['ops']}) | {rows}x{cols} ({rows * cols:,}) | {r['plan_s']:.2f} | "
            f"{r['rss_mib']:.0f} | {dp or 0:,.0f} | {naive or 0:,.0f} | "
            f"{dp / naive if dp and naive else float('nan'):.2f} | "
            f"{dp / r['bound'] if dp else float('nan'):.2f} | {shape} | {r['load']:.1f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--one", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help="also write the table to this file")
    args = ap.parse_args()
    if args.one:
        model, rows, cols = args.one
        print(json.dumps(one_case(model, int(rows), int(cols))))
        return
    results = []
    for model, (rows, cols) in CASES:
        results.append((model, (rows, cols), run(model, rows, cols)))
        print(f"{model} {rows}x{cols}: {results[-1][2]}", file=sys.stderr, flush=True)
    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip()
    text = (f"`python experiments/bench_pipeline.py` at {rev}, {time.strftime('%Y-%m-%d')}, "
            "each case in a subprocess on core 0 (load: last column)\n\n" + table(results))
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
