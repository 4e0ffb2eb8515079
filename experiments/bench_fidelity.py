"""Simulated vs measured whole-model latency on this host, and the cost of a measurement.

    python experiments/bench_fidelity.py [--models squeezenet resnet50 ...] [--repeat 5]
                                         [--cache fidelity.json] [--candidates 8]

1. Times every kernel of each model alone and each whole model (all ops on the host unit),
   as ``autoplace calibrate`` does (``--cache`` keeps the measurements for a re-run).
2. Prints, per model, the measured latency and the simulated one with the bundled ``host``
   profile, with ``host`` calibrated on all the models (in-sample), and calibrated on all
   the others (leave-one-out: the model itself is never seen), with each error; then the
   median errors.
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

from autoplace.build.run import TimeSettings
from autoplace.calibrate import Measurements, Session, calibrated, fit, measure, simulated
from autoplace.models import BUNDLED, load_graph
from autoplace.profile_io import load_profile


def _measurements(models: list[str], profile, settings: TimeSettings, cache: Path | None):
    if cache and cache.is_file():
        m = Measurements.from_dict(json.loads(cache.read_text()))
        if set(models) <= set(m.models):
            return m
    m = measure(models, profile, profile.host, session=Session(), settings=settings)
    if cache:
        cache.write_text(json.dumps(m.to_dict()) + "\n")
    return m


def _subset(m: Measurements, models: list[str]) -> Measurements:
    return Measurements(unit=m.unit, kernels=tuple(k for k in m.kernels if k.model in models),
                        models={n: m.models[n] for n in models},
                        ops={n: m.ops[n] for n in models})


def fidelity_table(m: Measurements, profile, models: list[str]) -> None:
    everyone = calibrated(profile, fit(_subset(m, models), profile))
    print(f"{'model':<14}{'measured':>10}{'host':>10}{'err':>7}{'calib.':>10}{'err':>7}"
          f"{'held out':>10}{'err':>7}   (ms)")
    errs: dict[str, list[float]] = {"host": [], "all": [], "loo": []}
    for name in models:
        g, t = load_graph(name), m.models[name]
        others = [x for x in models if x != name]
        loo = calibrated(profile, fit(_subset(m, others), profile)) if others else everyone
        row = {"host": simulated(profile, g, profile.host),
               "all": simulated(everyone, g, profile.host),
               "loo": simulated(loo, g, profile.host)}
        cells = ""
        for key, v in row.items():
            errs[key].append(abs(v - t) / t)
            cells += f"{v * 1e3:>10.1f}{errs[key][-1]:>7.0%}"
        print(f"{name:<14}{t * 1e3:>10.1f}{cells}")
    print(f"median error: host {statistics.median(errs['host']):.1%}, calibrated on all "
          f"{statistics.median(errs['all']):.1%}, held out {statistics.median(errs['loo']):.1%}")
    print(f"fitted on all: {fit(_subset(m, models), profile)}")


def measurement_cost(model: str, profile, n: int) -> None:
    """Wall time per candidate of the local and the RPC measurer on ``n`` candidates."""
    from autoplace.measure.local import LocalMeasurer
    from autoplace.measure.rpc import RPCMeasurer
    from autoplace.measure.server import LocalCluster
    from autoplace.models import load_module
    from autoplace.space import SearchSpace

    mod, graph = load_module(model)
    space = SearchSpace(graph, profile)
    batch = [space.decode([i % len(c) for c in space.op_choices], {}) for i in range(n)]
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
    args = ap.parse_args()
    profile = load_profile(args.hw)
    print(f"host: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")
    m = _measurements(args.models, profile, TimeSettings(repeat=args.repeat), args.cache)
    fidelity_table(m, profile, args.models)
    if args.candidates:
        measurement_cost(args.cost_model, load_profile("soc"), args.candidates)


if __name__ == "__main__":
    main()
