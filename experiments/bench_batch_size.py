"""Candidates measured per round: search quality and tuner overhead per batch size.

    python experiments/bench_batch_size.py [--cases densenet121/soc ...] [--sizes 8 16]
        [--budgets 256 1000] [--seeds 5] [--out FILE]

Per case (model/profile, simulator measurer) and budget, the default tuner with each
``--batch-size``, seeds 0..N-1, the sizes interleaved per seed (the machine is shared: load
printed). Per configuration: the geomean and the best over seeds of the best latency, that
geomean over the first size's (< 1: faster placements), and the median tuner overhead per
measured trial ((wall - measure) / measured, ms) with its ratio to the first size's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CASES = ("squeezenet/soc", "resnet50/soc", "inception_v1/soc", "densenet121/soc",
         "squeezenet/mesh")


def runs(case: str, sizes: list[int], budget: int, seeds: int) -> dict[int, list[tuple]]:
    """(best ms, overhead ms) per seed, per batch size."""
    from autoplace.hardware.load import load_profile
    from autoplace.measure.simulator import Simulator
    from autoplace.models import load_graph
    from autoplace.records.tuning_log import TuningLog
    from autoplace.search import TuneConfig, tune
    from autoplace.space import SearchSpace

    model, hw = case.split("/")
    space = SearchSpace(load_graph(model), load_profile(hw))
    sim, out = Simulator(space), {size: [] for size in sizes}
    with tempfile.TemporaryDirectory() as tmp:
        with TuningLog(os.path.join(tmp, "warm.jsonl")) as log:  # imports, numba, XGBoost
            tune(space, sim, log, TuneConfig(trials=30, seed=99))
        for seed in range(seeds):
            for size in sizes:
                with TuningLog(os.path.join(tmp, f"{seed}-{size}.jsonl")) as log:
                    res = tune(space, sim, log, TuneConfig(trials=budget, seed=seed,
                                                            batch_size=size))
                out[size].append((res.best.result.latency_s * 1e3,
                                  (res.wall_s - res.measure_s) / res.measured * 1e3))
    return out


def rows(case: str, budget: int, got: dict[int, list[tuple]]) -> list[str]:
    first = next(iter(got))
    geo = {s: float(np.exp(np.mean(np.log([b for b, _ in r])))) for s, r in got.items()}
    ovh = {s: statistics.median(o for _, o in r) for s, r in got.items()}
    return [f"| {case} | {budget} | {size} | {geo[size]:.4f} | "
            f"{min(b for b, _ in r):.4f} | {geo[size] / geo[first]:.4f} | {ovh[size]:.2f} | "
            f"{ovh[size] / ovh[first]:.2f} | {os.getloadavg()[0]:.1f} |"
            for size, r in got.items()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=list(CASES))
    ap.add_argument("--sizes", nargs="+", type=int, default=[8, 16])
    ap.add_argument("--budgets", nargs="+", type=int, default=[256, 1000])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    lines = ["| case | trials | batch | best ms (geomean) | best ms (min) | geomean / first | "
             "overhead ms/trial | / first | load |", "|" + "---|" * 9]
    for case in args.cases:
        for budget in args.budgets:
            lines += rows(case, budget, runs(case, args.sizes, budget, args.seeds))
            print(lines[-1], file=sys.stderr, flush=True)
    text = (f"`python experiments/bench_batch_size.py {' '.join(sys.argv[1:])}` at {_rev()}, "
            f"{time.strftime('%Y-%m-%d %H:%M')}, {args.seeds} seeds, simulator measurer\n\n"
            + "\n".join(lines))
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


def _rev() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, cwd=ROOT).stdout.strip()


if __name__ == "__main__":
    main()
