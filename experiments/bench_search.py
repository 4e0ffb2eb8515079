"""Search quality: every strategy on the bundled models x profiles, at several budgets and seeds.

    python experiments/bench_search.py [--models ...] [--profiles ...] [--seeds 3]
        [--budgets 32 64 128 256] [--jobs 2] [--long 1000 --long-models ...]

Strategies (each run is a tuning job; a budget counts *every* measured candidate, the
baselines the job measures first included):

- ``single``, ``greedy``, ``heft``: the named baseline placements (deterministic);
- ``random``: Optuna's RandomSampler over per-op parameters, no mutations, no model;
- ``tpe``: plain multivariate Optuna TPE, no mutations, no model;
- ``evolve-none``, ``evolve-analytic``: the evolutionary search ranked by nothing
  (ablation) or by the analytic estimate alone;
- ``evolve-xgb``: the default tuner (evolution ranked by the XGBoost cost model);
- ``hill``, ``steepest``: random-mutation hill climbing and steepest descent from the same
  start (``--sampler hill|steepest``, no descent share): yardsticks the tuner must beat at
  an equal budget.

Each job runs once at the largest budget; a smaller budget's result is the best of its first
records. For every case the branch-and-bound optimum (seeded with the best found) is tried
with a row limit, and the lower bound is computed. ``--long N`` also runs plain TPE to N
measurements on ``--long-models`` (seed 0) to see how soon ``evolve-xgb`` matches it.

Runs are cached in ``experiments/results/bench_search_runs.jsonl`` (delete it to start
over); the tables go to ``bench_search.csv`` and ``bench_search.md`` there.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as dt
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODELS = ("squeezenet", "resnet50", "densenet121", "inception_v1", "inception_v2",
          "shufflenet", "vgg19", "alexnet", "zfnet512", "seed_te")
ONNX = MODELS[:-1]
PROFILES = ("soc", "biglittle", "mesh")
STRATEGIES = {
    "random": dict(sampler="random", cost_model="none", mutation_ratio=0.0),
    "tpe": dict(sampler="tpe", cost_model="none", mutation_ratio=0.0),
    "evolve-none": dict(sampler="evolve", cost_model="none"),
    "evolve-analytic": dict(sampler="evolve", cost_model="analytic"),
    "evolve-xgb": dict(sampler="evolve", cost_model="xgb"),
    "hill": dict(sampler="hill", cost_model="none", descent=0.0),
    "steepest": dict(sampler="steepest", cost_model="none", descent=0.0),
}
RESULTS = Path(__file__).resolve().parent / "results"


def _space(model: str, hw: str):
    from autoplace.models import load_graph
    from autoplace.profile_io import load_profile
    from autoplace.space import SearchSpace

    return SearchSpace(load_graph(model), load_profile(hw))


def run_one(model: str, hw: str, strategy: str, seed: int, total: int) -> dict:
    """One tuning job of ``total`` measurements; its running best after each one."""
    from autoplace.baselines import baselines
    from autoplace.measure.simulator import Simulator
    from autoplace.records import TuningLog, read
    from autoplace.search import TuneConfig, tune

    space = _space(model, hw)
    n_base = len(baselines(space))
    sim = Simulator(space)
    config = TuneConfig(trials=total - n_base, seed=seed, **STRATEGIES[strategy])
    with tempfile.TemporaryDirectory() as d:
        with TuningLog(Path(d) / "log.jsonl") as log:
            result = tune(space, sim, log, config)
        records = read(Path(d) / "log.jsonl")
    best, curve, stamps = math.inf, [], []
    for r in records:
        best = min(best, r.result.latency_s if r.result.ok else math.inf)
        curve.append(best)
        stamps.append(dt.datetime.fromisoformat(r.time).timestamp())
    rhos = [s["spearman"] for s in result.stats if s.get("spearman") is not None]
    return {"model": model, "profile": hw, "strategy": strategy, "seed": seed,
            "total": total, "n_baselines": n_base, "curve": curve,
            "elapsed": [t - stamps[0] for t in stamps], "wall_s": result.wall_s,
            "overhead_ms": (result.wall_s - result.measure_s) / result.measured * 1e3,
            "spearman": sum(rhos) / len(rhos) if rhos else None}


def case_info(model: str, hw: str, incumbent_s: float, limit: int, work: float = 3e7) -> dict:
    """Baselines, HEFT, the lower bound and (if provable within ``limit``) the optimum."""

    from autoplace.baselines import greedy, heft, single_units
    from autoplace.exact import lower_bound, optimum
    from autoplace.measure.simulator import Simulator

    space = _space(model, hw)
    sim = Simulator(space)
    singles = [r.latency_s for r in sim.measure([p for _, p in single_units(space)]) if r.ok]
    h = heft(space)
    heft_s, greedy_res = (r for r in sim.measure([h, greedy(space)]))
    t0 = time.perf_counter()
    best = optimum(space, incumbent=h, limit=limit, work=work, bound=incumbent_s)
    return {"model": model, "profile": hw, "ops": len(space.graph.ops),
            "log10_space": space.log10_size, "single_s": min(singles, default=math.inf),
            "greedy_s": greedy_res.latency_s if greedy_res.ok else math.inf,
            "heft_s": heft_s.latency_s if heft_s.ok else math.inf,
            "lower_bound_s": lower_bound(space).latency_s,
            "optimum_s": best.latency_s if best.proven else None,
            "optimum_nodes": best.nodes, "optimum_wall_s": time.perf_counter() - t0}


# -- running, with a cache --------------------------------------------------------------------
def _subprocess(args: list[str]) -> dict:
    cmd = [sys.executable, __file__, *args]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _cached(path: Path) -> dict[str, dict]:
    if not path.exists():
        return {}
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {row["key"]: row for row in rows}


def run_all(jobs: list[tuple[str, list[str]]], cache: Path, workers: int) -> dict[str, dict]:
    """Run the ``(key, args)`` jobs not in the cache, ``workers`` at a time."""
    done = _cached(cache)
    todo = [(k, a) for k, a in jobs if k not in done]
    with concurrent.futures.ThreadPoolExecutor(workers) as pool, open(cache, "a") as fh:
        futures = {pool.submit(_subprocess, a): k for k, a in todo}
        for n, fut in enumerate(concurrent.futures.as_completed(futures), start=1):
            row = {"key": futures[fut], **fut.result()}
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            done[row["key"]] = row
            print(f"[{n}/{len(todo)}] {row['key']}", file=sys.stderr, flush=True)
    return done


# -- tables -------------------------------------------------------------------------------
def geomean(xs) -> float:
    """Geometric mean of the finite positive values (NaN if none)."""
    xs = [x for x in xs if x is not None and math.isfinite(x) and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def best_at(run: dict, budget: int) -> float:
    """The best latency of a run within its first ``budget`` measurements."""
    curve = run["curve"]
    return curve[min(budget, len(curve)) - 1]


def csv_rows(runs: list[dict], cases: dict, budgets: list[int]) -> list[dict]:
    """One row per run and budget: best, its ratios to HEFT, the best single unit and the
    optimum (or the lower bound where the optimum is not proven), wall time to reach it."""
    rows = []
    for r in runs:
        c = cases[(r["model"], r["profile"])]
        ref, kind = ((c["optimum_s"], "optimum") if c["optimum_s"] else
                     (c["lower_bound_s"], "lower_bound"))
        for b in budgets + ([r["total"]] if r["total"] not in budgets else []):
            if b > r["total"]:
                continue
            best = best_at(r, b)
            rows.append({"model": r["model"], "profile": r["profile"],
                         "strategy": r["strategy"], "seed": r["seed"], "budget": b,
                         "best_ms": best * 1e3, "vs_heft": best / c["heft_s"],
                         "vs_single": best / c["single_s"], "vs_ref": best / ref,
                         "ref": kind, "wall_s": r["elapsed"][min(b, len(r["curve"])) - 1]})
    return rows


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--profiles", nargs="+", default=list(PROFILES))
    ap.add_argument("--strategies", nargs="+", default=list(STRATEGIES))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--budgets", nargs="+", type=int, default=[32, 64, 128, 256])
    ap.add_argument("--long", type=int, default=0, help="plain TPE to this many measurements")
    ap.add_argument("--long-models", nargs="+", default=["squeezenet", "alexnet", "vgg19"])
    ap.add_argument("--limit", type=int, default=1_000_000, help="B&B rows per level")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--one", nargs=5, help=argparse.SUPPRESS)  # model hw strategy seed total
    ap.add_argument("--case", nargs=4, help=argparse.SUPPRESS)  # model hw incumbent limit
    return ap


def _jobs(args) -> list[tuple[str, list[str]]]:
    total = max(args.budgets)
    jobs = [(f"run/{m}/{hw}/{s}/{seed}/{total}", ["--one", m, hw, s, str(seed), str(total)])
            for m in args.models for hw in args.profiles for s in args.strategies
            for seed in range(args.seeds)]
    if args.long:
        jobs += [(f"run/{m}/{hw}/tpe/0/{args.long}",
                  ["--one", m, hw, "tpe", "0", str(args.long)])
                 for m in args.long_models for hw in args.profiles]
    return jobs


def _cases(args, runs: list[dict], cache: Path) -> dict:
    """Case facts; the optimum's search is seeded with the best any run measured."""
    incumbents: dict[tuple, float] = {}
    for r in runs:
        key = (r["model"], r["profile"])
        incumbents[key] = min(incumbents.get(key, math.inf), r["curve"][-1])
    jobs = [(f"case/{m}/{hw}/{args.limit}",
             ["--case", m, hw, repr(incumbents[(m, hw)]), str(args.limit)])
            for m in args.models for hw in args.profiles]
    done = run_all(jobs, cache, args.jobs)
    return {(done[k]["model"], done[k]["profile"]): done[k] for k, _ in jobs}


