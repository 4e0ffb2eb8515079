"""Pipeline planning at scale: the stage model's dynamic program on meshes of 256 to 7,296 PEs.

    python experiments/bench_pipeline.py [--cases ...] [--out experiments/results/bench_pipeline.md]

Each case runs in a fresh subprocess on one core (``taskset -c 0``): the mesh is the bundled
``hwprofiles/mesh.toml`` with rows and cols changed; the graph a bundled model, or
``densenet121x3`` (three densenet121 one after another: 903 ops); ``+overlap``: the mesh's
PEs run ops of different inferences on their ARM core and NPU at once (``units_overlap``,
where the search moves ops between units). Figures: planning time
(profile load, stage tables, :func:`best_pipeline`, the numba kernel compiled or loaded from
its cache beforehand) and peak RSS; throughput of the DP's plan, of the equal-FLOP baseline
beside it (their ratio) and the bound (``throughput_bound``); PEs used; the 1-minute load
average. Then the search over pipelines (``--trials``, default 1,000, from the DP's plan):
its time, trials (of which streamed: the others did not fit or were bounded by their analytic
throughput), peak RSS after it, the throughput of the DP's plan and of the best plan measured by
their streams (two inferences in flight per stage), their ratio and the best's against the
bound. "plan + search s" is the issue's budget (120 s, 2 GB for 7,296 PEs and ~1,000 ops).
The search is the default one (each trial the best of 8 moves as the XGBoost cost model ranks
them); beside it, as ratios, the search before it ranked moves (``ranking="none"``: one move
per trial), after 100 trials and after all of them, and the searches without their ``unit``
move (every op on its default unit, as before units were searched) and without their
``weights`` and ``spill`` moves (the DP's plans' weights left as they are: all held, or all
streamed from the shared memory; every cut over its link), untimed. "ops streaming": how
many ops stream their weights in the DP's plan and in the tuned one (the bundled 4 x 4 mesh
holds none of these networks' weights); "cuts spilled": how many cuts of the tuned plan
pass through the shared memory.
"vs previous": the case's plan + search time over the one in the results file this run
replaces (``--out``).
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
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = [(model, mesh) for mesh in ((16, 16), (32, 32), (96, 76))
         for model in ("resnet50", "densenet121", "densenet121x3")] + [
    ("resnet50+overlap", (16, 16)), ("densenet121+overlap", (16, 16)),
    ("resnet50", (4, 4)), ("densenet121", (4, 4)), ("inception_v1", (4, 4))]


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


def mesh_costs(graph, rows: int, cols: int, *, overlap: bool = False):
    """The stage model of ``graph`` on the bundled mesh with ``rows`` x ``cols`` PEs (whose
    units run ops of different inferences at once with ``overlap``)."""
    from autoplace.hardware.load import load_profile
    from autoplace.pipeline import MeshMachine, StageCosts

    text = (ROOT / "hwprofiles" / "mesh.toml").read_text()
    if overlap:
        text = re.sub(r"(?m)^\[mesh\]$", "[mesh]\nunits_overlap = true", text)
    text = re.sub(r"(?m)^rows = \d+", f"rows = {rows}", text)
    text = re.sub(r"(?m)^cols = \d+", f"cols = {cols}", text)
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as fh:
        fh.write(text)
    try:
        return StageCosts(graph, MeshMachine.of(load_profile(fh.name)))
    finally:
        os.unlink(fh.name)


def one_case(model: str, rows: int, cols: int, trials: int) -> dict:
    """Plan one case in this process (run by the parent in a subprocess)."""
    from autoplace.hardware.load import load_profile
    from autoplace.models import load_graph
    from autoplace.pipeline import (
        MeshMachine,
        StageCosts,
        best_pipeline,
        best_pipelines,
        evaluate,
        throughput_bound,
    )
    from autoplace.pipeline.equal_flops import equal_flops

    model, overlap = model.removesuffix("+overlap"), model.endswith("+overlap")
    base, times = (model.split("x")[0], int(model.split("x")[1])) if "x" in model else \
        (model, 1)
    graph = load_graph(base)
    graph = sequence(graph, times) if times > 1 else graph
    warm = StageCosts(load_graph("squeezenet"), MeshMachine.of(load_profile("mesh")))
    best_pipeline(warm)  # the kernel compiled or loaded, outside the timing
    t0 = time.perf_counter()
    costs = mesh_costs(graph, rows, cols, overlap=overlap)
    plans = best_pipelines(costs)
    plan = plans[0] if plans else None
    plan_s = time.perf_counter() - t0
    naive = equal_flops(costs)
    out = {"ops": len(graph.ops), "plan_s": plan_s, "load": os.getloadavg()[0],
           "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
           "bound": throughput_bound(costs, rows * cols)}
    if plan is not None:
        f = evaluate(plan, costs)
        out.update(dp=f.throughput, stages=len(plan.stages), pes=plan.pes,
                   replicas=plan.replicas, used=f.pes_used, dp_streaming=streaming(plan))
    if naive is not None:
        out["naive"] = evaluate(naive, costs).throughput
    if plan is not None and trials:
        out.update(search(costs, plans, rows * cols, trials))
        out["rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def mesh_search(costs, starts, pes: int, trials: int, *, seed: int = 0,
                ranking: str = "xgb", moves=None) -> list[tuple[int, str, object, float]]:
    """The trials of the pipeline search (the tuning loop over the plan space, the plans
    ``starts`` first, ``trials`` in all): (trial, move, plan, streamed throughput or 0)."""
    from autoplace.hardware.load import load_profile
    from autoplace.pipeline.moves import MOVES
    from autoplace.pipeline.plan_space import PlanSpace
    from autoplace.records.tuning_log import TuningLog, read
    from autoplace.search.mesh import mesh_config, tune_mesh
    from autoplace.search.pipeline_moves import PipelineMoves

    starts = list(starts)[:trials]
    space = PlanSpace(costs, load_profile("mesh"), pes, starts)  # (the profile names the log)
    strategy = PipelineMoves(space, seed=seed, ranking=ranking, moves=moves or MOVES)
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "trials.jsonl"
        with TuningLog(path) as log, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a neighbourhood that runs dry: fewer trials
            tune_mesh(space, log, mesh_config(trials=trials - len(starts), seed=seed),
                      strategy=strategy)
        return [(r.trial, r.strategy, space.candidate_of(r.pipeline, r.placement),
                 1 / r.result.period_s if r.result.period_s else 0.0) for r in read(path)]


def best_of(trials) -> tuple:
    """The trial of the highest streamed throughput (the first of equals)."""
    return max(trials, key=lambda t: (t[3], -t[0]))


def search(costs, plans, pes: int, trials: int) -> dict:
    """The pipeline search from the DP's plans: its time and the streamed throughputs."""
    from autoplace.pipeline.moves import MOVES, SHARED_MOVES

    t0 = time.perf_counter()
    done = mesh_search(costs, plans, pes, trials)
    best = best_of(done)
    out = {"search_s": time.perf_counter() - t0, "trials": len(done),
           "streamed": sum(1 for t in done if t[3] > 0),
           "dp_stream": max(t[3] for t in done if t[2] in plans),
           "tuned": best[3], "tuned_100": best_after(done, 100),
           "tuned_streaming": streaming(best[2]),
           "tuned_spilled": len(best[2].spilled or ())}
    unranked = mesh_search(costs, plans, pes, trials, ranking="none")
    out["unranked"] = best_of(unranked)[3]
    out["unranked_100"] = best_after(unranked, 100)
    for name, left_out in (("default_units", ("unit",)), ("no_weights", SHARED_MOVES)):
        moves = tuple(m for m in MOVES if m not in left_out)
        out[name] = best_of(mesh_search(costs, plans, pes, trials, moves=moves))[3]
    return out


