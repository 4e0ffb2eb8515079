"""Search quality: the default tuner against its yardsticks on the bundled models x profiles
and the imported latency instances of Tarnawski et al., at 64, 256 and 1,024 measurements.

    python experiments/bench_search.py [--models ...] [--profiles ...] [--instances ...]
        [--strategies ...] [--budgets 64 256 1024] [--seeds 1] [--proven-seeds 3]
        [--jobs 1] [--long N --long-models ...] [--out DIR]

Strategies (each budget of each is its own tuning job: the tuner spends the last eighth of
its budget on a one-op descent, so a 1,024-measurement job's first 256 records are not a
256-measurement job; a budget counts *every* measured candidate, the baselines included):

- ``evolve-xgb``: the default tuner (evolution ranked by the XGBoost cost model);
- ``hill``, ``steepest``: random-mutation hill climbing and steepest descent from HEFT
  (``--sampler hill|steepest``, no descent share), at an equal number of measurements (what
  counts with a costly measurer);
- ``hill-wall``: hill climbing at the tuner's wall time (what counts with the simulator as
  the measurer: hill climbing spends ~1 ms per candidate, the tuner 5-50). One hill job per
  case and seed, stopped (as Ctrl-C stops a job) at its first batch past the wall time of
  the tuner's largest job of that case and seed; at each budget its best is the best it
  logged within the wall time of the tuner's job of that budget (hill climbing does not
  depend on its budget: a prefix of a longer job is a shorter job). It also ends where
  every neighbour of its best is measured; a job that ended otherwise before the tuner's
  time is marked "(short)";
- ``anneal-wall``: simulated annealing in the simulator (``search.yardsticks.anneal``: 128
  chains from HEFT's placement) for the wall time of the tuner's largest job of that case
  and seed; at each budget its best is the best it had within the wall time of the tuner's
  job of that budget (issue 30's goal: no annealer more than 0.5% better);
- opt-in: ``random``, ``tpe`` (Optuna, no mutations, no model), ``evolve-none``,
  ``evolve-analytic`` (the evolution ranked by nothing, or by the analytic estimate).

Cases: ``--models`` x ``--profiles`` and ``--instances`` (default: all eight; their profile
is named ``tarnawski`` here). Per case: HEFT, the lower bound, the branch-and-bound optimum
(seeded with the best found; proven or not within ``--limit`` rows per level) and, for an
instance, their own greedy: their program, built from tests/data/tarnawski/greedy.cpp as
bench_instances.py does (g++ and nlohmann-json3-dev; without them the numbers are read from
results/bench_instances.md). Per run: the running best, the wall time, the machine load,
the best placement and how many of its one-op moves the simulator predicts faster (every
move, unsampled: 0 is a one-op local optimum).

Work, in order: (1) every case at seeds ``0 .. --seeds - 1``; (2) the case facts, the
optimum seeded with the best of (1); (3) the cases with a proven optimum at seeds up to
``--proven-seeds``; (4) ``hill-wall`` for every (case, seed) the tuner ran. The default
selection, 1 seed per case and 3 where branch and bound proves the optimum, covers every
goal (the local-optimum, hill-climbing and 256-vs-1,024 goals on all 38 cases, the optimum
goal at 3 seeds per proven case, the instance goal on all eight) in about 50 minutes on one
core (timed jobs at load ~2: per seed the 30 model cases take ~20 min, the instances ~13,
densenet121/mesh and the instances layers-inceptionv3 and ops-bert_l-3 ~1.5 min per
1,024-measurement tuner job; branch and bound ~6 min; the extra seeds ~10). ``--seeds 3``
(every case at 3 seeds) takes about 1 h 45 min.

Runs are cached in ``<out>/bench_search_runs.jsonl``, keyed by model / profile / strategy /
seed / measurements (delete it to start over; an interrupted benchmark resumes); the
tables go to ``bench_search.csv`` and ``bench_search.md`` there
(experiments/bench_search_tables.py).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODELS = ("squeezenet", "resnet50", "densenet121", "inception_v1", "inception_v2",
          "shufflenet", "vgg19", "alexnet", "zfnet512", "seed_te")
PROFILES = ("soc", "biglittle", "mesh")
INSTANCES = "tarnawski"  # the profile column of an imported instance
TUNER, HILL, WALL, ANNEAL = "evolve-xgb", "hill", "hill-wall", "anneal-wall"
STRATEGIES = {
    "random": dict(sampler="random", cost_model="none", mutation_ratio=0.0),
    "tpe": dict(sampler="tpe", cost_model="none", mutation_ratio=0.0),
    "evolve-none": dict(sampler="evolve", cost_model="none"),
    "evolve-analytic": dict(sampler="evolve", cost_model="analytic"),
    TUNER: dict(sampler="evolve", cost_model="xgb"),
    HILL: dict(sampler="hill", cost_model="none", descent=0.0),
    "steepest": dict(sampler="steepest", cost_model="none", descent=0.0),
    WALL: dict(sampler="hill", cost_model="none", descent=0.0),
    ANNEAL: {},  # (not a sampler of the loop: anneal_job)
}
DEFAULT_STRATEGIES = (TUNER, HILL, "steepest", WALL, ANNEAL)
WALL_MAX, WALL_SLACK = 10**6, 0.05  # hill-wall: measurements at most; s past the tuner's
ALL_MOVES = 10**9  # the local-optimum check ranks every move (the tuner samples 20,000)
FASTER = 1 - 1e-9  # a move is faster when below the best by more than rounding
RESULTS = Path(__file__).resolve().parent / "results"


def _space(model: str, hw: str):
    from autoplace.frontend.tarnawski import load_instance
    from autoplace.hardware.load import load_profile
    from autoplace.models import load_graph
    from autoplace.space import SearchSpace

    if hw == INSTANCES:
        return SearchSpace(*load_instance(model))
    return SearchSpace(load_graph(model), load_profile(hw))


# -- one job (in a subprocess) ------------------------------------------------------------
def _tune(space, trials: int, seed: int, strategy: str,
          stop_after: float | None = None) -> tuple[list[dict], object, float]:
    """Run a tuning job; its log's lines (JSON), its result and its start (epoch s). With
    ``stop_after``, the job stops, as Ctrl-C stops it, at its first batch after that many
    seconds."""
    from autoplace.records.tuning_log import TuningLog
    from autoplace.search import TuneConfig, tune

    config = TuneConfig(trials=trials, seed=seed, **STRATEGIES[strategy])
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "log.jsonl"
        t0 = time.time()
        measurer = _simulator(space, None if stop_after is None else
                              time.perf_counter() + stop_after)
        with TuningLog(path) as log:
            result = tune(space, measurer, log, config)
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return lines, result, t0


def _simulator(space, deadline: float | None):
    """The simulator measurer; past ``deadline`` (perf_counter s) it raises
    KeyboardInterrupt before measuring a batch: ``tune`` stops cleanly, all logged."""
    from autoplace.measure.simulator import Simulator

    class Timed(Simulator):
        def measure_encoded(self, choice, mode, placements):
            if deadline is not None and time.perf_counter() > deadline:
                raise KeyboardInterrupt
            return super().measure_encoded(choice, mode, placements)

    return Timed(space)


def _curve(lines: list[dict], t0: float) -> tuple[list[float], list[float], dict | None]:
    """The running best (s) after each record, each record's time since ``t0`` and the
    best valid record."""
    from datetime import datetime

    best, top, curve, elapsed = math.inf, None, [], []
    for d in lines:
        res = d["result"]
        if res["error"] is None and res["latency_s"] < best:
            best, top = res["latency_s"], d
        curve.append(best)
        elapsed.append(datetime.fromisoformat(d["time"]).timestamp() - t0)
    return curve, elapsed, top


def run_one(space, strategy: str, seed: int, total: int) -> tuple[dict, object]:
    """One tuning job of ``total`` measurements: its running best after each one and wall
    time (a dict), and its best placement (None if nothing was valid)."""
    from autoplace.baselines.named import baselines
    from autoplace.space import Placement

    n_base = len(baselines(space))
    lines, result, t0 = _tune(space, total - n_base, seed, strategy)
    curve, elapsed, top = _curve(lines, t0)
    rhos = [s["spearman"] for s in result.stats if s.get("spearman") is not None]
    row = {"n_baselines": n_base, "curve": curve, "elapsed": elapsed,
           "wall_s": result.wall_s, "load": os.getloadavg()[0],
           "overhead_ms": (result.wall_s - result.measure_s) / max(result.measured, 1) * 1e3,
           "spearman": sum(rhos) / len(rhos) if rhos else None,
           "best_placement": top["placement"] if top else None}
    return row, Placement.from_dict(top["placement"]) if top else None


def local_check(space, placement, latency_s: float) -> dict:
    """How many of the placement's one-op moves (every one) the simulator predicts faster
    than ``latency_s``, and how many there are."""
    from autoplace.search.descent import moves, predicted

    if placement is None:
        return {"faster_moves": None, "moves": 0}
    c, m = space.encode([placement])
    C, M = moves(space, c[0], m[0], limit=ALL_MOVES)
    faster = predicted(space, C, M) < latency_s * FASTER
    return {"faster_moves": int(faster.sum()), "moves": len(C)}


def one_job(model: str, hw: str, strategy: str, seed: int, total: int) -> dict:
    """A job of :func:`run_one` and the local-optimum check of its best."""
    space = _space(model, hw)
    row, placement = run_one(space, strategy, seed, total)
    return {"model": model, "profile": hw, "strategy": strategy, "seed": seed, "total": total,
            **row, **local_check(space, placement, row["curve"][-1])}


def wall_job(model: str, hw: str, seed: int, total: int, walls: dict) -> dict:
    """Hill climbing for the tuner's longest wall time in ``walls`` (s, by budget), then
    cut at each: per budget its best and measurements within that time; its running best
    where it improves, as (seconds since the job started, latency s)."""
    from autoplace.baselines.named import baselines

    space = _space(model, hw)
    n_base = len(baselines(space))  # (before the job, as run_one: the same warm start)
    lines, result, t0 = _tune(space, WALL_MAX, seed, WALL, max(walls.values()) + WALL_SLACK)
    curve, elapsed, _ = _curve(lines, t0)
    steps = [(e, c) for i, (e, c) in enumerate(zip(elapsed, curve))
             if i == 0 or c < curve[i - 1]]
    at = {b: {"tuner_wall_s": w, "measured": sum(e <= w for e in elapsed),
              "best_s": min((c for e, c in steps if e <= w), default=math.inf)}
          for b, w in walls.items()}
    dry = not result.interrupted and len(lines) < WALL_MAX + n_base  # no neighbour left
    return {"model": model, "profile": hw, "strategy": WALL, "seed": seed, "total": total,
            "measured": len(lines), "last_s": elapsed[-1], "ran_dry": dry,
            "long_enough": dry or elapsed[-1] >= max(walls.values()), "at": at,
            "steps": steps, "wall_s": result.wall_s, "load": os.getloadavg()[0]}


def anneal_job(model: str, hw: str, seed: int, total: int, walls: dict) -> dict:
    """Simulated annealing for the tuner's longest wall time in ``walls`` (s, by budget);
    per budget its best within that time and the genomes simulated by then (at its mean
    rate)."""
    from autoplace.search.yardsticks import anneal

    space = _space(model, hw)
    t0 = time.perf_counter()
    got = anneal(space, seconds=max(walls.values()), seed=seed)
    wall = time.perf_counter() - t0
    at = {b: {"tuner_wall_s": w, "simulated": int(got.simulated * min(w / wall, 1.0)),
              "best_s": min((v for e, v in got.steps if e <= w), default=math.inf)}
          for b, w in walls.items()}
    return {"model": model, "profile": hw, "strategy": ANNEAL, "seed": seed, "total": total,
            "simulated": got.simulated, "at": at, "wall_s": wall,
            "load": os.getloadavg()[0]}


def case_info(model: str, hw: str, incumbent_s: float, limit: int, work: float = 3e7) -> dict:
    """Baselines, HEFT (made to fit, as the tuner measures it), the lower bound and (if
    provable within ``limit``) the optimum."""
    from autoplace.baselines.named import greedy, single_units
    from autoplace.baselines.optimum import lower_bound, optimum
    from autoplace.measure.simulator import Simulator
    from autoplace.search.heft_start import heft_start

    space = _space(model, hw)
    sim = Simulator(space)
    singles = [r.latency_s for r in sim.measure([p for _, p in single_units(space)]) if r.ok]
    h = space.decode(*(x[0] for x in heft_start(space)))  # HEFT as the tuner measures it
    heft_s, greedy_res = (r for r in sim.measure([h, greedy(space)]))
    t0 = time.perf_counter()
    best = optimum(space, incumbent=h, limit=limit, work=work, bound=incumbent_s)
    return {"model": model, "profile": hw, "ops": len(space.graph.ops),
            "log10_space": space.log10_size, "single_s": min(singles, default=math.inf),
            "greedy_s": greedy_res.latency_s if greedy_res.ok else math.inf,
            "heft_s": heft_s.latency_s if heft_s.ok else math.inf,
            "heft_error": None if heft_s.ok else heft_s.error.value,
            "greedy_error": None if greedy_res.ok else greedy_res.error.value,
            "lower_bound_s": lower_bound(space).latency_s,
            "optimum_s": best.latency_s if best.proven else None,
            "optimum_nodes": best.nodes, "optimum_wall_s": time.perf_counter() - t0}


# -- their greedy on the instances ----------------------------------------------------------
def their_greedy(names: list[str]) -> tuple[dict[str, float], str]:
    """Their greedy's latency (s) per instance, and where it came from: their program
    (built as bench_instances.py does) or, without a compiler, bench_instances.md."""
    if not names:
        return {}, ""
    from autoplace.frontend.tarnawski import bundled_instances

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_instances as bi

    try:
        with tempfile.TemporaryDirectory() as tmp:
            exe = bi.build_greedy(Path(tmp))
            return ({n: bi.their_greedy(exe, bundled_instances()[n]) / 1e3 for n in names},
                    "their program, built from tests/data/tarnawski/greedy.cpp")
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"cannot build their greedy ({exc}); reading bench_instances.md",
              file=sys.stderr)
        return _greedy_from_table(names), "results/bench_instances.md (no compiler)"


def _greedy_from_table(names: list[str]) -> dict[str, float]:
    """Their greedy (s) per instance from bench_instances.md's table (column 5, ms)."""
    out = {}
    for line in (RESULTS / "bench_instances.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] in names and re.fullmatch(r"[\d.]+", cells[4]):
            out[cells[0]] = float(cells[4]) / 1e3
    return out


# -- running, with a cache --------------------------------------------------------------------
def _subprocess(args: list[str]) -> dict:
    cmd = [sys.executable, __file__, *args]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"{' '.join(args)} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _cached(path: Path) -> dict[str, dict]:
    if not path.exists():
        return {}
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {row["key"]: row for row in rows}


def run_all(jobs: list[tuple[str, list[str]]], cache: Path, workers: int) -> dict[str, dict]:
    """Run the ``(key, args)`` jobs not in the cache, ``workers`` at a time; every cached
    row by key."""
    done = _cached(cache)
    todo = [(k, a) for k, a in jobs if k not in done]
    with concurrent.futures.ThreadPoolExecutor(workers) as pool, open(cache, "a") as fh:
        futures = {pool.submit(_subprocess, a): k for k, a in todo}
        for n, fut in enumerate(concurrent.futures.as_completed(futures), start=1):
            row = {"key": futures[fut], **fut.result()}
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            done[row["key"]] = row
            print(f"[{n}/{len(todo)}] {row['key']} ({row.get('wall_s', 0):.0f} s)",
                  file=sys.stderr, flush=True)
    return done


# -- the jobs ---------------------------------------------------------------------------------
def all_cases(args) -> list[tuple[str, str]]:
    return [(m, hw) for m in args.models for hw in args.profiles] + \
        [(name, INSTANCES) for name in args.instances]


def run_key(case: tuple[str, str], strategy: str, seed: int, total: int) -> str:
    return f"run/{case[0]}/{case[1]}/{strategy}/{seed}/{total}"


def _run_jobs(args, cases, seeds) -> list[tuple[str, list[str]]]:
    """Every strategy but hill-wall and anneal-wall at every budget, each its own job."""
    return [(run_key((m, hw), s, seed, b), ["--one", m, hw, s, str(seed), str(b)])
            for seed in seeds for m, hw in cases for s in args.strategies
            if s not in (WALL, ANNEAL) for b in args.budgets]


def _long_jobs(args) -> list[tuple[str, list[str]]]:
    return [(run_key((m, hw), "tpe", 0, args.long), ["--one", m, hw, "tpe", "0", str(args.long)])
            for m in args.long_models if m in args.models for hw in args.profiles] \
        if args.long else []


def _wall_jobs(args, done: dict, runs: list[str]) -> list[tuple[str, list[str]]]:
    """hill-wall and anneal-wall for each case and seed the tuner ran at every budget."""
    if TUNER not in args.strategies:
        return []
    top, jobs = max(args.budgets), []
    for key in runs:
        r = done[key]
        if r["strategy"] != TUNER or r["total"] != top:
            continue
        case = (r["model"], r["profile"])
        walls = {b: done[run_key(case, TUNER, r["seed"], b)]["wall_s"] for b in args.budgets}
        jobs += [(run_key(case, s, r["seed"], top),
                  [flag, *case, str(r["seed"]), str(top), json.dumps(walls)])
                 for s, flag in ((WALL, "--wall"), (ANNEAL, "--anneal"))
                 if s in args.strategies]
    return jobs


def _cases(args, done: dict, runs: list[str], cache: Path) -> dict:
    """Case facts; the optimum's search is seeded with the best any run measured."""
    incumbents: dict[tuple, float] = {}
    for key in runs:
        r = done[key]
        case = (r["model"], r["profile"])
        incumbents[case] = min(incumbents.get(case, math.inf), r["curve"][-1])
    jobs = [(f"case/{m}/{hw}/{args.limit}",
             ["--case", m, hw, repr(incumbents.get((m, hw), math.inf)), str(args.limit)])
            for m, hw in all_cases(args)]
    facts = run_all(jobs, cache, args.jobs)
    return {(facts[k]["model"], facts[k]["profile"]): facts[k] for k, _ in jobs}


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    ap.add_argument("--profiles", nargs="*", default=list(PROFILES))
    ap.add_argument("--instances", nargs="*", default=None, help="default: every bundled one")
    ap.add_argument("--strategies", nargs="+", default=list(DEFAULT_STRATEGIES),
                    choices=list(STRATEGIES))
    ap.add_argument("--budgets", nargs="+", type=int, default=[64, 256, 1024])
    ap.add_argument("--seeds", type=int, default=1, help="seeds of every case")
    ap.add_argument("--proven-seeds", type=int, default=3,
                    help="seeds of the cases with a proven optimum")
    ap.add_argument("--long", type=int, default=0, help="plain TPE to this many measurements")
    ap.add_argument("--long-models", nargs="+", default=["squeezenet", "alexnet", "vgg19"])
    ap.add_argument("--limit", type=int, default=1_000_000, help="B&B rows per level")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--one", nargs=5, help=argparse.SUPPRESS)  # model hw strategy seed total
    ap.add_argument("--wall", nargs=5, help=argparse.SUPPRESS)  # model hw seed total walls
    ap.add_argument("--anneal", nargs=5, help=argparse.SUPPRESS)  # (as --wall)
    ap.add_argument("--case", nargs=4, help=argparse.SUPPRESS)  # model hw incumbent limit
    return ap


def _child(args) -> bool:
    """A subprocess's job (``--one``, ``--wall``, ``--anneal``, ``--case``): print its
    row."""
    if args.one:
        m, hw, s, seed, total = args.one
        row = one_job(m, hw, s, int(seed), int(total))
    elif args.wall:
        m, hw, seed, total, walls = args.wall
        row = wall_job(m, hw, int(seed), int(total), json.loads(walls))
    elif args.anneal:
        m, hw, seed, total, walls = args.anneal
        row = anneal_job(m, hw, int(seed), int(total), json.loads(walls))
    elif args.case:
        m, hw, inc, limit = args.case
        row = case_info(m, hw, float(inc), int(limit))
    else:
        return False
    print(json.dumps(row))
    return True


def main() -> None:
    args = _parser().parse_args()
    if _child(args):
        return
    if args.instances is None:
        from autoplace.frontend.tarnawski import bundled_instances
        args.instances = [n for n in bundled_instances() if not n.startswith("throughput-")]
    args.out.mkdir(parents=True, exist_ok=True)
    cache = args.out / "bench_search_runs.jsonl"
    jobs = _run_jobs(args, all_cases(args), range(args.seeds)) + _long_jobs(args)
    done = run_all(jobs, cache, args.jobs)
    cases = _cases(args, done, [k for k, _ in jobs], cache)
    proven = [c for c in all_cases(args) if cases[c]["optimum_s"] is not None]
    jobs += _run_jobs(args, proven, range(args.seeds, args.proven_seeds))
    done = run_all(jobs, cache, args.jobs)
    jobs += _wall_jobs(args, done, [k for k, _ in jobs])
    done = run_all(jobs, cache, args.jobs)
    greedy, source = their_greedy(args.instances)
    for name, s in greedy.items():
        cases[(name, INSTANCES)]["their_greedy_s"] = s
    from bench_search_tables import write_report

    write_report([done[k] for k, _ in jobs], cases, args, source)


if __name__ == "__main__":
    main()
