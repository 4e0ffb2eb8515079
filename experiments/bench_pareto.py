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

    python experiments/bench_pareto.py --mesh [--models squeezenet resnet50]
        [--meshes 4x4 8x8] [--trials 256]

Mesh pipelines: per model x mesh (the bundled 4x4 ``mesh`` with rows and cols changed, and
energy per byte read and written in its memories and moved over its links, as
tests/mesh_search.mesh_with_energy prices them: :func:`energy_mesh`), one ``--objective
throughput,energy`` job of ``--trials`` search trials against an epsilon-constraint sweep of
the same budget (as above: the most throughput, the least energy, the most throughput within
two energy bounds, ``--max-energy``) and against the throughput job of the whole budget;
every plan they reached streamed afterwards without bounding (a search for throughput
alone leaves slower plans unstreamed). The three fronts' hypervolume to one reference point,
as above. Writes ``bench_pareto_mesh.md``.
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
from autoplace.records.front import figures, front, hypervolume, nondominated, significant
from autoplace.records.tuning_log import TuningLog, read
from autoplace.search import TuneConfig, tune
from autoplace.space import SearchSpace

CRITERIA = (LATENCY, ENERGY)


def reference(F: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ideal point, reference point) of the figures ``F``: each criterion's best, and its
    worst plus a tenth of its span."""
    lo, hi = F.min(axis=0), F.max(axis=0)
    return lo, hi + 0.1 * np.where(hi > lo, hi - lo, np.abs(hi) + 1e-12)


def hv_shares(fronts: list[np.ndarray]) -> list[float]:
    """Each front's hypervolume as a percentage of the box from the fronts' ideal point to
    their common reference point (:func:`reference`)."""
    lo, ref = reference(np.vstack(fronts))
    box = float(np.prod(ref - lo))
    return [hypervolume(F, ref) / box * 100 for F in fronts]


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
    hv = hv_shares([F_mo, F_eps])
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
    _, ref = reference(want)
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


def energy_mesh(rows: int, cols: int, out_dir: Path) -> Path:
    """The bundled mesh as a ``rows`` x ``cols`` one with energy per byte (module
    docstring): DRAM 100/120 pJ read/written, the PEs' SRAM 1/2, links 5, uplinks 20."""
    text = Path(load_profile("mesh").source).read_text()
    priced = {"[scopes.dram]": "read_pj_per_byte = 100.0\nwrite_pj_per_byte = 120.0",
              "[mesh.scopes.mem]": "read_pj_per_byte = 1.0\nwrite_pj_per_byte = 2.0",
              "[mesh.link]": "pj_per_byte = 5.0", "[mesh.uplink]": "pj_per_byte = 20.0",
              "[mesh]": f"rows = {rows}\ncols = {cols}"}
    text = text.replace("rows = 4\n", "").replace("cols = 4\n", "")
    for table, keys in priced.items():
        text = text.replace(f"{table}\n", f"{table}\n{keys}\n")
    path = out_dir / f"mesh{rows}x{cols}_energy.toml"
    path.write_text(text.replace('name = "mesh"', f'name = "mesh{rows}x{cols}"'))
    return path


def mesh_compare(model: str, rows: int, cols: int, trials: int, seed: int) -> dict:
    """The front job against an epsilon-constraint sweep and the throughput job, each of the
    same budget, their plans streamed (module docstring)."""
    from autoplace.search.mesh import plan_space

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        space = plan_space(load_graph(model), load_profile(energy_mesh(rows, cols, tmp)))
        walls, plans = [], []
        for run in (_mesh_front_job, _mesh_sweep, _mesh_throughput_job):
            t0 = time.perf_counter()
            plans.append(run(space, tmp / run.__name__, trials, seed))
            walls.append(time.perf_counter() - t0)
    fronts = [_streamed_front(space, p) for p in plans]
    return dict(case=f"{model}/mesh{rows}x{cols}", trials=trials, n=[len(F) for F in fronts],
                hv=hv_shares(fronts), walls=walls,
                fastest=[1 / F[:, 0].min() for F in fronts])