def streaming(plan) -> int:
    """How many ops of ``plan`` stream their weights."""
    return sum(len(st.streamed or ()) for st in plan.stages)


def best_after(trials, n: int) -> float:
    """The best streamed throughput among a search's first ``n`` trials."""
    return max(t[3] for t in trials if t[0] < n)


def run(model: str, rows: int, cols: int, trials: int) -> dict:
    cmd = ["taskset", "-c", "0", sys.executable, __file__, "--one", model, str(rows), str(cols),
           str(trials)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if proc.returncode:
        return {"error": proc.stderr.strip().splitlines()[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def previous_times(path: Path) -> dict[tuple[str, str], float]:
    """``(graph (ops), mesh (PEs)) -> plan + search s`` of a results file this script wrote
    (empty if there is none)."""
    if not path.exists():
        return {}
    rows = [[cell.strip() for cell in line.split("|")[1:-1]]
            for line in path.read_text().splitlines() if line.startswith("| ")]
    if not rows or "plan + search s" not in rows[0]:
        return {}
    col = rows[0].index("plan + search s")
    return {(r[0], r[1]): float(r[col]) for r in rows[1:] if len(r) > col and _number(r[col])}


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def table(results: list[tuple[str, tuple[int, int], dict]],
          previous: dict[tuple[str, str], float]) -> str:
    lines = ["| graph (ops) | mesh (PEs) | plan s | DP inferences/s | equal-FLOP | DP / "
             "equal-FLOP | DP / bound | stages x PEs x replicas (used) | trials (streamed) | "
             "plan + search s | vs previous | peak RSS MiB | DP streamed | tuned streamed | "
             "tuned / DP | tuned / bound | @100: tuned / unranked | tuned / unranked | "
             "tuned / default units | tuned / no weights, spill moves | ops streaming (DP, "
             "tuned) | cuts spilled (tuned) | load |", "|---" * 23 + "|"]
    nan = float("nan")
    for model, (rows, cols), r in results:
        if "error" in r:
            lines.append(f"| {model} | {rows}x{cols} | error: {r['error']} |" + " |" * 20)
            continue
        dp, naive, tuned = r.get("dp"), r.get("naive"), r.get("tuned")
        shape = (f"{r['stages']} x {r['pes']} x {r['replicas']} ({r['used']})" if dp
                 else "no plan fits")
        graph, mesh = f"{model} ({r['ops']})", f"{rows}x{cols} ({rows * cols:,})"
        took = r["plan_s"] + r.get("search_s", 0)
        before = previous.get((graph, mesh))
        lines.append(
            f"| {graph} | {mesh} | {r['plan_s']:.2f} | "
            f"{dp or 0:,.0f} | {naive or 0:,.0f} | "
            f"{dp / naive if dp and naive else nan:.2f} | "
            f"{dp / r['bound'] if dp else nan:.2f} | {shape} | {r.get('trials', 0)} "
            f"({r.get('streamed', 0)}) | "
            f"{took:.1f} | {took / before if before else nan:.2f} | {r['rss_mib']:.0f} | "
            f"{r.get('dp_stream') or 0:,.0f} | {tuned or 0:,.0f} | "
            f"{tuned / r['dp_stream'] if tuned and r.get('dp_stream') else nan:.3f} | "
            f"{tuned / r['bound'] if tuned else nan:.2f} | "
            f"{r['tuned_100'] / r['unranked_100'] if tuned else nan:.3f} | "
            f"{tuned / r['unranked'] if tuned else nan:.3f} | "
            f"{tuned / r['default_units'] if tuned else nan:.3f} | "
            f"{tuned / r['no_weights'] if tuned and r['no_weights'] else nan:.3f} | "
            f"{r.get('dp_streaming', 0)}, {r.get('tuned_streaming', 0)} | "
            f"{r.get('tuned_spilled', 0)} | {r['load']:.1f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--one", nargs=4, help=argparse.SUPPRESS)
    ap.add_argument("--trials", type=int, default=1000, help="search trials per case")
    ap.add_argument("--cases", nargs="*", default=None,
                    help="MODEL:ROWSxCOLS cases (default: every model on every mesh)")
    ap.add_argument("--out", default=None, help="also write the table to this file")
    args = ap.parse_args()
    if args.one:
        model, rows, cols, trials = args.one
        print(json.dumps(one_case(model, int(rows), int(cols), int(trials))))
        return
    cases = CASES if args.cases is None else [
        (c.split(":")[0], tuple(map(int, c.split(":")[1].split("x")))) for c in args.cases]
    results = []
    for model, (rows, cols) in cases:
        results.append((model, (rows, cols), run(model, rows, cols, args.trials)))
        print(f"{model} {rows}x{cols}: {results[-1][2]}", file=sys.stderr, flush=True)
    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip()
    previous = previous_times(Path(args.out)) if args.out else {}
    text = (f"`python experiments/bench_pipeline.py` at {rev}, {time.strftime('%Y-%m-%d')}, "
            "each case in a subprocess on core 0 (load: last column)\n\n"
            + table(results, previous))
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
