"""Measure placements on this host: build each (parallel workers), time it (one at a time).

Every candidate of a batch is built first, then the libraries are timed one after another
in a single runner process, so a build never competes with a timed run for the cores. A
run that exceeds ``timeout`` is killed (TIMEOUT); a run that crashes its process is a RUN
failure; a build failure is a BUILD failure. Identical placements in one batch are built
and timed once.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import tvm
from tvm.support.popen_pool import PopenWorker

from autoplace.deploy.pool import Artifact, BuildPool, first_line
from autoplace.deploy.run import DEFAULT_TIMING, Loaded, TimeSettings, median, random_inputs
from autoplace.deploy.schedule import threads_for, use_threads
from autoplace.deploy.targets import BuildError, unit_target
from autoplace.graph import OpGraph
from autoplace.measure.base import ErrorKind, Measurer, MeasureResult
from autoplace.measure.simulator import Simulator
from autoplace.profile import Profile
from autoplace.space import Placement, SearchSpace


def time_library(path: str, settings: dict, seed: int, threads: int = 1) -> dict:
    """Load a built library here, time ``main`` on seeded random inputs (runner process,
    its thread pool ``threads`` wide)."""
    use_threads(threads)
    try:
        loaded = Loaded(tvm.runtime.load_module(path))
        args = loaded.inputs(random_inputs(loaded.meta, seed))
        return {"times": loaded.time(args, TimeSettings(**settings))}
    except Exception as exc:  # noqa: BLE001 - any run failure is a result
        return {"error": first_line(exc)}


class Prechecker:
    """Failures known without building: the placement does not fit, or overflows a scope."""

    def __init__(self, graph: OpGraph, profile: Profile, space: SearchSpace, *,
                 check_capacity: bool = True):
        self.space = space
        self.sim = Simulator(space) if check_capacity else None

    def __call__(self, placement: Placement) -> MeasureResult | None:
        problem = self.space.check(placement)
        if problem:
            kind = ErrorKind.NO_COPY_PATH if "no copy path" in problem else ErrorKind.INVALID
            return MeasureResult.failure(kind, problem)
        if self.sim is not None:
            sim = self.sim.simulate(placement, timeline=False)
            if sim.error is ErrorKind.OUT_OF_MEMORY:
                return MeasureResult.failure(sim.error, f"{sim.detail} (profile capacity; "
                                             "not built)")
        return None


class Batch:
    """A batch's results: failures found before building, and the distinct rest to measure."""

    def __init__(self, placements: Sequence[Placement], precheck: Callable):
        self.results: list[MeasureResult | None] = [None] * len(placements)
        self.todo: dict[str, list[int]] = {}
        self.placements: dict[str, Placement] = {}
        for i, p in enumerate(placements):
            fail = precheck(p)
            if fail is not None:
                self.results[i] = fail
                continue
            key = p.to_json()
            self.todo.setdefault(key, []).append(i)
            self.placements[key] = p

    def keys(self) -> list[str]:
        return list(self.todo)

    def set(self, key: str, result: MeasureResult) -> None:
        for i in self.todo[key]:
            self.results[i] = result

    def done(self) -> list[MeasureResult]:
        missing = [i for i, r in enumerate(self.results) if r is None]
        if missing:
            raise RuntimeError(f"measurer bug: no result for candidates {missing}")
        return list(self.results)


def result_from_times(times: list[float]) -> MeasureResult:
    return MeasureResult(latency_s=median(times))


class BuildingMeasurer(Measurer):
    """Shared by the local and RPC measurers: prechecks, a build pool, a work directory."""

    def __init__(self, mod, graph: OpGraph, profile: Profile, *, space: SearchSpace | None,
                 build_workers: int, build_timeout: float | None, check_capacity: bool,
                 workdir: str | Path | None, memory_scopes: str = "global"):
        self.graph, self.profile = graph, profile
        self.space = space or SearchSpace(graph, profile)
        self.precheck = Prechecker(graph, profile, self.space, check_capacity=check_capacity)
        for unit in profile.units:
            try:
                unit_target(unit, profile)  # a unit built for the host says so here, once
            except BuildError:
                pass  # each candidate using the unit fails its build, with the reason
        self._tmp = None if workdir else tempfile.mkdtemp(prefix="autoplace-")
        self.workdir = Path(workdir or self._tmp)
        self.pool = BuildPool(mod, graph, profile, self.workdir, workers=build_workers,
                              timeout=build_timeout, memory_scopes=memory_scopes
                              ) if mod is not None else None

    def _build(self, batch: Batch) -> dict[str, Artifact]:
        keys = batch.keys()
        arts = self.pool.build([batch.placements[k] for k in keys]) if keys else []
        out = {}
        for key, art in zip(keys, arts):
            if art.ok:
                out[key] = art
            else:
                batch.set(key, MeasureResult.failure(ErrorKind.BUILD, art.error))
        return out

    @staticmethod
    def _discard(art: Artifact) -> None:
        """Delete a measured library (with its weights it can be hundreds of MB)."""
        Path(art.path).unlink(missing_ok=True)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)


class LocalMeasurer(BuildingMeasurer):
    """Builds each placement of ``mod`` (the fused module of ``graph``) and times it here.

    ``settings`` (warm-up, repeats, runs per repeat) are TVM time-evaluator settings; the
    latency is the median of the repeats. ``timeout`` bounds one candidate's run (seconds),
    ``build_timeout`` one build. ``check_capacity`` fails placements that overflow a scope
    of the profile without building them (OUT_OF_MEMORY), as the simulator does.
    ``memory_scopes`` is passed to :func:`autoplace.deploy.apply` ("profile" only runs where
    the runtime can allocate the profile's scope names).
    """

    name = "local"

    def __init__(self, mod, graph: OpGraph, profile: Profile, *,
                 space: SearchSpace | None = None, settings: TimeSettings = DEFAULT_TIMING,
                 timeout: float = 60.0, build_timeout: float | None = None,
                 build_workers: int = 2, check_capacity: bool = True, seed: int = 0,
                 workdir: str | Path | None = None, memory_scopes: str = "global"):
        if timeout <= 0:
            raise ValueError(f"timeout > 0 must hold, got timeout={timeout}")
        super().__init__(mod, graph, profile, space=space, build_workers=build_workers,
                         build_timeout=build_timeout, check_capacity=check_capacity,
                         workdir=workdir, memory_scopes=memory_scopes)
        self.settings, self.timeout, self.seed = settings, timeout, seed
        self._runner = PopenWorker()

    def measure(self, placements: Sequence[Placement]) -> list[MeasureResult]:
        batch = Batch(placements, self.precheck)
        for key, art in self._build(batch).items():
            batch.set(key, self._run(art))
            self._discard(art)
        return batch.done()

    def _run(self, art: Artifact) -> MeasureResult:
        settings = dataclasses.asdict(self.settings)
        try:
            self._runner.send(time_library, (art.path, settings, self.seed,
                                             threads_for(self.profile)), timeout=self.timeout)
            res = self._runner.recv()
        except TimeoutError:
            return MeasureResult.failure(ErrorKind.TIMEOUT,
                                         f"run exceeded the {self.timeout:g} s timeout")
        except ChildProcessError:
            return MeasureResult.failure(ErrorKind.RUN, "the run crashed its process")
        if "error" in res:
            return MeasureResult.failure(ErrorKind.RUN, res["error"])
        return result_from_times(res["times"])

    def close(self) -> None:
        self._runner.kill()
        super().close()
