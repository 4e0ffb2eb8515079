"""How the pipeline search's ranking finds better plans sooner: best-so-far curves.

    python experiments/bench_pipeline_ranking.py [--trials 300] [--seeds 3]
        [--out experiments/results/bench_pipeline_ranking.md]

For each case (a bundled model on the bundled mesh with rows and cols changed) and each
ranking of :data:`autoplace.search.pipeline_moves.RANKINGS` (``none``: one move per trial, the
search before the cost model, the baseline; ``analytic``: the best of 8 moves by the
analytic period; ``xgb``: by the XGBoost cost model), the search runs from the DP's plan
with seeds ``0 .. seeds-1``. Printed: the best streamed throughput after N trials over the
DP's plan's (mean over seeds), its ratio to ``none``'s after 25 trials and after all, the
seconds per search, and the 1-minute load average (2 cores, shared).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from bench_pipeline import mesh_costs, mesh_search

ROOT = Path(__file__).resolve().parents[1]
CASES = [("squeezenet", 8, 8), ("inception_v1", 8, 8), ("resnet50", 16, 16),
         ("resnet50", 32, 32), ("resnet50", 96, 76)]
AT = (10, 25, 50, 100, 300)


def curve(costs, start, pes: int, ranking: str, trials: int, seed: int) -> np.ndarray:
    """Best streamed throughput so far after each trial, over the DP's plan's."""
    got = [t[3] for t in mesh_search(costs, [start], pes, trials, seed=seed, ranking=ranking)]
    best = np.maximum.accumulate(got)
    return np.concatenate([best, np.full(trials - len(best), best[-1])]) / got[0]


def case_rows(model: str, rows: int, cols: int, trials: int, seeds: int) -> list[dict]:
    from autoplace.models import load_graph
    from autoplace.pipeline import best_pipeline
    from autoplace.search.pipeline_moves import RANKINGS

    costs = mesh_costs(load_graph(model), rows, cols)
    start = best_pipeline(costs)
    out = []
    for ranking in RANKINGS[::-1]:  # none first: the baseline
        t0 = time.perf_counter()
        curves = [curve(costs, start, rows * cols, ranking, trials, s) for s in range(seeds)]
        out.append({"case": f"{model} {rows}x{cols}", "ranking": ranking,
                    "mean": np.mean(curves, axis=0),
                    "s": (time.perf_counter() - t0) / seeds, "load": os.getloadavg()[0]})
    return out


def table(rows: list[dict], trials: int) -> str:
    at = [n for n in AT if n <= trials]
    head = ("| case | ranking | " + " | ".join(f"@{n}" for n in at)
            + " | @25 / none | @all / none | s per search | load |")
    lines = [head, "|---" * (len(at) + 6) + "|"]
    base = {}
    for r in rows:
        m = r["mean"]
        if r["ranking"] == "none":
            base[r["case"]] = m
        b = base[r["case"]]
        lines.append(f"| {r['case']} | {r['ranking']} | "
                     + " | ".join(f"{m[n - 1]:.4f}" for n in at)
                     + f" | {m[min(25, trials) - 1] / b[min(25, trials) - 1]:.3f} | "
                       f"{m[-1] / b[-1]:.3f} | {r['s']:.2f} | {r['load']:.1f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=300)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--out", default=None, help="also write the table to this file")
    args = ap.parse_args()
    rows = []
    for model, r, c in CASES:
        rows += case_rows(model, r, c, args.trials, args.seeds)
        print(f"{model} {r}x{c} done", file=sys.stderr, flush=True)
    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip()
    text = (f"`python experiments/bench_pipeline_ranking.py` at {rev}, "
            f"{time.strftime('%Y-%m-%d')}: best streamed throughput after N trials over the "
            f"DP's plan's, mean of seeds 0-{args.seeds - 1}\n\n" + table(rows, args.trials))
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
