"""The runtime against the Relax VM, the simulator and the measurer of fa7bb04 (issue 28).

Tables (markdown, load printed beside every row; same machine, same minute):

1. ``vm``: per model, the same placement (every op on the host profile's ``cpu`` unit, both
   cores) timed by the Relax VM one kernel at a time (the build of fa7bb04) and by the
   runtime; their ratio. The VM runs in the calling thread's TVM pool: by default one
   thread on this 2-vCPU x86 host (TVM counts half the logical CPUs as cores), so the VM
   is also timed in a pool the size of the unit's, the runtime's own cost beside it.
2. ``tuned``: per model, the best placement the local measurer finds in ``--trials`` trials
   against the best single-unit placement, both measured again by the runtime (three
   interleaved rounds, each placement's fastest); the simulator's predicted gain beside it.
3. ``fidelity``: simulated against measured latency of ``--random`` random feasible
   placements per model (each the fastest of three interleaved rounds): median and worst
   relative error, with the profile's hand-over and without one.
4. ``rate``: measured candidates per minute on squeezenet (``--rate-hw``, default
   :data:`RATE_HOST`: this host's CPU as two units, a profile both trees read alike), the
   runtime's local measurer against fa7bb04's (``--baseline-tree``: a checkout of it), on
   the same candidates; the runtime twice: with an empty kernel cache (the job compiles
   every unit's library first) and again with the libraries it left (a later job).
5. ``branches``: two independent branches of 24 small MatMul+Relu kernels on two one-core
   units: the best measured placement against one unit.
6. ``overhead``: the runtime's time per op of a chain of empty kernels, on one unit and
   alternating between two (an event per op); and its time per run beyond the kernels, of
   a run of one empty kernel, and of two on two units (a run's start and end: waking the
   workers, waiting for them).
7. ``pools``: per model on ``soc``, each scope's arena over the simulated peak for random
   feasible placements (nothing runs: the placements are only assembled).

Run from the repository root: ``python experiments/bench_runtime.py [--tables ...]
[--models ...] [--trials 256] [--random 100] [--baseline-tree DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

MODELS = ["squeezenet", "resnet50", "inception_v1", "inception_v2", "densenet121",
          "shufflenet"]
TWO_CORES = """
name = "two-cores"
host = "core0"
default_scope = "dram"
copies = []
[units.core0]
target = { kind = "llvm", num-cores = 1 }
accepts = ["*"]
cpus = [0]
launch_overhead_us = 8
[units.core0.gflops]
default = 4.0
[units.core1]
target = { kind = "llvm", num-cores = 1 }
accepts = ["*"]
cpus = [1]
launch_overhead_us = 8
[units.core1.gflops]
default = 4.0
[scopes.dram]
capacity_mib = 4096
bandwidth_gbps = 20
access = ["*"]
"""


# The rate's profile: this host's CPU (AVX-512) as two units, in keys fa7bb04 reads too
RATE_HOST = """
name = "rate-host"
host = "cpu"
default_scope = "dram"
copies = []
[units.cpu]
target = { kind = "llvm", num-cores = 2, mcpu = "x86-64-v4" }
accepts = ["*"]
[units.cpu.gflops]
default = 100.0
[units.core0]
target = { kind = "llvm", num-cores = 1, mcpu = "x86-64-v4" }
accepts = ["*"]
[units.core0.gflops]
default = 50.0
[scopes.dram]
capacity_mib = 4096
bandwidth_gbps = 20
access = ["*"]
"""


def load() -> str:
    return f"{os.getloadavg()[0]:.2f}"


def markdown(rows: list[dict]) -> str:
    if not rows:
        return "(no rows)"
    cols = list(dict.fromkeys(c for r in rows for c in r))  # every row's, in order
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def settings(repeat: int = 5):
    from autoplace.deploy.run import TimeSettings

    return TimeSettings(number=1, repeat=repeat, warmup=1)


# -- 1. the VM against the runtime ---------------------------------------------------------
def in_pool(threads: int, cpus, fn):
    """``fn()`` in a thread whose TVM pool has ``threads`` threads on ``cpus``, as the
    runtime's worker of such a unit has."""
    from autoplace.runtime.workers import pool_setup

    box = {}

    def run():
        pool_setup(threads, cpus)()
        box["value"] = fn()

    th = threading.Thread(target=run)
    th.start()
    th.join()
    return box["value"]


