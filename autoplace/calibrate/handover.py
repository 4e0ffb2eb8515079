"""The hand-over: what work that waits for another unit's work costs in the runtime.

A unit's ``handover_us`` (docs/simulator.md, "Schedule") is the wait between the end of work
on another resource and the start of work on the unit that waited for it: in the runtime, an
event set and a worker thread woken. What it costs depends on the machine (waking an idle
CPU costs more than a busy one; on this 2-vCPU VM, a chain of empty kernels alternating
between two units pays 8-18 us per op), so it is fitted to what the runtime does on real
models: random placements of the models over the profile's units, timed here (each
placement's fastest of several rounds), and the one hand-over of the runtime's workers that
makes the simulated latencies closest to them (least squares of the relative errors).
``autoplace calibrate --handover`` runs it after the units' own calibration.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from autoplace.calibrate.kernels import as_written
from autoplace.deploy.kernel_db import KernelDatabase
from autoplace.deploy.run import TimeSettings
from autoplace.hardware.profile import Profile
from autoplace.space import Placement, SearchSpace

#: where the hand-over is fitted (seconds)
HANDOVER_BOUNDS = (0.0, 1e-4)


@dataclass(frozen=True, kw_only=True)
class MixedRun:
    """A random placement of a model over the profile's units and its fastest time."""

    model: str
    placement: str  # Placement.to_json()
    seconds: float


def random_placements(space: SearchSpace, n: int, seed: int) -> list[Placement]:
    """``n`` random placements the simulator accepts (one seed stream of calibration's own,
    apart from those the benchmarks draw with the same seed)."""
    from autoplace.measure.batch import random_feasible

    return random_feasible(space, n, np.random.default_rng((seed, 0xCA1)))


def time_mixed(models: Sequence[str], profile: Profile, *, placements: int, rounds: int,
               settings: TimeSettings, cache_dir: Path, kernels: KernelDatabase | None = None,
               seed: int = 0, progress: Callable = print) -> list[MixedRun]:
    """Random placements of each model timed by the runtime here (the local measurer),
    ``rounds`` times in turn; each placement's fastest time (other load only adds)."""
    from autoplace.measure.local import LocalMeasurer
    from autoplace.models import load_module

    runs = []
    for name in models:
        mod, graph = load_module(name)
        space = SearchSpace(graph, profile)
        chosen = random_placements(space, placements, seed)
        m = LocalMeasurer(mod, graph, profile, space=space, settings=settings, timeout=600,
                          cache_dir=cache_dir, kernels=kernels, seed=seed)
        try:
            timed = [m.measure(chosen) for _ in range(rounds)]
        finally:
            m.close()
        for i, p in enumerate(chosen):
            if all(r[i].ok for r in timed):
                runs.append(MixedRun(model=name, placement=p.to_json(),
                                     seconds=min(r[i].latency_s for r in timed)))
        progress(f"  {name}: {sum(r.model == name for r in runs)} placements timed")
    return runs


def with_handover(profile: Profile, seconds: float, units: Sequence[str]) -> Profile:
    """``profile`` with the hand-over of ``units`` set to ``seconds`` (as TOML writes it)."""
    value = as_written(seconds, 1e-6)
    return dataclasses.replace(profile, units=tuple(
        dataclasses.replace(u, handover_s=value) if u.name in units else u
        for u in profile.units))


def handover_errors(profile: Profile, runs: Sequence[MixedRun]) -> np.ndarray:
    """Per run, the simulated latency's error relative to the measured one."""
    from autoplace.measure.simulator import Simulator
    from autoplace.models import load_graph

    errors = []
    for name in dict.fromkeys(r.model for r in runs):
        mine = [r for r in runs if r.model == name]
        sim = Simulator(SearchSpace(load_graph(name), profile))
        results = sim.measure([Placement.from_json(r.placement) for r in mine])
        errors += [(x.latency_s - r.seconds) / r.seconds for x, r in zip(results, mine)]
    return np.array(errors)


def fit_handover(profile: Profile, runs: Sequence[MixedRun]) -> tuple[float, tuple[str, ...]]:
    """The hand-over (one for every unit the runs use: workers of one runtime) that
    minimises the squared relative errors of the simulated latencies; and those units.
    Brent's search within :data:`HANDOVER_BOUNDS` never quite reaches a bound, and the
    simulated latencies step with the hand-over (it decides which work waits): no
    hand-over, when it fits better than what the search found, is kept."""
    from scipy.optimize import minimize_scalar

    used = set().union(*(Placement.from_json(r.placement).units_used() for r in runs))
    units = tuple(u.name for u in profile.units if u.name in used)
    if len(units) < 2 or not runs:
        raise ValueError("the hand-over needs placements timed over two units or more")

    def loss(h: float) -> float:
        return float(np.sum(handover_errors(with_handover(profile, h, units), runs) ** 2))

    best = minimize_scalar(loss, bounds=HANDOVER_BOUNDS, method="bounded",
                           options={"xatol": 1e-8})
    none = HANDOVER_BOUNDS[0]
    return (float(best.x) if best.fun <= loss(none) else none), units