def main() -> None:
    args = _parser().parse_args()
    if args.one:
        m, hw, s, seed, total = args.one
        print(json.dumps(run_one(m, hw, s, int(seed), int(total))))
        return
    if args.case:
        m, hw, inc, limit = args.case
        print(json.dumps(case_info(m, hw, float(inc), int(limit))))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    cache = args.out / "bench_search_runs.jsonl"
    jobs = _jobs(args)
    done = run_all(jobs, cache, args.jobs)
    runs = [done[k] for k, _ in jobs]
    cases = _cases(args, runs, cache)
    write_report(runs, cases, args, csv_rows(runs, cases, args.budgets))

# -- the report -------------------------------------------------------------------------------
def write_report(runs: list[dict], cases: dict, args, rows: list[dict]) -> None:
    """bench_search.csv (one row per run and budget) and bench_search.md (the tables)."""
    import csv

    with open(args.out / "bench_search.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    main_runs = [r for r in runs if r["total"] == max(args.budgets)]
    parts = [f"# Search quality ({_stamp()})\n", _goals(main_runs, cases, args, runs),
             _budget_table(rows, args, "vs_heft", "HEFT"),
             _budget_table(rows, args, "vs_single", "the best single unit"),
             _case_table(main_runs, cases, args), _optimum_table(main_runs, cases, args),
             _long_table(runs, cases, args), _overhead_table(main_runs, args)]
    (args.out / "bench_search.md").write_text("\n".join(p for p in parts if p) + "\n")
    print((args.out / "bench_search.md").read_text())


def _stamp() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")


def _pick(rows, **where):
    return [r for r in rows if all(r[k] == v for k, v in where.items())]


def _budget_table(rows: list[dict], args, column: str, name: str) -> str:
    models = [m for m in args.models if m in ONNX]
    head = (f"## Geomean of best / {name}, the {len(models)} ONNX models x "
            f"{len(args.profiles)} profiles x seeds\n\n| strategy | "
            + " | ".join(f"{b}" for b in args.budgets) + " |\n|---|"
            + "---|" * len(args.budgets))
    lines = [head]
    for s in args.strategies:
        vals = [geomean(r[column] for r in _pick(rows, strategy=s, budget=b)
                        if r["model"] in models and r["profile"] in args.profiles)
                for b in args.budgets]
        lines.append(f"| {s} | " + " | ".join(f"{v:.3f}" for v in vals) + " |")
    return "\n".join(lines) + "\n"


def _case_table(runs: list[dict], cases: dict, args) -> str:
    b = max(args.budgets)
    head = (f"## Every case at {b} measurements: best / HEFT (geomean over seeds)\n\n"
            "| model | profile | ops | space | HEFT ms | bound / HEFT | optimum / HEFT | "
            "single / HEFT | greedy / HEFT | " + " | ".join(args.strategies) + " |\n|"
            + "---|" * (9 + len(args.strategies)))
    lines = [head]
    for m in args.models:
        for hw in args.profiles:
            c = cases[(m, hw)]
            h = c["heft_s"]
            opt = f"{c['optimum_s'] / h:.3f}" if c["optimum_s"] else "?"
            cells = [geomean(r["curve"][-1] / h for r in _pick(runs, model=m, profile=hw,
                                                                 strategy=s))
                     for s in args.strategies]
            lines.append(f"| {m} | {hw} | {c['ops']} | 10^{c['log10_space']:.0f} | "
                         f"{h * 1e3:.3f} | {c['lower_bound_s'] / h:.3f} | {opt} | "
                         f"{c['single_s'] / h:.2f} | {c['greedy_s'] / h:.3f} | "
                         + " | ".join(f"{v:.3f}" for v in cells) + " |")
    return "\n".join(lines) + "\n"


def _at_optimum(run: dict, budget: int, optimum_s: float) -> bool:
    return best_at(run, budget) <= optimum_s * (1 + 1e-9)


def _optimum_table(runs: list[dict], cases: dict, args) -> str:
    known = [k for k in cases if cases[k]["optimum_s"]]
    if not known:
        return ""
    lines = ["## Cases with a proven optimum: share of seeds at the optimum within 64 / "
             f"{max(args.budgets)} measurements (mean gap at {max(args.budgets)})\n",
             "| model | profile | optimum ms | B&B nodes | "
             + " | ".join(f"{s} @64 / @{max(args.budgets)}" for s in args.strategies)
             + " |", "|" + "---|" * (4 + len(args.strategies))]
    for m, hw in known:
        c = cases[(m, hw)]
        cells = []
        for s in args.strategies:
            rs = _pick(runs, model=m, profile=hw, strategy=s)
            hit64 = sum(_at_optimum(r, 64, c["optimum_s"]) for r in rs) / max(len(rs), 1)
            hit = sum(_at_optimum(r, r["total"], c["optimum_s"]) for r in rs) / max(len(rs), 1)
            gap = geomean(r["curve"][-1] / c["optimum_s"] for r in rs) - 1
            cells.append(f"{hit64:.0%} / {hit:.0%} (+{gap:.2%})")
        lines.append(f"| {m} | {hw} | {c['optimum_s'] * 1e3:.5f} | {c['optimum_nodes']:,} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _reach(run: dict, target: float) -> int | None:
    return next((n + 1 for n, v in enumerate(run["curve"]) if v <= target * (1 + 1e-9)), None)


def _long_table(runs: list[dict], cases: dict, args) -> str:
    long = [r for r in runs if r["strategy"] == "tpe" and r["total"] == args.long]
    if not long:
        return ""
    lines = [f"## Plain TPE at {args.long} measurements vs evolve-xgb (seed 0)\n",
             f"| model | profile | TPE@{args.long} / HEFT | evolve-xgb@100 / HEFT | "
             "evolve-xgb measurements to match TPE |", "|---|---|---|---|---|"]
    for r in long:
        h = cases[(r["model"], r["profile"])]["heft_s"]
        ev = _pick(runs, model=r["model"], profile=r["profile"], strategy="evolve-xgb", seed=0)
        n = _reach(ev[0], r["curve"][-1]) if ev else None
        at100 = best_at(ev[0], 100) / h if ev else float("nan")
        lines.append(f"| {r['model']} | {r['profile']} | {r['curve'][-1] / h:.3f} | "
                     f"{at100:.3f} | {n if n else '> ' + str(ev[0]['total'] if ev else '?')} |")
    return "\n".join(lines) + "\n"


def _overhead_table(runs: list[dict], args) -> str:
    lines = ["## Search overhead (ms per measured candidate, not measuring) and wall time\n",
             "| strategy | " + " | ".join(f"{hw} ms/trial | {hw} wall s" for hw in args.profiles)
             + " |", "|---|" + "---|---|" * len(args.profiles)]
    for s in args.strategies:
        cells = []
        for hw in args.profiles:
            rs = _pick(runs, strategy=s, profile=hw)
            cells.append(f"{sum(r['overhead_ms'] for r in rs) / max(len(rs), 1):.1f} | "
                         f"{sum(r['wall_s'] for r in rs) / max(len(rs), 1):.1f}")
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _optimum_hits(runs: list[dict], cases: dict, budget: int, rel: float) -> list[bool]:
    return [best_at(r, budget) <= cases[(r["model"], r["profile"])]["optimum_s"] * (1 + rel)
            for r in runs]


def _goals(runs: list[dict], cases: dict, args, all_runs: list[dict]) -> str:
    b = max(args.budgets)
    ev = [r for r in runs if r["strategy"] == "evolve-xgb"]
    onnx = [r for r in ev if r["model"] in ONNX]
    known = [r for r in ev if cases[(r["model"], r["profile"])]["optimum_s"]]
    small = [r for r in known if r["model"] not in ONNX]
    large = [r for r in known if r["model"] in ONNX]
    hit = _optimum_hits(small, cases, 64, 1e-9)
    near = _optimum_hits(large, cases, 64, 1e-3)
    heft = geomean(r["curve"][-1] / cases[(r["model"], r["profile"])]["heft_s"] for r in onnx)
    floor = geomean(c["lower_bound_s"] / c["heft_s"] for (m, _), c in cases.items()
                    if m in ONNX)
    single = geomean(r["curve"][-1] / cases[(r["model"], r["profile"])]["single_s"]
                     for r in onnx)
    lines = ["## Goals (evolve-xgb, the default tuner)\n", "| goal | target | measured |",
             "|---|---|---|",
             f"| small graphs (seed_te): the optimum within 64 measurements | >= 95% of "
             f"seeds | {sum(hit) / max(len(hit), 1):.0%} of {len(hit)} runs |",
             f"| (ONNX models with a proven optimum: within 0.1% of it in 64) | - | "
             f"{sum(near) / max(len(near), 1):.0%} of {len(near)} runs |",
             f"| ONNX models, geomean best@{b} / HEFT | <= 0.90 | {heft:.3f} (no tuner can "
             f"go below the lower bound: geomean bound / HEFT = {floor:.3f}) |",
             f"| ONNX models, geomean best@{b} / best single unit | <= 0.75 | {single:.3f} |"]
    long = [r for r in all_runs if r["strategy"] == "tpe" and r["total"] == args.long]
    if long:
        reached = []
        for r in long:
            e = _pick(runs, model=r["model"], profile=r["profile"], strategy="evolve-xgb",
                      seed=0)
            n = _reach(e[0], r["curve"][-1]) if e else None
            reached.append(n is not None and n <= 100)
        lines.append(f"| evolve-xgb matches plain TPE@{args.long} within 100 | every case | "
                     f"{sum(reached)} of {len(reached)} cases |")
    return "\n".join(lines) + "\n"

if __name__ == "__main__":
    main()
