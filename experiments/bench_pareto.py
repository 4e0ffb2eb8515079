"""The search over several objectives against an epsilon-constraint sweep of single-objective
jobs with the same total budget (issue 30, part 4: the first cases).

    python experiments/bench_pareto.py [--models squeezenet] [--profiles soc biglittle]
        [--trials 256] [--seed 0] [--out experiments/results]

Per model x profile: one ``--objective latency,energy`` job of ``--trials`` search trials,
and a sweep of four single-objective jobs of a quarter of that each: the fastest, the least
energy, and the fastest within two energy bounds at a third and two thirds of the way from
the first job's energy to the second's. The sweep's front is that of every record of its four
jobs (each job's baselines too). Both fronts' hypervolume is taken to one reference point:
each criterion's worst over both fronts plus a tenth of its span; ``hv %`` is the share of
the box from both fronts' ideal point to that reference. Writes ``bench_pareto.md`` in
``--out``.

    python experiments/bench_pareto.py --exact [--trials 256]

The cases whose every placement can be enumerated (the seed thread's TE example on each
bundled profile but the mesh): the exact front of every placement
(``baselines.optimum.enumerated_front``), how many of its points the job's front holds, and
the job front's hypervolume as a share of the exact front's (reference: the exact front's
worst plus a tenth of its span). Writes ``bench_pareto_exact.md``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from autoplace.baselines.optimum import enumerated_front
from autoplace.hardware.load import load_profile
from autoplace.measure.limits import Limits
from autoplace.measure.objective import ENERGY, LATENCY, objective_named
from autoplace.measure.simulator import Simulator
from autoplace.models import load_graph
from autoplace.records.front import figures, front, hypervolume, significant
from autoplace.records.tuning_log import TuningLog, read
from autoplace.search import TuneConfig, tune
from autoplace.space import SearchSpace

CRITERIA = (LATENCY, ENERGY)


def job(space: SearchSpace, path: Path, **config) -> tuple[list, float]:
    """The records of one tuning job, and its wall time."""
    t0 = time.perf_counter()
    with TuningLog(path) as log:
        tune(space, Simulator(space), log, TuneConfig(**config))
    return read(path), time.perf_counter() - t0


def sweep(space: SearchSpace, tmp: Path, trials: int, seed: int) -> tuple[list, float]:
    """The records of the four single-objective jobs (module docstring), and their time."""
    quarter = max(trials // 4, 1)
    fast, t1 = job(space, tmp / "fast.jsonl", trials=quarter, seed=seed)
    lean, t2 = job(space, tmp / "lean.jsonl", trials=quarter, seed=seed, objective="energy")
    e_fast = min((r for r in fast if r.result.ok), key=lambda r: r.result.latency_s)
    e_lean = min(r.result.energy_j for r in lean if r.result.ok)
    records, wall = fast + lean, t1 + t2
    for k, share in enumerate((1 / 3, 2 / 3)):
        bound = e_fast.result.energy_j + share * (e_lean - e_fast.result.energy_j)
        more, t = job(space, tmp / f"eps{k}.jsonl", trials=quarter, seed=seed,
                      limits=Limits(energy_j=max(bound, 1e-12)))
        records, wall = records + more, wall + t
    return records, wall


def compare(model: str, hw: str, trials: int, seed: int) -> dict:
    space = SearchSpace(load_graph(model), load_profile(hw))
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        mo, t_mo = job(space, tmp / "mo.jsonl", trials=trials, seed=seed,
                       objective="latency,energy")
        eps, t_eps = sweep(space, tmp, trials, seed)
    F_mo, F_eps = (figures(front(r, CRITERIA), CRITERIA) for r in (mo, eps))
    both = np.vstack([F_mo, F_eps])
    lo, hi = both.min(axis=0), both.max(axis=0)
    ref = hi + 0.1 * np.where(hi > lo, hi - lo, np.abs(hi) + 1e-12)
    box = float(np.prod(ref - lo))
    hv = [hypervolume(F, ref) / box * 100 for F in (F_mo, F_eps)]
    return dict(case=f"{model}/{hw}", trials=trials, n_mo=len(F_mo), n_eps=len(F_eps),
                hv_mo=hv[0], hv_eps=hv[1], t_mo=t_mo, t_eps=t_eps,
                measured=(len(mo), len(eps)))


EXACT_CASES = [("seed_te", hw) for hw in ("soc", "biglittle", "npu", "host")]


def exact(model: str, hw: str, trials: int, seed: int) -> dict:
    """The job's front against the exact front of every placement (module docstring)."""
    space = SearchSpace(load_graph(model), load_profile(hw))
    goal = objective_named("latency,energy")
    want = enumerated_front(space, goal)
    with tempfile.TemporaryDirectory() as d:
        got, wall = job(space, Path(d) / "mo.jsonl", trials=trials, seed=seed,
                        objective="latency,energy")
    F = significant(figures(front(got, CRITERIA), CRITERIA))
    found = sum(bool(np.isclose(F, p, rtol=1e-9).all(axis=1).any()) for p in want)
    lo, hi = want.min(axis=0), want.max(axis=0)
    ref = hi + 0.1 * np.where(hi > lo, hi - lo, np.abs(hi) + 1e-12)
    share = hypervolume(F, ref) / hypervolume(want, ref) * 100
    return dict(case=f"{model}/{hw}", trials=trials, exact=len(want), found=found,
                front=len(F), hv=share, wall=wall)


def main_exact(trials: int, seed: int, out: Path) -> None:
    rows = ["| case | trials | exact front | found | front (search) | hv % of exact | wall s |",
            "|---" * 7 + "|"]
    for model, hw in EXACT_CASES:
        r = exact(model, hw, trials, seed)
        rows.append(f"| {r['case']} | {r['trials']} | {r['exact']} | {r['found']} | "
                    f"{r['front']} | {r['hv']:.2f} | {r['wall']:.1f} |")
        print(rows[-1], flush=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_pareto_exact.md").write_text("\n".join(rows) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["squeezenet"])
    ap.add_argument("--profiles", nargs="+", default=["soc", "biglittle"])
    ap.add_argument("--trials", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="experiments/results")
    ap.add_argument("--exact", action="store_true",
                    help="the enumerable cases against their exact fronts instead")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}", flush=True)
    if args.exact:
        return main_exact(args.trials, args.seed, Path(args.out))
    rows = ["| case | trials | front (search) | front (sweep) | hv % (search) | hv % (sweep) "
            "| records (search, sweep) | wall s (search, sweep) |", "|---" * 8 + "|"]
    for model in args.models:
        for hw in args.profiles:
            r = compare(model, hw, args.trials, args.seed)
            rows.append(f"| {r['case']} | {r['trials']} | {r['n_mo']} | {r['n_eps']} | "
                        f"{r['hv_mo']:.2f} | {r['hv_eps']:.2f} | {r['measured'][0]}, "
                        f"{r['measured'][1]} | {r['t_mo']:.1f}, {r['t_eps']:.1f} |")
            print(rows[-1], flush=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "bench_pareto.md").write_text("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
