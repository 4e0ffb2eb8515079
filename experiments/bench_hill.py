"""The tuner against its yardsticks at an equal number of measurements: random-mutation hill
climbing and steepest descent from HEFT.

All start from the same baselines (and HEFT); the tuner runs its defaults (evolution ranked
by XGBoost, one-op descent in the last eighth), the yardsticks ``--sampler hill|steepest
--descent 0`` (steepest descent stops at a one-op local optimum, often before the budget).
Per case, seed and budget: each one's best, and whether a yardstick beats the tuner.
Prints a markdown table and the machine's load; one core is enough.

    python experiments/bench_hill.py [--budgets 64 256] [--seeds 0 1 2] [--cases m/hw ...]
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
from pathlib import Path

from autoplace.baselines.named import baselines
from autoplace.hardware.load import load_profile
from autoplace.measure.simulator import Simulator
from autoplace.models import load_graph
from autoplace.records.tuning_log import TuningLog, read
from autoplace.search import TuneConfig, tune
from autoplace.space import SearchSpace

CASES = ("squeezenet/soc", "shufflenet/soc", "inception_v1/mesh", "inception_v2/biglittle",
         "resnet50/soc", "densenet121/biglittle")
RUNS = {"tuner": {}, "hill": dict(sampler="hill", cost_model="none", descent=0.0),
        "steepest": dict(sampler="steepest", cost_model="none", descent=0.0)}


def curve(space: SearchSpace, total: int, seed: int, name: str, tmp: Path) -> list[float]:
    """The running best (ms) after each measurement of a job of ``total`` measurements of
    the run ``name`` (:data:`RUNS`)."""
    settings = RUNS[name]
    log = tmp / f"{space.graph.name}-{space.profile.name}-{seed}-{total}-{name}.jsonl"
    n_base = len(baselines(space))
    with TuningLog(log) as tl:
        tune(space, Simulator(space), tl,
             TuneConfig(trials=total - n_base, seed=seed, **settings))
    best, out = math.inf, []
    for r in read(log):
        best = min(best, r.result.latency_s if r.result.ok else math.inf)
        out.append(best * 1e3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budgets", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--cases", nargs="+", default=list(CASES))
    args = ap.parse_args()
    rows, wins, runs = [], {"hill": 0, "steepest": 0}, 0
    with tempfile.TemporaryDirectory() as tmp:
        for case in args.cases:
            model, hw = case.split("/")
            space = SearchSpace(load_graph(model), load_profile(hw))
            for seed in args.seeds:
                for budget in args.budgets:  # separate jobs: descent ends each budget
                    got = {name: curve(space, budget, seed, name, Path(tmp))[-1]
                           for name in RUNS}
                    runs += 1
                    for name in wins:
                        wins[name] += got[name] < got["tuner"] * (1 - 1e-9)
                    rows.append(f"| {case} | {seed} | {budget} | {got['tuner']:.4f} | "
                                f"{got['hill']:.4f} | {got['hill'] / got['tuner']:.4f} | "
                                f"{got['steepest']:.4f} | "
                                f"{got['steepest'] / got['tuner']:.4f} |")
    print(f"load average {os.getloadavg()[0]:.2f}; simulator measurer\n")
    print("| case | seed | measurements | tuner best ms | hill best ms | hill / tuner | "
          "steepest best ms | steepest / tuner |\n|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    for name, n in wins.items():
        print(f"\n{name} beats the tuner in {n} of {runs} runs")


if __name__ == "__main__":
    main()