def _mesh_job(space, path: Path, trials: int, seed: int, strategy=None, **config) -> list:
    """The records of one job over ``space``'s plans."""
    from autoplace.search.mesh import mesh_config, tune_mesh

    path.parent.mkdir(parents=True, exist_ok=True)
    with TuningLog(path) as log:
        tune_mesh(space, log, mesh_config(trials=trials, seed=seed, **config),
                  strategy=strategy)
    return read(path)


def _mesh_front_job(space, tmp: Path, trials: int, seed: int) -> list:
    return _mesh_job(space, tmp / "front.jsonl", trials, seed, objective="throughput,energy")


def _mesh_throughput_job(space, tmp: Path, trials: int, seed: int) -> list:
    return _mesh_job(space, tmp / "throughput.jsonl", trials, seed)


def _mesh_sweep(space, tmp: Path, trials: int, seed: int) -> list:
    """Four jobs of a quarter of the budget: the most throughput; the least energy (the
    front search moving only its least-energy plan, ranked by energy alone: a search for
    energy alone); the most throughput within energy bounds a third and two thirds of the
    way from the first's best's energy to the second's least."""
    from autoplace.search.pipeline_front import PipelineFront

    q = trials // 4
    fast = _mesh_job(space, tmp / "fast.jsonl", q, seed)
    alone = PipelineFront(space, objective_named("throughput,energy"), seed=seed, turns=(1,))
    lean = _mesh_job(space, tmp / "lean.jsonl", q, seed, strategy=alone,
                     objective="throughput,energy")
    best = min((r for r in fast if r.result.period_s), key=lambda r: r.result.period_s)
    e_fast = best.result.energy_j
    e_lean = min(r.result.energy_j for r in lean if r.result.energy_j is not None)
    bounded = []
    for k, share in enumerate((1 / 3, 2 / 3)):
        bound = Limits(energy_j=e_fast + share * (e_lean - e_fast))
        bounded += _mesh_job(space, tmp / f"bound{k}.jsonl", q, seed, limits=bound)
    return fast + lean + bounded


def _streamed_front(space, records: list) -> np.ndarray:
    """The front of (seconds per inference, joules per inference) of the plans of
    ``records``, each streamed without bounding (a search for throughput leaves slower
    plans unstreamed)."""
    from autoplace.pipeline.plan_space import plan_of
    from autoplace.pipeline.stream_measurer import StreamMeasurer

    plans = list(dict.fromkeys(plan_of(r.pipeline) for r in records))
    streamed = StreamMeasurer(space.costs).measure(plans)
    F = np.array([[r.period_s, r.energy_j] for r in streamed if r.period_s is not None])
    return F[nondominated(significant(F))]


def main_mesh(models: list[str], meshes: list[str], trials: int, seed: int, out: Path) -> None:
    rows = ["| case | trials | front (front job, sweep, throughput job) | hv % (front job) | "
            "hv % (sweep) | hv % (throughput job) | most inferences/s (front, sweep, "
            "throughput) | wall s (front, sweep, throughput) |", "|---" * 8 + "|"]
    for model in models:
        for mesh in meshes:
            r, c = (int(x) for x in mesh.split("x"))
            m = mesh_compare(model, r, c, trials, seed)
            rows.append(f"| {m['case']} | {m['trials']} | {', '.join(map(str, m['n']))} | "
                        + " | ".join(f"{h:.2f}" for h in m["hv"]) + " | "
                        + ", ".join(f"{f:,.1f}" for f in m["fastest"]) + " | "
                        + ", ".join(f"{w:.1f}" for w in m["walls"]) + " |")
            print(rows[-1], flush=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_pareto_mesh.md").write_text("\n".join(rows) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["squeezenet"])
    ap.add_argument("--profiles", nargs="+", default=["soc", "biglittle"])
    ap.add_argument("--trials", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="experiments/results")
    ap.add_argument("--exact", action="store_true",
                    help="the enumerable cases against their exact fronts instead")
    ap.add_argument("--mesh", action="store_true",
                    help="mesh pipelines' fronts of throughput and energy instead")
    ap.add_argument("--meshes", nargs="+", default=["4x4", "8x8"], metavar="RxC")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}", flush=True)
    if args.exact:
        return main_exact(args.trials, args.seed, Path(args.out))
    if args.mesh:
        return main_mesh(args.models, args.meshes, args.trials, args.seed, Path(args.out))
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
