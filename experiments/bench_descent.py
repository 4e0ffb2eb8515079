"""One-op descent at the end of the search (``--descent``) against none, same seeds.

For each case and seed, the default search (simulator measurer) runs twice: with descent
(``--descent 0.125``, the default) and without (``0``). Per run: the final best, whether it
is a one-op local optimum under the simulator (no single-op move or copy flip is faster; the
number of faster moves otherwise), and the wall time. Prints a markdown table, the geomean
ratio best(descent) / best(none), and the machine's load; one core is enough.

    python experiments/bench_descent.py [--trials 256] [--seeds 0 1 2] [--cases m/hw ...]
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
import time
from pathlib import Path

from autoplace.hardware.load import load_profile
from autoplace.measure.simulator import Simulator
from autoplace.models import load_graph
from autoplace.records.tuning_log import TuningLog, best, read
from autoplace.search import TuneConfig, tune
from autoplace.search.descent import moves, predicted
from autoplace.space import SearchSpace

CASES = ("squeezenet/soc", "shufflenet/soc", "inception_v1/mesh", "inception_v2/biglittle",
         "resnet50/soc", "densenet121/soc")


def one_run(space: SearchSpace, trials: int, seed: int, share: float, tmp: Path) -> dict:
    log = tmp / f"{space.graph.name}-{space.profile.name}-{seed}-{share}.jsonl"
    t0 = time.perf_counter()
    with TuningLog(log) as tl:
        tune(space, Simulator(space), tl, TuneConfig(trials=trials, seed=seed, descent=share))
    wall = time.perf_counter() - t0
    top = best(read(log))
    c, m = space.encode([top.placement])
    C, M = moves(space, c[0], m[0])
    faster = int((predicted(space, C, M) < top.result.latency_s).sum())
    return {"best_ms": top.result.latency_s * 1e3, "faster": faster, "wall_s": wall}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=256)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--cases", nargs="+", default=list(CASES))
    args = ap.parse_args()
    rows, ratios = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for case in args.cases:
            model, hw = case.split("/")
            space = SearchSpace(load_graph(model), load_profile(hw))
            for seed in args.seeds:
                on = one_run(space, args.trials, seed, 0.125, Path(tmp))
                off = one_run(space, args.trials, seed, 0.0, Path(tmp))
                ratios.append(on["best_ms"] / off["best_ms"])
                rows.append(f"| {case} | {seed} | {off['best_ms']:.4f} | {on['best_ms']:.4f} | "
                            f"{ratios[-1]:.4f} | {off['faster'] == 0} ({off['faster']}) | "
                            f"{on['faster'] == 0} ({on['faster']}) | {off['wall_s']:.1f} | "
                            f"{on['wall_s']:.1f} |")
    print(f"load average {os.getloadavg()[0]:.2f}; {args.trials} trials, simulator measurer\n")
    print("| case | seed | best ms, no descent | best ms, descent | descent/none | local "
          "optimum, none (faster moves) | local optimum, descent | wall s, none | wall s, "
          "descent |\n|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
    print(f"\ngeomean best(descent) / best(none): {geo:.4f} over {len(ratios)} runs")


if __name__ == "__main__":
    main()
