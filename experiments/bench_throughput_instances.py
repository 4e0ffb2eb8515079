"""Tarnawski et al.'s throughput instances: the tuner's best max-load against their DP's optimum.

    python experiments/bench_throughput_instances.py [--instances ...] [--trials 1000]

For each bundled ``throughput-*`` instance (their throughput inputs: one CPU, k accelerators):
their dynamic program (built from their source, tests/data/tarnawski/dp.cpp, MIT; needs g++
and Debian's nlohmann-json3-dev), which is optimal over contiguous splits, gives the optimum
max-load and its time; ``autoplace tune --objective throughput`` (simulator, seed 0, on one
core) gives its best period, which the importer makes their max-load (a test checks it on
their DP's own splits); their own evaluator (``dp -expert``) recomputes the max-load of our
best split. Beside them, the best contiguous split of one topological order
(:func:`autoplace.baselines.contiguous.best_split`, one of the tuner's baselines) and its time.
Prints a table with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from autoplace.baselines.contiguous import best_split
from autoplace.frontend.tarnawski import bundled_instances, load_instance, placement_split
from autoplace.measure.objective import objective_named
from autoplace.measure.simulator import Simulator
from autoplace.records.tuning_log import TuningLog, best, read
from autoplace.search import TuneConfig, tune
from autoplace.space import SearchSpace

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests" / "data" / "tarnawski" / "dp.cpp"
HEADER = Path("/usr/include/nlohmann/json.hpp")


def build_dp(tmp: Path) -> Path:
    (tmp / "src").mkdir()
    (tmp / "nlohmann").mkdir()
    (tmp / "nlohmann" / "json.hpp").symlink_to(HEADER)
    shutil.copy(SOURCE, tmp / "src" / "dp.cpp")
    subprocess.run(["g++", "-O3", "-o", str(tmp / "dp"), str(tmp / "src" / "dp.cpp")],
                   check=True)
    return tmp / "dp"


def their_optimum(exe: Path, instance: Path, timeout: float) -> tuple[float | None, float]:
    """Their DP's max-load (None if it timed out) and its wall time."""
    t0 = time.perf_counter()
    try:
        with instance.open() as stdin:
            out = subprocess.run([str(exe)], stdin=stdin, capture_output=True, text=True,
                                 check=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, time.perf_counter() - t0
    return float(json.loads(out.stdout)["maxLoad"]), time.perf_counter() - t0


def their_max_load(exe: Path, instance: Path, placement, tmp: Path) -> str:
    """Their evaluator's max-load of a placement (``-expert`` on its split)."""
    path = tmp / "split.json"
    path.write_text(json.dumps(placement_split(placement)))
    with instance.open() as stdin:
        out = subprocess.run([str(exe), "-expert", str(path)], stdin=stdin,
                             capture_output=True, text=True)
    found = re.search(r"max-load of the split: ([\d.e+-]+)", out.stderr)
    return found.group(1) if found else out.stderr.strip().splitlines()[-1]


def split(space: SearchSpace) -> tuple[float, float]:
    """The period (ms) of the best contiguous split, and the seconds it took."""
    t0 = time.perf_counter()
    placement = best_split(space)
    wall = time.perf_counter() - t0
    return Simulator(space).measure([placement])[0].period_s * 1e3, wall


def tuned(name: str, space: SearchSpace, trials: int, tmp: Path) -> dict:
    graph, profile = space.graph, space.profile
    log = tmp / f"{name}.jsonl"
    t0 = time.perf_counter()
    with TuningLog(log) as tl:
        tune(space, Simulator(space), tl, TuneConfig(trials=trials, seed=0,
                                                     objective="throughput"))
    top = best(read(log), objective=objective_named("throughput"))
    return {"ops": len(graph.ops), "fpgas": sum(u.execution == "block" for u in profile.units),
            "period_ms": top.result.period_s * 1e3, "placement": top.placement,
            "wall": time.perf_counter() - t0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = [n for n in bundled_instances() if n.startswith("throughput-")]
    ap.add_argument("--instances", nargs="+", default=names)
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--dp-timeout", type=float, default=900.0)
    ap.add_argument("--out", default=None, help="also write the table to this file")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        exe = build_dp(Path(tmp))
        for name in args.instances:
            path = bundled_instances()[name]
            optimum, dp_s = their_optimum(exe, path, args.dp_timeout)
            space = SearchSpace(*load_instance(name))
            ours, ours_s = split(space)
            r = tuned(name, space, args.trials, Path(tmp))
            theirs = their_max_load(exe, path, r["placement"], Path(tmp))
            ratio = f"{r['period_ms'] / optimum:.3f}" if optimum else "-"
            split_ratio = f"{ours / optimum:.3f}" if optimum else "-"
            rows.append(f"| {name} | {r['ops']} | {r['fpgas']} | "
                        f"{optimum if optimum is not None else 'timeout'} | {dp_s:.1f} | "
                        f"{ours:.4f} | {split_ratio} | {ours_s:.2f} | "
                        f"{r['period_ms']:.4f} | {theirs} | {ratio} | {r['wall']:.0f} |")
            print(rows[-1], flush=True)
    text = (f"`python experiments/bench_throughput_instances.py`, load average "
            f"{os.getloadavg()[0]:.2f}; simulator measurer, --objective throughput, --trials "
            f"{args.trials}, seed 0; max-load in their unit (ms)\n\n"
            "| instance | ops | accelerators | their DP optimum | DP s | contiguous split | "
            "split / optimum | split s | tuned max-load | their evaluator on it | tuned / "
            "optimum | tune s |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n"
            + "\n".join(rows))
    print("\n" + text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
