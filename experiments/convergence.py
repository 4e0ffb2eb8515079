"""Convergence of the search strategies (evolve, TPE, random, TPE alone) on one model.

    python experiments/convergence.py [--model squeezenet] [--hw soc] [--trials 300]
                                      [--seeds 0 1] [--out experiments/results] [--logs DIR]

Tunes with each sampler and seed on the simulator, writing one log per run (to a temporary
directory unless ``--logs`` is given), then from the logs alone prints a markdown table per
run and writes ``convergence_MODEL_HW.png`` (best latency against candidates measured, the
baselines dashed) and ``gantt_MODEL_HW.png`` (the simulated schedule of the best placement
found, its critical path outlined) to ``--out``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from analysis import markdown, run_table

from autoplace.hardware.load import load_profile
from autoplace.measure.simulator import Simulator
from autoplace.models import load_graph
from autoplace.records.tuning_log import TuningLog
from autoplace.reports import analysis, plots
from autoplace.search import TuneConfig, tune
from autoplace.space import Placement, SearchSpace

#: (name, sampler, share of each batch proposed as mutations of the best so far, cost model):
#: the default model-guided search, then Optuna's samplers with plain random mutations
CONFIGS = (("evolve", "evolve", 0.5, "xgb"), ("tpe + mutation", "tpe", 0.5, "none"),
           ("random + mutation", "random", 0.5, "none"), ("tpe only", "tpe", 0.0, "none"))


def run(space: SearchSpace, path: Path, config: TuneConfig) -> float:
    """One tuning run into a fresh log; its wall time in seconds."""
    path.unlink(missing_ok=True)
    t0 = time.perf_counter()
    with TuningLog(path) as log:
        tune(space, Simulator(space), log, config)
    return time.perf_counter() - t0


def figures(df, space: SearchSpace, labels: dict[str, str], out: Path) -> list[Path]:
    g, p = space.graph, space.profile
    name = f"{g.name}_{p.name}"
    base = df[analysis.is_baseline(df["strategy"]) & (df["log"] == df["log"].iloc[0])]
    baselines = dict(zip(base["strategy"].astype(str), base["latency_s"].where(base["ok"])))
    conv = plots.convergence(analysis.convergence(df, "log", search_only=True), labels=labels,
                             baselines=baselines,
                             title=f"{g.name} on {p.name}: best latency of the search so far")
    ok = df[df["ok"]]
    top = ok.loc[ok["latency_s"].idxmin()]
    sim = Simulator(SearchSpace(g, p), timeline=True)
    res = sim.simulate(Placement.from_json(top["placement"]))
    gantt = plots.gantt(g, res.timeline, units=[u.name for u in p.units], title=(
        f"{g.name} on {p.name}: best placement found ({labels[top['log']]}, {top['strategy']} "
        f"trial {top['trial']}), {res.latency_s * 1e3:.3f} ms"))
    paths = [out / f"convergence_{name}.png", out / f"gantt_{name}.png"]
    for fig, path in zip((conv, gantt), paths):
        plots.save(fig, path)
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="squeezenet")
    ap.add_argument("--hw", default="soc")
    ap.add_argument("--trials", type=int, default=300)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    ap.add_argument("--logs", default=None, help="keep the logs here (default: a temp dir)")
    args = ap.parse_args()
    graph, profile = load_graph(args.model), load_profile(args.hw)
    space = SearchSpace(graph, profile)
    with tempfile.TemporaryDirectory() as tmp:
        logs = Path(args.logs or tmp)
        logs.mkdir(parents=True, exist_ok=True)
        labels, walls = {}, {}
        for name, sampler, ratio, model in CONFIGS:
            for seed in args.seeds:
                config = TuneConfig(trials=args.trials, seed=seed, sampler=sampler,
                                    mutation_ratio=ratio, cost_model=model)
                path = logs / f"{graph.name}_{profile.name}_{name.replace(' ', '')}_s{seed}.jsonl"
                walls[str(path)] = run(space, path, config)
                labels[str(path)] = f"{name}, seed {seed}"
        df = analysis.load(*labels)
        table = run_table(df, labels)
        table["wall s"] = [walls[k] for k in labels]
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        paths = figures(df, space, labels, out)
    print(f"{graph.name} on {profile.name}, {args.trials} search trials per run\n")
    print(markdown(table))
    print("\n" + "\n".join(f"wrote {p}" for p in paths))


if __name__ == "__main__":
    main()
