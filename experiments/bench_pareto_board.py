"""The front search on a board unlike its profile: ranked by the simulator's figures
corrected by learned residuals (the default), against ranked by the simulator's alone
(issue 30: "model-guided proposals that widen the front").

    python experiments/bench_pareto_board.py [--models squeezenet resnet50]
        [--profiles biglittle soc] [--trials 64 256] [--seed 0] [--out experiments/results]

The board is the simulator over the profile with one unit slower and hungrier than the
profile says (:data:`BOARDS`: on ``biglittle`` the big cluster's convolutions at 24 GFLOP/s
where it says 60, at 4.5 W where it says 3; on ``soc`` accelerator1's at 120 where it says
350, and accelerator2 at 2.4 W where it says 1.2), measured as a costly measurer is (not
free). Per model x profile x budget, one ``--objective latency,energy`` job each way, same
seed; the fronts are of the measured figures. Hypervolume to one reference point, each
criterion's worst over both fronts plus a tenth of its span, ``hv %`` the share of the box
from both fronts' ideal point to it (as ``bench_pareto.py``). Writes
``bench_pareto_board.md`` in ``--out``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from bench_pareto import hv_shares  # (experiments/ is the script's own directory)

from autoplace.hardware.load import load_profile
from autoplace.measure.base import Measurer
from autoplace.measure.objective import objective_named
from autoplace.measure.simulator import Simulator
from autoplace.models import load_graph
from autoplace.records.front import figures, front
from autoplace.records.tuning_log import TuningLog, read
from autoplace.search import TuneConfig, tune
from autoplace.search.pareto_search import ParetoSearch
from autoplace.space import SearchSpace

GOAL = objective_named("latency,energy")
#: per profile, the text replacements that make its board
BOARDS = {"biglittle": (("conv2d = 60.0", "conv2d = 24.0"), ("power_w = 3.0", "power_w = 4.5")),
          "soc": (("conv2d = 350.0", "conv2d = 120.0"), ("power_w = 1.2", "power_w = 2.4"))}


class Board(Measurer):
    """The simulator over the board's profile, as a costly measurer."""

    name, free = "board", False

    def __init__(self, real: SearchSpace):
        self.simulator = Simulator(real)

    def measure(self, placements):
        return self.simulator.measure(placements)


def board_space(model: str, hw: str, tmp: Path) -> SearchSpace:
    text = Path(load_profile(hw).source).read_text()
    for old, new in BOARDS[hw]:
        assert old in text, (hw, old)
        text = text.replace(old, new)
    (tmp / f"{hw}_board.toml").write_text(text)
    return SearchSpace(load_graph(model), load_profile(tmp / f"{hw}_board.toml"))


def run(space: SearchSpace, board: SearchSpace, path: Path, trials: int, seed: int,
        learn: bool) -> tuple[list, float]:
    t0 = time.perf_counter()
    with TuningLog(path) as log:
        tune(space, Board(board), log, TuneConfig(trials=trials, seed=seed, objective=GOAL.name),
             strategy=ParetoSearch(space, GOAL, seed=seed, learn=learn))
    return [r for r in read(path) if r.result.ok], time.perf_counter() - t0


def compare(model: str, hw: str, trials: int, seed: int) -> dict:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        space, board = SearchSpace(load_graph(model), load_profile(hw)), \
            board_space(model, hw, tmp)
        jobs = [run(space, board, tmp / f"{learn}.jsonl", trials, seed, learn)
                for learn in (True, False)]
    fronts = [figures(front(records, GOAL.criteria), GOAL.criteria) for records, _ in jobs]
    return dict(case=f"{model}/{hw}", trials=trials, n=[len(F) for F in fronts],
                hv=hv_shares(fronts),
                walls=[w for _, w in jobs], load=os.getloadavg()[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["squeezenet", "resnet50"])
    ap.add_argument("--profiles", nargs="+", default=["biglittle", "soc"], choices=BOARDS)
    ap.add_argument("--trials", nargs="+", type=int, default=[64, 256])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="experiments/results")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}", flush=True)
    rows = ["| case | trials | front (learned, simulator) | hv % (learned) | hv % (simulator) "
            "| learned / simulator | wall s (learned, simulator) | load |", "|---" * 8 + "|"]
    for model in args.models:
        for hw in args.profiles:
            for trials in args.trials:
                r = compare(model, hw, trials, args.seed)
                ratio = r["hv"][0] / r["hv"][1] if r["hv"][1] else float("inf")
                rows.append(f"| {r['case']} | {trials} | {r['n'][0]}, {r['n'][1]} | "
                            f"{r['hv'][0]:.2f} | {r['hv'][1]:.2f} | {ratio:.2f} | "
                            f"{r['walls'][0]:.1f}, {r['walls'][1]:.1f} | {r['load']:.2f} |")
                print(rows[-1], flush=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "bench_pareto_board.md").write_text("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