def vm_row(name: str, profile, cache: Path) -> dict:
    """The VM as it runs by default (TVM's pool of the calling thread: on this 2-vCPU x86
    host one thread, TVM counting half the logical CPUs as cores) and in a pool the size of
    the unit's, against the runtime (whose worker has the unit's pool)."""
    from autoplace.deploy import build
    from autoplace.deploy.run import Loaded, random_inputs
    from autoplace.models import load_module
    from autoplace.runtime import Runtime
    from autoplace.space import SearchSpace

    mod, graph = load_module(name)
    unit = profile.unit("cpu")
    threads = len(unit.cpus)  # the host profile pins its units
    placement = SearchSpace(graph, profile).uniform(unit.name)
    loaded = Loaded(build(mod, placement, profile, graph=graph).executable)
    args = loaded.inputs(random_inputs(loaded.meta, 0))
    with Runtime(mod, graph, profile, cache_dir=cache) as rt:
        a = rt.assemble(placement)
        rt.feed(a, random_inputs(loaded.meta, 0))
        vm, vm_unit, ours = [], [], []
        for _ in range(3):  # interleaved: the same minute for all three
            vm.append(statistics.median(loaded.time(args, settings())))
            vm_unit.append(in_pool(threads, unit.cpus, lambda: statistics.median(
                loaded.time(args, settings()))))
            ours.append(statistics.median(rt.time(a, settings())))
    v, vu, o = min(vm), min(vm_unit), min(ours)
    return {"model": name, "ops": len(graph.ops), "VM ms (1 thread)": f"{v * 1e3:.2f}",
            f"VM ms ({threads} threads)": f"{vu * 1e3:.2f}",
            "runtime ms": f"{o * 1e3:.2f}", "VM 1 thread / runtime": f"{v / o:.2f}",
            f"VM {threads} threads / runtime": f"{vu / o:.2f}", "load": load()}


# -- 2. tuned against the best single unit ------------------------------------------------
def tuned_row(name: str, profile, cache: Path, trials: int, seed: int = 0) -> dict:
    from autoplace.measure.local import LocalMeasurer
    from autoplace.measure.simulator import Simulator
    from autoplace.models import load_module
    from autoplace.records.tuning_log import TuningLog
    from autoplace.search import TuneConfig, tune
    from autoplace.space import SearchSpace

    mod, graph = load_module(name)
    space = SearchSpace(graph, profile)
    sim = Simulator(space)
    singles = [p for p in (space.uniform(u.name) for u in profile.units) if p is not None]
    m = LocalMeasurer(mod, graph, profile, space=space, settings=settings(3), cache_dir=cache,
                      timeout=600)
    try:
        with tempfile.TemporaryDirectory() as tmp, TuningLog(Path(tmp) / "t.jsonl") as log:
            t0 = time.perf_counter()
            result = tune(space, m, log, TuneConfig(trials=trials, seed=seed))
            wall = time.perf_counter() - t0
        best = result.best.placement
        rounds = [m.measure([best, *singles]) for _ in range(3)]  # interleaved, same minute
    finally:
        m.close()
    fastest = [min((r[i].latency_s for r in rounds if r[i].ok), default=float("inf"))
               for i in range(1 + len(singles))]  # each placement's best of 3 medians
    tuned, single = fastest[0], min(fastest[1:])
    which = singles[fastest[1:].index(single)]
    predicted = sim.simulate(which).latency_s / sim.simulate(best).latency_s
    return {"model": name, "trials": trials, "tune s": f"{wall:.0f}",
            "best single unit": next(iter(which.units_used())),
            "single ms": f"{single * 1e3:.2f}", "tuned ms": f"{tuned * 1e3:.2f}",
            "tuned gain": f"{single / tuned:.3f}", "simulated gain": f"{predicted:.3f}",
            "units used": ", ".join(sorted(best.units_used())), "load": load()}


