"""The tuner on the published latency instances of Tarnawski et al. (NeurIPS 2020) against
their own greedy, built from their source (tests/data/tarnawski/greedy.cpp; needs g++ and
Debian's nlohmann-json3-dev).

    python experiments/bench_instances.py [--instances ...] [--seeds 0] [--trials 1000]

Per instance and seed: their greedy's objective (as their program prints it), our ``fill``
baseline, the tuner's best after 64, 256 and ``--trials`` measurements (baselines included,
simulator measurer, default settings), best / their greedy, their own evaluator's latency
of that best (``greedy -computeLatency``: it must agree), whether the final best is a
one-op local optimum (no single-op move or copy flip is faster in the simulator), the wall
time. The goal of issue 12: at 1,000 trials, match or beat their greedy on every instance.
Prints a markdown table and the machine's load; one core is enough.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from autoplace.baselines.named import fill
from autoplace.frontend.tarnawski import bundled_instances, load_instance, placement_split
from autoplace.measure.simulator import Simulator
from autoplace.records.tuning_log import TuningLog, best, read
from autoplace.search import TuneConfig, tune
from autoplace.search.descent import moves, predicted
from autoplace.space import SearchSpace

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests" / "data" / "tarnawski" / "greedy.cpp"
HEADER = Path("/usr/include/nlohmann/json.hpp")
BUDGETS = (64, 256)


def build_greedy(tmp: Path) -> Path:
    (tmp / "src").mkdir()
    (tmp / "nlohmann").mkdir()
    (tmp / "nlohmann" / "json.hpp").symlink_to(HEADER)
    shutil.copy(SOURCE, tmp / "src" / "greedy.cpp")
    subprocess.run(["g++", "-O2", "-o", str(tmp / "greedy"), str(tmp / "src" / "greedy.cpp")],
                   check=True)
    return tmp / "greedy"


def their_greedy(exe: Path, instance: Path) -> float:
    with instance.open() as stdin:
        out = subprocess.run([str(exe)], stdin=stdin, capture_output=True, text=True, check=True)
    return float(json.loads(out.stdout)["totalLatency"])


def their_evaluation(exe: Path, instance: Path, placement, tmp: Path) -> str:
    """Their evaluator's latency of a placement (their ``-computeLatency`` on its split),
    as their program prints it, or its failure message."""
    path = tmp / "split.json"
    path.write_text(json.dumps(placement_split(placement)))
    with instance.open() as stdin:
        out = subprocess.run([str(exe), "-computeLatency", str(path)], stdin=stdin,
                             capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1].split(": ")[-1]


def one_run(space: SearchSpace, trials: int, seed: int, tmp: Path) -> dict:
    log = tmp / f"{space.graph.name}-{seed}.jsonl"
    t0 = time.perf_counter()
    with TuningLog(log) as tl:
        tune(space, Simulator(space), tl, TuneConfig(trials=trials, seed=seed))
    wall = time.perf_counter() - t0
    records = read(log)
    running, curve = math.inf, []
    for r in records:
        running = min(running, r.result.latency_s if r.result.ok else math.inf)
        curve.append(running * 1e3)
    top = best(records)
    c, m = space.encode([top.placement])
    C, M = moves(space, c[0], m[0])
    faster = int((predicted(space, C, M) < top.result.latency_s).sum())
    at = {b: curve[min(b, len(curve)) - 1] for b in BUDGETS}
    return {"at": at, "final": curve[-1], "n": len(curve), "faster": faster, "wall": wall,
            "placement": top.placement}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", nargs="+", default=[
        n for n in bundled_instances() if not n.startswith("throughput-")])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--trials", type=int, default=1000)
    args = ap.parse_args()
    rows, wins = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        exe = build_greedy(Path(tmp))
        for name in args.instances:
            graph, profile = load_instance(name)
            space = SearchSpace(graph, profile)
            greedy_ms = their_greedy(exe, bundled_instances()[name])
            fill_ms = Simulator(space).measure([fill(space)])[0].latency_s * 1e3
            for seed in args.seeds:
                r = one_run(space, args.trials, seed, Path(tmp))
                theirs = their_evaluation(exe, bundled_instances()[name], r["placement"],
                                          Path(tmp))
                wins += r["final"] <= greedy_ms * (1 + 1e-9)
                accelerators = sum(u.execution == "block" for u in profile.units)
                rows.append(
                    f"| {name} | {len(graph.ops)} | {accelerators} | {seed} | {greedy_ms:.2f} | "
                    f"{fill_ms:.2f} | {r['at'][64]:.2f} | "
                    f"{r['at'][256]:.2f} | {r['final']:.2f} ({r['n']}) | "
                    f"{r['final'] / greedy_ms:.4f} | {theirs} | "
                    f"{r['faster'] == 0} ({r['faster']}) | "
                    f"{r['wall']:.0f} |")
    print(f"load average {os.getloadavg()[0]:.2f}; simulator measurer, --trials {args.trials}, "
          "times in their unit (ms)\n")
    print("| instance | ops | accelerators | seed | their greedy | fill | best @64 | best @256 "
          "| best (measured) | best / greedy | their evaluator on the best | local optimum "
          "(faster moves) | wall s |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print(f"\nmatch or beat their greedy: {wins} of {len(rows)} runs")


if __name__ == "__main__":
    main()
