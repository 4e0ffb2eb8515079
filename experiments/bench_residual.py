"""Does the learned cost model rank real measurements better than the calibrated simulator?

    python experiments/bench_residual.py [--model squeezenet] [--hw host] [--n 120]
        [--splits 20] [--train 0.5] [--cache experiments/results/bench_residual_runs.jsonl]

1. Draws ``--n`` placements of the model on the profile (seeded): each op on a unit drawn
   with a per-placement share, so the set runs from every op on one unit to every op on the
   other, through every mix; the first two are the single-unit placements.
2. Measures each on this host with the local measurer (TVM builds, the Relax VM, the median
   of five runs); the measurements are cached as JSON lines, so a re-run measures only what
   is missing.
3. Over ``--splits`` random splits, fits the cost model the tuner uses (XGBoost on the
   residual to the simulator, ``--cost-model xgb``) on a ``--train`` share and ranks the
   rest, the unseen placements, as does the simulator alone (``--cost-model simulator``)
   and the analytic estimate (``--cost-model analytic``). Per ranker: Spearman's rho
   against the measured latencies, how often it beats the simulator, the median error of
   its latency and the measured latency of its top pick over the best unseen one.

Prints a markdown table and the machine's load (measurements on a loaded machine run slower
than the calibrated simulator expects: that, too, is what a learned model can pick up).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path

import numpy as np

from autoplace.cost_model import AnalyticCostModel, Featurizer, SimulatorCostModel, XGBCostModel
from autoplace.deploy.run import TimeSettings
from autoplace.hardware.load import load_profile
from autoplace.measure.batch import simulate_batch
from autoplace.measure.local import LocalMeasurer
from autoplace.models import load_module
from autoplace.search.guided_proposer import _spearman
from autoplace.space import SearchSpace

RESULTS = Path(__file__).resolve().parent / "results"
RANKERS = {"xgb (residual over the simulator)": lambda: XGBCostModel(seed=0),
           "simulator alone": SimulatorCostModel, "analytic estimate": AnalyticCostModel}


def placements(space: SearchSpace, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` genomes: every op on each single unit, then ops on random units, each
    genome with its own share of ops per unit."""
    rng = np.random.default_rng(seed)
    k = int(space.n_choices.max())
    rows = [np.minimum(np.full(space.n_ops, u), space.n_choices - 1) for u in range(k)]
    while len(rows) < n:
        share = rng.dirichlet(np.ones(k))
        rows.append(np.minimum(rng.choice(k, size=space.n_ops, p=share), space.n_choices - 1))
    choice = np.array(rows[:n], dtype=np.int64)
    mode = np.zeros((n, space.n_edges), dtype=np.int64)
    return space.canonical(choice, space.normalize(choice, mode))


def measured(space: SearchSpace, mod, choice: np.ndarray, mode: np.ndarray,
             cache: Path) -> np.ndarray:
    """Measured latency per genome (NaN: failed), from ``cache`` or measured and added."""
    keys = [k.hex() for k in space.keys(choice, mode)]
    known = {}
    for line in cache.read_text().splitlines() if cache.is_file() else []:
        r = json.loads(line)
        if r["graph"] == space.graph.name and r["profile"] == space.profile.hash:
            known[r["key"]] = r["latency_s"]
    todo = [i for i, k in enumerate(keys) if k not in known]
    m = LocalMeasurer(mod, space.graph, space.profile, settings=TimeSettings(repeat=5))
    try:
        with open(cache, "a", encoding="utf-8") as fh:
            for start in range(0, len(todo), 8):
                rows = todo[start:start + 8]
                res = m.measure(space.decode_rows(choice[rows], mode[rows]))
                for i, r in zip(rows, res):
                    known[keys[i]] = r.latency_s if r.ok else None
                    fh.write(json.dumps({"graph": space.graph.name, "profile": space.profile.hash,
                                         "key": keys[i], "latency_s": known[keys[i]]}) + "\n")
                    fh.flush()
                print(f"measured {start + len(rows)} of {len(todo)}", flush=True)
    finally:
        m.close()
    return np.array([np.nan if known[k] is None else known[k] for k in keys])


def evaluate(X: np.ndarray, y: np.ndarray, lat: np.ndarray, splits: int, train: float,
             seed: int) -> dict[str, dict[str, list[float]]]:
    """Per ranker, per split: rho on the unseen rows, median |log error|, top-pick regret."""
    rng = np.random.default_rng(seed)
    out = {name: {"rho": [], "top": [], "err": [], "regret": []} for name in RANKERS}
    for _ in range(splits):
        order = rng.permutation(len(y))
        cut = int(train * len(y))
        fit_rows, test = order[:cut], order[cut:]
        for name, make in RANKERS.items():
            pred = make().fit(X[fit_rows], y[fit_rows]).predict(X[test])
            out[name]["rho"].append(_spearman(pred, y[test]))
            fast = np.argsort(y[test])[: len(test) // 2]  # the faster half, as measured
            out[name]["top"].append(_spearman(pred[fast], y[test][fast]))
            out[name]["err"].append(float(np.median(np.abs(pred - y[test]))))
            out[name]["regret"].append(float(lat[test][np.argmin(pred)] / lat[test].min()))
    return out


def table(scores: dict, splits: int, n_train: int, n_test: int) -> str:
    sim = scores["simulator alone"]["rho"]
    top = scores["simulator alone"]["top"]
    lines = [f"| ranker | Spearman rho on {n_test} unseen (median of {splits} splits) | "
             "beats the simulator | rho on their faster half | beats the simulator | "
             "median latency error | top pick / best unseen |",
             "|---|---|---|---|---|---|---|"]
    for name, s in scores.items():
        wins = sum(a > b for a, b in zip(s["rho"], sim))
        top_wins = sum(a > b for a, b in zip(s["top"], top))
        lines.append(f"| {name} | {statistics.median(s['rho']):.3f} | {wins} of {splits} | "
                     f"{statistics.median(s['top']):.3f} | {top_wins} of {splits} | "
                     f"{np.expm1(statistics.median(s['err'])):.1%} | "
                     f"{statistics.median(s['regret']):.3f} |")
    return f"trained on {n_train} measured placements each split\n\n" + "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="squeezenet")
    ap.add_argument("--hw", default="host")
    ap.add_argument("--n", type=int, default=120)
    ap.add_argument("--splits", type=int, default=20)
    ap.add_argument("--train", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache", type=Path, default=RESULTS / "bench_residual_runs.jsonl")
    args = ap.parse_args()
    mod, graph = load_module(args.model)
    space = SearchSpace(graph, load_profile(args.hw))
    choice, mode = placements(space, args.n, args.seed)
    load = os.getloadavg()[0]
    lat = measured(space, mod, choice, mode, args.cache)
    ok = ~np.isnan(lat)
    choice, mode, lat = choice[ok], mode[ok], lat[ok]
    feat = Featurizer(space)
    X = feat.transform(choice, mode)
    y = feat.targets(lat, X)
    sim = simulate_batch(space, choice, mode).latency
    print(f"\n{args.model} on {args.hw}: {len(lat)} placements measured here (load average "
          f"{load:.2f} before measuring, {os.getloadavg()[0]:.2f} after); measured "
          f"{lat.min() * 1e3:.1f}-{lat.max() * 1e3:.1f} ms, simulated "
          f"{sim.min() * 1e3:.1f}-{sim.max() * 1e3:.1f} ms\n")
    scores = evaluate(X, y, lat, args.splits, args.train, args.seed)
    n_train = int(args.train * len(y))
    print(table(scores, args.splits, n_train, len(y) - n_train))


if __name__ == "__main__":
    main()