# -- 3. simulated against measured --------------------------------------------------------
def fidelity_row(name: str, profile, cache: Path, n: int, seed: int = 0,
                 rounds: int = 3, kernel_db: Path | None = None) -> dict:
    """Each placement timed in ``rounds`` interleaved rounds (median of 3 runs each), its
    fastest kept, as calibration keeps it; simulated with the profile and with its units'
    hand-over set to 0 (the simulator before it had one). ``kernel_db``: the kernels are
    built as that database schedules them (the tuned build; the profile should then be
    calibrated on the same database: ``autoplace calibrate --kernel-db``)."""
    from autoplace.calibrate.handover import with_handover
    from autoplace.deploy.kernel_db import KernelDatabase
    from autoplace.measure.batch import random_feasible
    from autoplace.measure.local import LocalMeasurer
    from autoplace.measure.simulator import Simulator
    from autoplace.models import load_module
    from autoplace.space import SearchSpace

    mod, graph = load_module(name)
    space = SearchSpace(graph, profile)
    sim, chosen = Simulator(space), random_feasible(space, n, np.random.default_rng(seed))
    m = LocalMeasurer(mod, graph, profile, space=space, settings=settings(3), cache_dir=cache,
                      timeout=600, kernels=KernelDatabase(kernel_db) if kernel_db else None)
    try:
        timed = [m.measure(chosen) for _ in range(rounds)]
    finally:
        m.close()
    none = Simulator(SearchSpace(graph, with_handover(profile, 0.0, space.units)))
    row = {"model": name}
    for label, s in (("", sim), (" without hand-over", none)):
        err = [abs(s.simulate(p).latency_s - t) / t for p, t in
               ((p, min(r[i].latency_s for r in timed)) for i, p in enumerate(chosen)
                if all(r[i].ok for r in timed))]
        row.update({"placements": len(err), f"median error{label}": f"{np.median(err):.1%}",
                    f"worst error{label}": f"{max(err):.1%}"})
    return {**row, "load": load()}


# -- 4. candidates per minute -------------------------------------------------------------
RATE_SNIPPET = """
import json, sys, time
from autoplace.models import load_module
from autoplace.hardware.load import load_profile
from autoplace.space import Placement, SearchSpace
from autoplace.deploy.run import TimeSettings
from autoplace.measure.local import LocalMeasurer
mod, graph = load_module("squeezenet")
profile = load_profile(sys.argv[1])
placements = [Placement.from_json(s) for s in json.loads(sys.stdin.read())]
kw = json.loads(sys.argv[2])
t0 = time.perf_counter()  # a measurer compiles (or finds) its kernels when it is made
m = LocalMeasurer(mod, graph, profile, settings=TimeSettings(number=1, repeat=5, warmup=1),
                  timeout=600, **kw)
res = m.measure(placements)
print(json.dumps({"seconds": time.perf_counter() - t0, "ok": sum(r.ok for r in res)}))
m.close()
"""


def rate_rows(profile_path: str | None, baseline: Path | None, n: int) -> list[dict]:
    """``profile_path`` None: :data:`RATE_HOST`, written to a file both trees read."""
    from autoplace.hardware.load import load_profile
    from autoplace.measure.batch import random_feasible
    from autoplace.models import load_graph
    from autoplace.space import SearchSpace

    if profile_path is None:
        profile_path = str(Path(tempfile.mkdtemp()) / "rate-host.toml")
        Path(profile_path).write_text(RATE_HOST)
    space = SearchSpace(load_graph("squeezenet"), load_profile(profile_path))
    chosen = [p.to_json() for p in random_feasible(space, n, np.random.default_rng(1))]
    cold = {"cache_dir": tempfile.mkdtemp(prefix="rate-cold-")}
    trees = [("runtime, empty kernel cache", Path.cwd(), cold),
             ("runtime, kernels cached (a later job)", Path.cwd(), cold)]
    if baseline is not None:
        trees.insert(0, ("Relax VM builds (fa7bb04)", baseline, {}))
    rows = []
    for label, tree, kw in trees:
        env = {**os.environ, "PYTHONPATH": str(tree)}
        out = subprocess.run([sys.executable, "-c", RATE_SNIPPET, profile_path, json.dumps(kw)],
                             input=json.dumps(chosen), capture_output=True, text=True, env=env,
                             check=True, cwd=tree)
        got = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append({"measurer": label, "candidates": n, "ok": got["ok"],
                     "s": f"{got['seconds']:.1f}",
                     "per minute": f"{60 * n / got['seconds']:.1f}", "load": load()})
    if baseline is not None:
        base = float(rows[0]["per minute"])
        for row in rows[1:]:
            row["per minute"] += f" ({float(row['per minute']) / base:.1f}x)"
    return rows


