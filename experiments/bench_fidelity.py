"""Simulated vs measured whole-model latency on this host, and the cost of a measurement.

    python experiments/bench_fidelity.py [--models squeezenet resnet50 ...] [--repeat 5]
                                         [--cache fidelity.json] [--candidates 8]
                                         [--kernel-db DIR]

1. Times every kernel of each model alone and each whole model (all ops on the host unit),
   as ``autoplace calibrate`` does (``--cache`` keeps the measurements for a re-run); with
   ``--kernel-db``, the kernels scheduled by its records, as the tuned build runs them.
2. Prints, per model, the measured latency and the simulated one with the bundled ``host``
   profile and with ``host`` calibrated: per op kind only, or with the per-kernel latency
   table too; on all the models (in-sample), or on all the others (held out: the model
   itself is never seen, so only kernels it shares with others are in its table), with
   each error; then the median errors.
3. Times a batch of candidates with the local measurer and with the RPC measurer (a
   tracker and a server on 127.0.0.1), and prints the wall time per candidate.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from autoplace.calibrate.kernels import Measurements, Session, calibrated, fit, measure, simulated
from autoplace.deploy.kernel_db import KernelDatabase
from autoplace.deploy.run import TimeSettings
from autoplace.hardware.load import load_profile
from autoplace.models import BUNDLED, load_graph


def _measurements(models: list[str], profile, settings: TimeSettings, cache: Path | None,
                  kernel_db: Path | None = None):
    if cache and cache.is_file():
        m = Measurements.from_dict(json.loads(cache.read_text()))
        if set(models) <= set(m.models):
            return m
    kernels = KernelDatabase(kernel_db) if kernel_db else None
    m = measure(models, profile, profile.host, session=Session(), settings=settings,
                kernels=kernels)
    if cache:
        cache.write_text(json.dumps(m.to_dict()) + "\n")
    return m


def _subset(m: Measurements, models: list[str]) -> Measurements:
    return Measurements(unit=m.unit, kernels=tuple(k for k in m.kernels if k.model in models),
                        models={n: m.models[n] for n in models},
                        ops={n: m.ops[n] for n in models})


#: columns: (header, fitted on every model or on the others only, with the kernel table)
COLUMNS = {"host": ("host", None, False), "kind": ("per kind", "all", False),
           "table": ("+ kernels", "all", True), "kind_loo": ("kind, held", "others", False),
           "table_loo": ("kern., held", "others", True)}


def fidelity_table(m: Measurements, profile, models: list[str]) -> None:
    """Measured vs simulated latency per model; the profile bundled, calibrated per op kind
    only, and with the per-kernel table; in-sample and with the model held out."""
    print(f"{'model':<14}{'measured':>10}" + "".join(f"{h:>12}{'err':>6}" for h, _, _ in
                                                      COLUMNS.values()) + "   (ms)")
    errs: dict[str, list[float]] = {key: [] for key in COLUMNS}
    for name in models:
        g, t = load_graph(name), m.models[name]
        fitted_on = {"all": models, "others": [x for x in models if x != name] or models}
        cells = ""
        for key, (_, on, table) in COLUMNS.items():
            prof = profile if on is None else calibrated(
                profile, fit(_subset(m, fitted_on[on]), profile, kernel_table=table))
            v = simulated(prof, g, profile.host)
            errs[key].append(abs(v - t) / t)
            cells += f"{v * 1e3:>12.1f}{errs[key][-1]:>6.0%}"
        print(f"{name:<14}{t * 1e3:>10.1f}{cells}")
    print("median error: " + ", ".join(f"{h} {statistics.median(errs[key]):.1%}"
                                       for key, (h, _, _) in COLUMNS.items()))
    f = fit(_subset(m, models), profile, kernel_table=False)
    print(f"fitted on all: {f}; kernel table: {len(fit(_subset(m, models), profile).kernel_s)} "
          "distinct kernels")


def measurement_cost(model: str, profile, n: int) -> None:
    """Wall time per candidate of the local and the RPC measurer on ``n`` candidates."""
    import numpy as np

    from autoplace.measure.local import LocalMeasurer
    from autoplace.measure.rpc import RPCMeasurer
    from autoplace.measure.server import LocalCluster
    from autoplace.models import load_module
    from autoplace.space import SearchSpace

    mod, graph = load_module(model)
    space = SearchSpace(graph, profile)
    zeros = np.zeros(space.n_edges, dtype=np.int64)
    batch = [space.decode(i % space.n_choices, zeros) for i in range(n)]
    settings = TimeSettings(number=1, repeat=5, warmup=1)
    with LocalCluster(profile, "bench", servers=1) as cluster:
        for name, make in (
            ("local", lambda: LocalMeasurer(mod, graph, profile, settings=settings)),
            ("rpc", lambda: RPCMeasurer(mod, graph, profile, tracker=cluster.tracker,
                                        key="bench", settings=settings)),
            ("rpc-sim", lambda: RPCMeasurer(None, graph, profile, tracker=cluster.tracker,
                                            key="bench", mode="simulate"))):
            m = make()
            t0 = time.perf_counter()
            res = m.measure(batch)
            wall = time.perf_counter() - t0
            m.close()
            ok = [r.latency_s for r in res if r.ok]
            print(f"{name:<8} {model} on {profile.name}: {len(batch)} candidates "
                  f"({len({p.to_json() for p in batch})} distinct), {wall:.1f} s, "
                  f"{wall / len(batch):.2f} s per candidate; median latency "
                  f"{statistics.median(ok) * 1e3:.2f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=list(BUNDLED))
    ap.add_argument("--hw", default="host")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cache", type=Path, default=None)
    ap.add_argument("--candidates", type=int, default=8)
    ap.add_argument("--cost-model", default="squeezenet", help="model of the cost table")
    ap.add_argument("--kernel-db", type=Path, default=None,
                    help="MetaSchedule database (`autoplace tune-kernels`) the host unit's "
                         "kernels are built and timed with: the tuned build's fidelity")
    args = ap.parse_args()
    profile = load_profile(args.hw)
    print(f"host: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}"
          + (f", kernels from {args.kernel_db}" if args.kernel_db else ""))
    m = _measurements(args.models, profile, TimeSettings(repeat=args.repeat), args.cache,
                      args.kernel_db)
    fidelity_table(m, profile, args.models)
    if args.candidates:
        measurement_cost(args.cost_model, load_profile("soc"), args.candidates)


if __name__ == "__main__":
    main()
