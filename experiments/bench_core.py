"""Core benchmark: simulator throughput, search overhead, wall time, memory, result quality.

For squeezenet, resnet50, densenet121 on the soc and mesh profiles, each case in a fresh
subprocess (so peak RSS is that case's own), pinned to one core:

    python experiments/bench_core.py [--trials 500] [--models ...] [--profiles ...]

Prints a markdown table. Goals the project is judged by: simulator >= 10,000 placements/s on
resnet50; search overhead <= 10 ms per trial.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

MODELS = ("squeezenet", "resnet50", "densenet121")
PROFILES = ("soc", "mesh")


def sim_throughput(space, sim, n: int, seed: int) -> float:
    """Random placements per second through ``Simulator.measure`` (batches of 1000)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    free = [k for k, m in enumerate(space.edge_modes) if len(m) > 1]
    placements = [
        space.decode([int(rng.integers(len(c))) for c in space.op_choices],
                     {k: space.edge_modes[k][int(rng.integers(len(space.edge_modes[k])))]
                      for k in free})
        for _ in range(n)
    ]
    t0 = time.perf_counter()
    for i in range(0, n, 1000):
        sim.measure(placements[i:i + 1000])
    return n / (time.perf_counter() - t0)


def run_case(model: str, hw: str, trials: int, seed: int) -> dict:
    """One benchmark case, in this process."""
    from autoplace.measure.simulator import Simulator
    from autoplace.models import load_graph
    from autoplace.profile_io import load_profile
    from autoplace.records import TuningLog
    from autoplace.search import TuneConfig, tune
    from autoplace.space import SearchSpace

    graph, profile = load_graph(model), load_profile(hw)
    space = SearchSpace(graph, profile)
    sim = Simulator(graph, profile, space=space)
    rate = sim_throughput(space, sim, 5000, seed)
    with tempfile.TemporaryDirectory() as d, TuningLog(os.path.join(d, "log.jsonl")) as log:
        res = tune(space, sim, log, TuneConfig(trials=trials, seed=seed))
    singles = [r.result.latency_s for n, r in res.baselines.items()
               if n.startswith("single:") and r.result.ok]
    return {
        "model": model, "profile": hw, "ops": len(graph.ops),
        "log10_space": space.log10_size, "sim_per_s": rate,
        "overhead_ms": (res.wall_s - res.measure_s) / res.measured * 1e3,
        "wall_s": res.wall_s, "trials": res.measured,
        "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "best_ms": res.best.result.latency_s * 1e3,
        "single_ms": min(singles) * 1e3 if singles else float("nan"),
        "greedy_ms": (res.baselines["greedy"].result.latency_s * 1e3
                      if res.baselines["greedy"].result.ok else float("nan")),
    }


def table(rows: list[dict]) -> str:
    head = ("| model | profile | ops | space | sim placements/s | overhead ms/trial | "
            "wall s (trials) | peak RSS MiB | best ms | best single ms | greedy ms | "
            "best/single | best/greedy |")
    lines = [head, "|" + "---|" * 13]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['profile']} | {r['ops']} | 10^{r['log10_space']:.0f} | "
            f"{r['sim_per_s']:,.0f} | {r['overhead_ms']:.1f} | {r['wall_s']:.1f} "
            f"({r['trials']}) | {r['rss_mib']:.0f} | {r['best_ms']:.3f} | "
            f"{r['single_ms']:.3f} | {r['greedy_ms']:.3f} | "
            f"{r['best_ms'] / r['single_ms']:.3f} | {r['best_ms'] / r['greedy_ms']:.3f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--profiles", nargs="+", default=list(PROFILES))
    ap.add_argument("--case", nargs=2, help=argparse.SUPPRESS)  # internal: run one case
    args = ap.parse_args()
    if args.case:
        print(json.dumps(run_case(*args.case, args.trials, args.seed)))
        return
    rows = []
    for model in args.models:
        for hw in args.profiles:
            cmd = ["taskset", "-c", "0", sys.executable, __file__, "--case", model, hw,
                   "--trials", str(args.trials), "--seed", str(args.seed)]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            rows.append(json.loads(out.strip().splitlines()[-1]))
            print(f"done {model} {hw}", file=sys.stderr)
    print(table(rows))


if __name__ == "__main__":
    main()