# -- 5. two branches on two cores ---------------------------------------------------------
def branches_module(depth: int = 24, rows: int = 32, width: int = 128, seed: int = 0):
    """Two independent chains of ``depth`` MatMul+Relu kernels on one input, summed."""
    from tvm import relax

    from autoplace.frontend.relax import from_relax

    rng = np.random.default_rng(seed)
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((rows, width), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            ends = []
            for _ in range(2):
                h = x
                for _ in range(depth):
                    w = rng.standard_normal((width, width)) / np.sqrt(width)
                    h = bb.emit(relax.op.nn.relu(relax.op.matmul(
                        h, relax.const(w.astype("float32")))))
                ends.append(h)
            out = bb.emit_output(relax.op.add(*ends))
        bb.emit_func_output(out)
    return from_relax(bb.finalize(), "branches")


def branches_row(cache: Path, trials: int) -> dict:
    from autoplace.hardware.load import profile_from_toml
    from autoplace.measure.local import LocalMeasurer
    from autoplace.records.tuning_log import TuningLog
    from autoplace.search import TuneConfig, tune
    from autoplace.space import SearchSpace

    mod, graph = branches_module()
    profile = profile_from_toml(TWO_CORES, "two-cores.toml")
    space = SearchSpace(graph, profile)
    m = LocalMeasurer(mod, graph, profile, space=space, settings=settings(5), cache_dir=cache)
    try:
        with tempfile.TemporaryDirectory() as tmp, TuningLog(Path(tmp) / "t.jsonl") as log:
            best = tune(space, m, log, TuneConfig(trials=trials, seed=0)).best.placement
        one, tuned = m.measure([space.uniform("core0"), best])
    finally:
        m.close()
    return {"model": f"branches ({len(graph.ops)} ops)", "trials": trials,
            "one unit ms": f"{one.latency_s * 1e3:.2f}",
            "best measured ms": f"{tuned.latency_s * 1e3:.2f}",
            "speedup": f"{one.latency_s / tuned.latency_s:.2f}",
            "ops on core1": sum(u == "core1" for u, _ in best.ops.values()), "load": load()}


# -- 6. the runtime's overhead per op ----------------------------------------------------
def empty_chain(n: int = 200):
    """``n`` one-element kernels in a chain, one op each (TE: nothing is fused)."""
    from tvm import te

    from autoplace.frontend.te import from_te

    def plus_one(a, i):
        return te.compute((1,), lambda j: a[j] + 1.0, name=f"op{i}")

    x = te.placeholder((1,), "float32", name="x")
    h = x
    for i in range(n):
        h = plus_one(h, i)
    return from_te([h], [x], "empty")


def overhead_rows(cache: Path) -> list[dict]:
    from autoplace.hardware.load import profile_from_toml
    from autoplace.runtime import Runtime
    from autoplace.space import SearchSpace

    mod, graph = empty_chain()
    profile = profile_from_toml(TWO_CORES, "two-cores.toml")
    space = SearchSpace(graph, profile)
    alternate = {op.name: "core1" if i % 2 else "core0" for i, op in enumerate(graph.ops)}
    rows = []
    with Runtime(mod, graph, profile, cache_dir=cache, space=space) as rt:
        for label, p in (("one unit", space.uniform("core0")),
                         ("alternating units", space.from_user(alternate))):
            a = rt.assemble(p)
            rt.feed(a, [np.zeros(1, "float32")])
            wall = min(rt.time(a, settings(20)))
            trace = rt.last_trace
            kernels = sum(e - s for s, e in zip(trace.start, trace.end)) * 1e-9
            rows.append({"placement": label, "ops": len(graph.ops),
                         "us per op": f"{wall / len(graph.ops) * 1e6:.2f}",
                         "us per op outside kernels":
                             f"{(wall - kernels) / len(graph.ops) * 1e6:.2f}",
                         "load": load()})
    return rows + [run_overhead_row(cache, profile, n) for n in (1, 2)]


def run_overhead_row(cache: Path, profile, n: int) -> dict:
    """A run of ``n`` empty kernels, one per unit (core0, core1): the run's wall time beyond
    its kernels' (20 times: the fastest of 50 runs, less the kernels of the last of them;
    the least of the 20)."""
    from autoplace.runtime import Runtime
    from autoplace.space import SearchSpace

    mod, graph = empty_chain(1) if n == 1 else empty_branches()
    space = SearchSpace(graph, profile)
    units = {op.name: f"core{i}" for i, op in enumerate(graph.ops)}
    with Runtime(mod, graph, profile, cache_dir=cache, space=space) as rt:
        a = rt.assemble(space.from_user(units))
        rt.feed(a, [np.zeros(1, "float32")])
        best = float("inf")
        for _ in range(20):
            wall = min(rt.time(a, settings(50)))
            trace = rt.last_trace
            kernels = sum(e - s for s, e in zip(trace.start, trace.end)) * 1e-9
            best = min(best, wall - kernels)
    return {"placement": f"a run of {n} op{'s' * (n > 1)} on {n} unit{'s' * (n > 1)}",
            "ops": n, "us per run outside kernels": f"{best * 1e6:.1f}", "load": load()}


def empty_branches():
    """Two one-element kernels, each on the input (independent), and no op after them."""
    from tvm import te

    from autoplace.frontend.te import from_te

    def plus(k):
        return te.compute((1,), lambda j: x[j] + float(k), name=f"op{k}")

    x = te.placeholder((1,), "float32", name="x")
    return from_te([plus(1), plus(2)], [x], "branches")


# -- 7. the arenas against the simulated peaks ---------------------------------------------
def pools_row(name: str, cache: Path, n: int, seed: int = 0) -> dict:
    from autoplace.hardware.load import load_profile
    from autoplace.measure.simulator import Simulator
    from autoplace.models import load_module
    from autoplace.runtime import PoolError, Runtime
    from autoplace.space import SearchSpace

    mod, graph = load_module(name)
    profile = load_profile("soc")
    space = SearchSpace(graph, profile)
    sim, rng, ratios, refused, tried = Simulator(space), np.random.default_rng(seed), [], 0, 0
    base, _ = space.encode([space.uniform(profile.host)])
    with Runtime(mod, graph, profile, cache_dir=cache, space=space) as rt:
        while tried < n:  # the host's placement with 40% of the ops moved at random (wholly
            choice, mode = space.random_genomes(32, rng)  # random ones overflow the SRAMs)
            keep = rng.random(choice.shape) > 0.4
            choice[keep] = np.broadcast_to(base, choice.shape)[keep]
            for p in space.decode_rows(choice, mode):
                r = sim.simulate(p)
                if tried >= n or not r.ok:
                    continue
                tried += 1
                try:
                    a = rt.assemble(p)
                except PoolError:
                    refused += 1
                    continue
                ratios += [b / r.peak_bytes[s] for s, b in a.pool_bytes.items()]
    return {"model": name, "placements": n, "arena / simulated peak (median)":
            f"{np.median(ratios):.3f}", "worst": f"{max(ratios):.3f}",
            "refused (over capacity)": refused, "load": load()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", nargs="+", default=["overhead", "branches", "vm", "rate",
                                                    "fidelity", "tuned"])
    ap.add_argument("--models", nargs="+", default=MODELS)
    ap.add_argument("--hw", default="hwprofiles/host.toml")
    ap.add_argument("--trials", type=int, default=256)
    ap.add_argument("--random", type=int, default=100)
    ap.add_argument("--rate-candidates", type=int, default=24)
    ap.add_argument("--rate-hw", default=None,
                    help="the rate's profile, one both trees read alike (default: this "
                         "host's CPU as two units, RATE_HOST)")
    ap.add_argument("--baseline-tree", type=Path, default=None,
                    help="a checkout of fa7bb04 (git worktree add DIR fa7bb04) for the rate")
    ap.add_argument("--cache-dir", type=Path,
                    default=Path(tempfile.gettempdir()) / "autoplace-bench-kernels")
    ap.add_argument("--kernel-db", type=Path, default=None,
                    help="fidelity of the tuned build: kernels as this database (autoplace "
                         "tune-kernels) schedules them; --hw calibrated on it")
    args = ap.parse_args()
    from autoplace.hardware.load import load_profile

    profile = load_profile(args.hw)
    print(f"# bench_runtime ({time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs, "
          f"profile {args.hw})", flush=True)
    for table in args.tables:
        if table == "overhead":
            rows = overhead_rows(args.cache_dir)
        elif table == "branches":
            rows = [branches_row(args.cache_dir, min(args.trials, 64))]
        elif table == "pools":
            rows = [pools_row(m, args.cache_dir, 40) for m in ("squeezenet", "inception_v1")]
        elif table == "rate":
            rows = rate_rows(args.rate_hw, args.baseline_tree, args.rate_candidates)
        else:
            fn = {"vm": lambda m: vm_row(m, profile, args.cache_dir),
                  "tuned": lambda m: tuned_row(m, profile, args.cache_dir, args.trials),
                  "fidelity": lambda m: fidelity_row(m, profile, args.cache_dir, args.random,
                                                     kernel_db=args.kernel_db)
                  }[table]
            rows = []
            for m in args.models:
                rows.append(fn(m))
                print(f"  {table} {m}: {rows[-1]}", file=sys.stderr, flush=True)
        print(f"\n## {table}\n\n{markdown(rows)}", flush=True)


if __name__ == "__main__":
    main()
