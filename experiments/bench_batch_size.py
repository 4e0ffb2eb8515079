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
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from analysis import markdown

ROOT = Path(__file__).resolve().parents[1]
CASES = ("squeezenet/soc", "resnet50/soc", "inception_v1/soc", "densenet121/soc",
         "squeezenet/mesh")


def runs(case: str, sizes: list[int], budget: int, seeds: int) -> list[dict]:
    """One row per seed and batch size: its best ms and tuner overhead ms per trial."""
    from autoplace.hardware.load import load_profile
    from autoplace.measure.simulator import Simulator
    from autoplace.models import load_graph
    from autoplace.records.tuning_log import TuningLog
    from autoplace.search import TuneConfig, tune
    from autoplace.space import SearchSpace

    model, hw = case.split("/")
    space = SearchSpace(load_graph(model), load_profile(hw))
    sim, out = Simulator(space), []
    with tempfile.TemporaryDirectory() as tmp:
        with TuningLog(os.path.join(tmp, "warm.jsonl")) as log:  # imports, numba, XGBoost
            tune(space, sim, log, TuneConfig(trials=30, seed=99))
        for seed in range(seeds):
            for size in sizes:
                with TuningLog(os.path.join(tmp, f"{seed}-{size}.jsonl")) as log:
                    res = tune(space, sim, log, TuneConfig(trials=budget, seed=seed,
                                                            batch_size=size))
                out.append({"case": case, "trials": budget, "batch": size,
                            "best": res.best.result.latency_s * 1e3,
                            "overhead": (res.wall_s - res.measure_s) / res.measured * 1e3,
                            "load": os.getloadavg()[0]})
    return out


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per case, budget and batch size: geomean and min of the best, median overhead, and
    the ratios of both to the first batch size's."""
    g = df.groupby(["case", "trials", "batch"], sort=False)
    out = pd.DataFrame({"best ms (geomean)": g["best"].agg(lambda x: np.exp(np.log(x).mean())),
                        "best ms (min)": g["best"].min(),
                        "overhead ms/trial": g["overhead"].median(),
                        "load": g["load"].max()})
    first = out.groupby(level=["case", "trials"], sort=False).transform("first")
    out.insert(2, "geomean / first", out["best ms (geomean)"] / first["best ms (geomean)"])
    out.insert(4, "/ first", out["overhead ms/trial"] / first["overhead ms/trial"])
    return out.reset_index()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=list(CASES))
    ap.add_argument("--sizes", nargs="+", type=int, default=[8, 16])
    ap.add_argument("--budgets", nargs="+", type=int, default=[256, 1000])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    rows = []
    for case in args.cases:
        for budget in args.budgets:
            rows += runs(case, args.sizes, budget, args.seeds)
            print(rows[-1], file=sys.stderr, flush=True)
    text = (f"`python experiments/bench_batch_size.py {' '.join(sys.argv[1:])}` at {_rev()}, "
            f"{time.strftime('%Y-%m-%d %H:%M')}, {args.seeds} seeds, simulator measurer\n\n"
            + markdown(summary(pd.DataFrame(rows)), digits=5))
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


def _rev() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, cwd=ROOT).stdout.strip()


if __name__ == "__main__":
    main()
