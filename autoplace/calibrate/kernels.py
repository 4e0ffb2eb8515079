"""Calibration: measure a model's kernels on a real unit, fit the profile's numbers to them.

For one unit (the host by default) and the models given:

1. each model runs with every op on the unit, keeping the fastest repeat (other load on
   the machine only ever adds time): on this host by the runtime (:mod:`autoplace.runtime`,
   the kernels' times taken from its trace of the runs, so the overhead is the runtime's own
   dispatch); on an RPC server, every distinct kernel is compiled alone and timed, and the
   whole model is built and timed by the Relax VM;
2. the simulator's parameters of that unit are fitted to those times:
   - ``bandwidth_gbps`` of the unit's home scope from the kernels that compute nothing
     (reshapes, concatenations: pure data movement),
   - ``gflops[kind]`` per op kind so that the roofline ``max(flops / gflops, bytes / bw)``
     summed over the kind's kernels equals their measured total,
   - ``launch_overhead_us`` from what the whole model takes beyond its kernels (the
     runtime's, or the VM's, dispatch and allocations), per op;
   - a per-kernel latency table (``kernel_us``): the measured time of each distinct kernel,
     keyed by ``kind:flops:bytes``; the simulator uses it instead of the roofline for the
     ops it knows, and the fitted throughputs for the others;
   - where RAPL's counters are readable here, ``idle_w`` and ``pj_per_flop`` from the
     energy of an idle run and of each model's runs (:mod:`autoplace.calibrate.energy`);
3. the profile is written back as TOML with those numbers (everything else unchanged).
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from autoplace.calibrate.energy import EnergySample, PowerFit, Rapl, idle_sample, sample
from autoplace.deploy import build
from autoplace.deploy.kernel_db import KernelDatabase
from autoplace.deploy.run import DEFAULT_TIMING, Loaded, TimeSettings, random_inputs
from autoplace.deploy.targets import unit_target
from autoplace.graph import OpGraph, kernel_key
from autoplace.hardware.profile import Profile
from autoplace.space import SearchSpace

#: Kernel timing: each repeat runs at least this long (small kernels are repeated).
KERNEL_MIN_REPEAT_MS = 20


@dataclass(frozen=True, kw_only=True)
class KernelTime:
    """One op of a model and the measured time of its kernel alone."""

    model: str
    op: str
    func: str
    kind: str
    flops: float
    nbytes: int
    seconds: float


@dataclass(frozen=True, kw_only=True)
class Measurements:
    """Kernel times and whole-model times of one unit, and the energy of its runs where
    RAPL measured it (an idle run, then each model's; empty where it did not)."""

    unit: str
    kernels: tuple[KernelTime, ...]
    models: dict[str, float]  # model -> whole-model latency (s) on the unit
    ops: dict[str, int]  # model -> number of ops
    energy: tuple[EnergySample, ...] = ()

    def to_dict(self) -> dict:
        return {"unit": self.unit, "kernels": [dataclasses.asdict(k) for k in self.kernels],
                "models": dict(self.models), "ops": dict(self.ops),
                "energy": [dataclasses.asdict(e) for e in self.energy]}

    @classmethod
    def from_dict(cls, d: dict) -> Measurements:
        return cls(unit=d["unit"], kernels=tuple(KernelTime(**k) for k in d["kernels"]),
                   models=dict(d["models"]), ops=dict(d["ops"]),
                   energy=tuple(EnergySample(**e) for e in d.get("energy", ())))


class Session:
    """Where timing happens: this host, or an RPC session (``rpc.connect_tracker().request``)."""

    def __init__(self, remote=None):
        self.remote = remote

    def load(self, exe, workdir: Path, name: str):
        """The executable as a runtime module on the device."""
        if self.remote is None:
            return exe if hasattr(exe, "time_evaluator") else exe.jit()
        path = workdir / f"{name}.so"
        exe.export_library(str(path))
        self.remote.upload(str(path))
        return self.remote.load_module(path.name)

    def device(self, dev_type: int, dev_id: int):
        import tvm

        return (self.remote.device if self.remote is not None else tvm.device)(dev_type, dev_id)


# -- measuring ------------------------------------------------------------------------------
def _random_args(pf, device, rng) -> list:
    import tvm

    args = []
    for p in pf.params:
        shape = [int(d) for d in p.ty.shape]
        dtype = str(p.ty.dtype)
        arr = rng.random(shape).astype(dtype) if "float" in dtype else np.zeros(shape, dtype)
        args.append(tvm.runtime.tensor(arr, device=device))
    return args


def time_kernels(mod, graph: OpGraph, profile: Profile, target, session: Session, workdir: Path,
                 settings: TimeSettings, seed: int = 0,
                 kernels: KernelDatabase | None = None) -> dict[str, float]:
    """Seconds per call of each distinct kernel of ``graph``, compiled alone for ``target``
    and scheduled as the runtime's libraries schedule it (by ``kernels`` where it has a
    record; a weight packed once is read packed, its packing not timed)."""
    import tvm

    from autoplace.runtime.layout import runtime_program
    from autoplace.runtime.libraries import split_kernel

    program = runtime_program(mod, graph, profile)
    funcs = sorted({op.func or op.name for op in graph.ops})
    computes = {f: split_kernel(program, f, target, kernels)[0] for f in funcs}
    kmod = tvm.IRModule({f: pf.with_attr("global_symbol", f) for f, pf in computes.items()})
    lib = session.load(tvm.compile(kmod, target=target), workdir, f"kernels-{graph.name}")
    dev = session.device(int(target.get_target_device_type()), 0)
    rng = np.random.default_rng(seed)
    out = {}
    for f in funcs:
        timer = lib.time_evaluator(f, dev, number=1, repeat=settings.repeat,
                                   min_repeat_ms=KERNEL_MIN_REPEAT_MS)
        out[f] = min(float(x) for x in timer(*_random_args(computes[f], dev, rng)).results)
    return out


def time_model(mod, graph: OpGraph, profile: Profile, unit: str, session: Session,
               workdir: Path, settings: TimeSettings, seed: int = 0,
               kernels: KernelDatabase | None = None) -> float:
    """Latency of the whole model built with every op on ``unit`` (fastest repeat), its
    kernels scheduled by ``kernels`` where it has them."""
    placement = _uniform(SearchSpace(graph, profile), unit, graph)
    built = build(mod, placement, profile, graph=graph, kernels=kernels)
    lib = session.load(built.executable, workdir,
                       f"model-{graph.name}")
    loaded = Loaded(lib, device=session.device)
    return min(loaded.time(loaded.inputs(random_inputs(loaded.meta, seed)), settings))


def measure(models: Sequence[str], profile: Profile, unit: str, *, session: Session,
            settings: TimeSettings = DEFAULT_TIMING, progress: Callable = print,
            cache_dir: Path | None = None, kernels: KernelDatabase | None = None,
            rapl: Rapl | None = None) -> Measurements:
    """Kernel and whole-model times of ``models`` on ``unit`` (imports TVM), the kernels
    scheduled by ``kernels`` where it has a record (see :func:`time_kernels`); on this
    host with ``rapl``, the energy of an idle run and of each model's runs too."""
    from autoplace.models import load_module

    timed, whole, ops = [], {}, {}
    rapl = rapl if session.remote is None else None
    energy = [idle_sample(rapl)] if rapl is not None else []
    with tempfile.TemporaryDirectory(prefix="autoplace-cal-") as tmp:
        for name in models:
            mod, graph = load_module(name)
            if session.remote is None:
                times, whole[name], runs = run_here(mod, graph, profile, unit, settings,
                                                    cache_dir or Path(tmp), kernels=kernels,
                                                    rapl=rapl)
                energy += [runs] if runs is not None else []
            else:
                target = unit_target(profile.unit(unit), profile)
                funcs = time_kernels(mod, graph, profile, target, session, Path(tmp), settings,
                                     kernels=kernels)
                times = [funcs[op.func or op.name] for op in graph.ops]
                whole[name] = time_model(mod, graph, profile, unit, session, Path(tmp),
                                         settings, kernels=kernels)
            timed += [KernelTime(model=name, op=op.name, func=op.func or op.name,
                                 kind=op.kind, flops=op.flops,
                                 nbytes=op.bytes_read + op.output_bytes, seconds=t)
                      for op, t in zip(graph.ops, times)]
            ops[name] = len(graph.ops)
            progress(f"  {name}: {len(graph.ops)} kernels, whole model "
                     f"{whole[name] * 1e3:.2f} ms")
    return Measurements(unit=unit, kernels=tuple(timed), models=whole, ops=ops,
                        energy=tuple(energy))


def run_here(mod, graph: OpGraph, profile: Profile, unit: str, settings: TimeSettings,
             cache_dir: Path, seed: int = 0, kernels: KernelDatabase | None = None,
             rapl: Rapl | None = None) -> tuple[list[float], float, EnergySample | None]:
    """Each op's kernel seconds and the whole model's, with every op on ``unit``, run by
    the runtime here: the fastest of ``settings.repeat`` runs (and at least 5) each; and
    with ``rapl``, the energy of a second of its runs (None without)."""
    from autoplace.runtime import Runtime

    placement = _uniform(SearchSpace(graph, profile), unit, graph)
    with Runtime(mod, graph, profile, cache_dir=cache_dir, kernels=kernels) as rt:
        a = rt.assemble(placement)
        rt.feed(a, random_inputs({"inputs": [s.to_dict() for s in rt.program.inputs]}, seed))
        for _ in range(settings.warmup):
            rt.trace(a)
        traces = [rt.trace(a) for _ in range(max(5, settings.repeat))]
        runs = None if rapl is None else sample(rapl, lambda: rt.trace(a),
                                                sum(op.flops for op in graph.ops))
    per_op = [min(t.end[i] - t.start[i] for t in traces) * 1e-9 for i in a.schedule.op_work]
    return per_op, min(t.wall_ns for t in traces) * 1e-9, runs


def _uniform(space: SearchSpace, unit: str, graph: OpGraph):
    placement = space.uniform(unit)
    if placement is None:
        raise ValueError(f"unit {unit!r} does not accept every op of {graph.name}; "
                         "calibrate a unit that does (e.g. the host)")
    return placement


# -- fitting --------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Fit:
    """Fitted numbers of one unit (and its home scope's bandwidth)."""

    unit: str
    scope: str
    gflops: dict[str, float]
    bandwidth_bps: float
    launch_overhead_s: float
    kernel_s: dict[str, float] = dataclasses.field(default_factory=dict)


def _fit_bandwidth(kernels: Sequence[KernelTime], default: float) -> float:
    """Bytes per second of pure data movement (injective kernels without FLOPs), at least
    the bytes per second of every kind: no kind may be slower than its own data moves.

    (``exp`` and friends also count zero FLOPs but compute; they do not set the rate.)
    """
    moving = [k for k in kernels if k.flops == 0 and k.nbytes > 0 and k.kind == "injective"]
    total = sum(k.seconds for k in moving)
    bw = sum(k.nbytes for k in moving) / total if total > 0 else default
    for kind in {k.kind for k in kernels}:
        mine = [k for k in kernels if k.kind == kind]
        seconds = sum(k.seconds for k in mine)
        if seconds > 0:
            bw = max(bw, sum(k.nbytes for k in mine) / seconds)
    return bw


def _fit_gflops(kernels: Sequence[KernelTime], bw: float) -> float:
    """GFLOP/s g with sum(max(flops / g, bytes / bw)) == sum(seconds), by bisection."""
    target = sum(k.seconds for k in kernels)
    flops = np.array([k.flops for k in kernels])
    memory = np.array([k.nbytes / bw for k in kernels])
    if memory.sum() >= target * (1 - 1e-9):  # data movement explains the time: the
        # lowest throughput at which no kernel becomes compute bound
        bound = flops[memory > 0] / memory[memory > 0]
        return float(max(bound.max(initial=0.0), flops.sum() / target) / 1e9)
    lo, hi = -4.0, 6.0  # log10 GFLOP/s
    for _ in range(60):
        mid = (lo + hi) / 2
        pred = np.maximum(flops / (10 ** mid * 1e9), memory).sum()
        lo, hi = (mid, hi) if pred > target else (lo, mid)
    return float(10 ** ((lo + hi) / 2))


def fit(m: Measurements, profile: Profile, *, kernel_table: bool = True) -> Fit:
    """The unit's throughput per op kind, launch overhead and home-scope bandwidth, and
    (``kernel_table``) the fastest measured time of each distinct kernel."""
    scope = profile.home_scope(m.unit)
    bw = _fit_bandwidth(m.kernels, profile.scope(scope).bandwidth_bps)
    kinds = sorted({k.kind for k in m.kernels if k.flops > 0})
    gflops = {kind: _fit_gflops([k for k in m.kernels if k.kind == kind], bw) for kind in kinds}
    gflops["default"] = _fit_gflops([k for k in m.kernels if k.flops > 0], bw)
    table: dict[str, float] = {}
    for k in m.kernels if kernel_table else ():
        key = kernel_key(k.kind, k.flops, k.nbytes)
        table[key] = min(k.seconds, table.get(key, k.seconds))
    return Fit(unit=m.unit, scope=scope, gflops={k: round(v, 4) for k, v in gflops.items()},
               bandwidth_bps=bw, launch_overhead_s=_fit_overhead(m),
               kernel_s=dict(sorted(table.items())))


def _fit_overhead(m: Measurements) -> float:
    """Per-op time of the whole models beyond their kernels, by least squares.

    Model ``i`` with ``n`` ops and kernels summing to ``S`` took ``T = S + n * o``; timing
    noise grows with ``T``, so each model is weighted by ``1 / T**2`` (the small models,
    where the overhead shows, decide it).
    """
    num = den = 0.0
    for name, t in m.models.items():
        n = m.ops[name]
        extra = t - sum(k.seconds for k in m.kernels if k.model == name)
        num += n * extra / t**2
        den += n * n / t**2
    return max(0.0, num / den) if den > 0 else 0.0


def as_written(value: float, scale: float) -> float:
    """``value`` as it reads back from the TOML :func:`to_toml` writes (``scale`` = unit)."""
    return scale * float(f"{value / scale:.12g}")


def calibrated(profile: Profile, f: Fit, *, name: str | None = None,
               power: PowerFit | None = None) -> Profile:
    """``profile`` with the fitted numbers of one unit and its home scope (and ``power``:
    its fitted ``idle_w`` and ``pj_per_flop``, its ``default`` alone, instead of
    ``power_w``); on a mesh, of that unit and scope of every PE (``pe3.npu``: every
    ``pe<k>.npu``; the PEs are alike).

    The numbers are rounded as :func:`to_toml` writes them, so the written profile has
    the same hash as this one.
    """
    gflops = {k: float(f"{v:.12g}") for k, v in f.gflops.items()}
    table = {k: as_written(v, 1e-6) for k, v in f.kernel_s.items()}
    fitted_units, fitted_scopes = _alike(profile, f.unit), _alike(profile, f.scope)
    energy = {} if power is None else {
        "idle_w": as_written(power.idle_w, 1.0), "power_w": 0.0,
        "j_per_flop": {"default": as_written(power.j_per_flop, 1e-12)}}
    units = tuple(dataclasses.replace(u, gflops=gflops, kernel_s=table,
                                      launch_overhead_s=as_written(f.launch_overhead_s, 1e-6),
                                      **energy)
                  if u.name in fitted_units else u for u in profile.units)
    bw = as_written(f.bandwidth_bps, 1e9)
    scopes = tuple(dataclasses.replace(s, bandwidth_bps=bw) if s.name in fitted_scopes else s
                   for s in profile.scopes)
    return dataclasses.replace(profile, name=name or f"{profile.name}-calibrated", units=units,
                               scopes=scopes,
                               description=f"{profile.description} (unit {f.unit} calibrated)")


def _alike(profile: Profile, name: str) -> set[str]:
    """``name`` and, if it is a PE's unit or scope (``pe<k>.<suffix>``), every PE's."""
    if profile.mesh is None or profile.mesh.pe_of(name) is None:
        return {name}
    suffix = name.partition(".")[2]
    return {f"pe{k}.{suffix}" for k in range(profile.mesh.size)}


# -- the command ----------------------------------------------------------------------------
def simulated(profile: Profile, graph: OpGraph, unit: str) -> float:
    """Simulated latency of ``graph`` with every op on ``unit`` (its home scope)."""
    from autoplace.measure.simulator import Simulator

    space = SearchSpace(graph, profile)
    return Simulator(space).simulate(space.uniform(unit)).latency_s


def report(m: Measurements, before: Profile, after: Profile, f: Fit) -> list[str]:
    """Lines: fitted numbers, then measured vs simulated latency per model."""
    from autoplace.models import load_graph

    old = before.unit(f.unit)
    lines = [f"unit {f.unit}: launch overhead {old.launch_overhead_s * 1e6:.2f} -> "
             f"{f.launch_overhead_s * 1e6:.2f} us; scope {f.scope} bandwidth "
             f"{before.scope(f.scope).bandwidth_bps / 1e9:.2f} -> {f.bandwidth_bps / 1e9:.2f} GB/s"]
    for kind, g in sorted(f.gflops.items()):
        was = old.gflops.get(kind, old.gflops.get("default"))
        lines.append(f"  gflops[{kind}] {was} -> {g:.3f}")
    lines.append(f"{'model':<14}{'measured ms':>12}{'before ms':>12}{'after ms':>12}{'error':>8}")
    for name, t in m.models.items():
        g = load_graph(name)
        a, b = simulated(before, g, f.unit), simulated(after, g, f.unit)
        lines.append(f"{name:<14}{t * 1e3:>12.2f}{a * 1e3:>12.2f}{b * 1e3:>12.2f}"
                     f"{abs(b - t) / t:>8.1%}")
    return lines
