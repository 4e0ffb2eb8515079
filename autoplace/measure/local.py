"""Measure placements on this host: assembled from compiled kernels, run on every unit at once.

The kernels are compiled once per unit target (:mod:`autoplace.runtime.libraries`, cached
on disk), before the first candidate; each candidate is then assembled and timed by the
runtime (:mod:`autoplace.runtime`: a worker per unit and DMA engine, the simulator's
schedule) in a runner process, so a candidate costs its runs, never a build. A run that
exceeds ``timeout`` is killed (TIMEOUT) and the runner restarts (its libraries come from
the cache); a run that crashes its process is a RUN failure; a placement the runtime's
pools cannot hold is OUT_OF_MEMORY; a unit whose kernels cannot be built is a BUILD failure
of the candidates that use it. Identical placements in one batch are measured once.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

from tvm.support.popen_pool import PopenWorker

from autoplace.deploy.kernel_db import KernelDatabase
from autoplace.deploy.pool import Artifact, BuildPool
from autoplace.deploy.run import DEFAULT_TIMING, TimeSettings, median, random_inputs
from autoplace.deploy.targets import BuildError, InvalidTarget, check_targets, unit_target
from autoplace.graph import OpGraph
from autoplace.hardware.profile import Profile
from autoplace.measure.base import Measurer, MeasureResult
from autoplace.measure.simulator import Simulator
from autoplace.runtime import DEFAULT_CACHE, KernelLibraries, Runtime, check_program
from autoplace.runtime.layout import runtime_program
from autoplace.runtime.program import load_program, save_program
from autoplace.space import Placement, SearchSpace
from autoplace.space.problem import ErrorKind

# The runner process's runtime, made once by _start_runner.
_RUNNER: dict = {}


def _start_runner(directory: str, graph: dict, profile: Profile, cache_dir: str,
                  files: dict[str, str]) -> None:
    """The runner's runtime, on the libraries the measurer built (unit -> path)."""
    warnings.simplefilter("ignore")  # the parent process has said it once already
    graph = OpGraph.from_dict(graph)
    _RUNNER["runtime"] = Runtime(load_program(directory), graph, profile, cache_dir=cache_dir,
                                 files={u: Path(p) for u, p in files.items()})


def time_placement(placement_json: str, settings: dict, seed: int) -> dict:
    """Assemble and time one placement in the runner: seconds per run, each unit's busy
    seconds in the last run, libraries compiled; or an error kind and its detail."""
    from autoplace.runtime import PoolError, RunError

    rt: Runtime = _RUNNER["runtime"]
    before = len(rt.libraries.compiled)
    try:
        a = rt.assemble(Placement.from_json(placement_json))
        rt.feed(a, random_inputs({"inputs": [s.to_dict() for s in rt.program.inputs]}, seed))
        times = rt.time(a, TimeSettings(**settings))
    except PoolError as exc:
        return {"error": ErrorKind.OUT_OF_MEMORY.value, "detail": str(exc)}
    except BuildError as exc:
        return {"error": ErrorKind.BUILD.value, "detail": str(exc)}
    except RunError as exc:
        return {"error": ErrorKind.RUN.value, "detail": str(exc)}
    return {"times": times, "busy": rt.busy_s(a, rt.last_trace),
            "compiled": len(rt.libraries.compiled) - before}


class Prechecker:
    """Failures known without building: the placement does not fit, or overflows a scope."""

    def __init__(self, graph: OpGraph, profile: Profile, space: SearchSpace, *,
                 check_capacity: bool = True):
        self.space = space
        self.sim = Simulator(space) if check_capacity else None

    def __call__(self, placement: Placement) -> MeasureResult | None:
        problem = self.space.check(placement)
        if problem:
            return MeasureResult.refused(problem)
        if self.sim is not None:
            sim = self.sim.simulate(placement, timeline=False)
            if sim.error is ErrorKind.OUT_OF_MEMORY:
                return MeasureResult.failure(sim.error, f"{sim.detail} (profile capacity; "
                                             "not run)")
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
                 workdir: str | Path | None, memory_scopes: str = "global",
                 kernels: KernelDatabase | None = None):
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
                              timeout=build_timeout, memory_scopes=memory_scopes,
                              kernels=kernels.directory if kernels is not None else None
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


class LocalMeasurer(Measurer):
    """Times placements of ``mod`` (the fused module of ``graph``) on this host's units.

    ``settings`` (warm-up, repeats, runs per repeat): the latency is the median of the
    repeats. ``timeout`` bounds one candidate's runs (seconds). ``check_capacity`` fails
    placements that overflow a scope of the profile without running them (OUT_OF_MEMORY),
    as the simulator does. ``cache_dir`` holds the compiled kernel libraries; ``kernels``
    holds tuned schedules for them (:class:`~autoplace.deploy.kernel_db.KernelDatabase`).
    ``compiled`` counts the libraries compiled for this measurer (at most one per unit
    target, whatever the number of candidates).
    """

    name = "local"

    def __init__(self, mod, graph: OpGraph, profile: Profile, *,
                 space: SearchSpace | None = None, settings: TimeSettings = DEFAULT_TIMING,
                 timeout: float = 60.0, check_capacity: bool = True, seed: int = 0,
                 cache_dir: str | Path = DEFAULT_CACHE, kernels: KernelDatabase | None = None):
        if timeout <= 0:
            raise ValueError(f"timeout > 0 must hold, got timeout={timeout}")
        self.graph, self.profile = graph, profile
        self.space = space or SearchSpace(graph, profile)
        self.precheck = Prechecker(graph, profile, self.space, check_capacity=check_capacity)
        self.settings, self.timeout, self.seed = settings, timeout, seed
        program = runtime_program(mod, graph, profile)
        check_program(program, graph)
        check_targets(profile)  # the profile's error, before any unit's warning
        self.libraries = KernelLibraries(program, graph, profile, Path(cache_dir),
                                         kernels=kernels)
        for unit in profile.units:  # every library compiled (or found) before any run
            try:
                self.libraries.build(unit.name)
            except InvalidTarget:  # the profile's error: refused before any run
                raise
            except BuildError as exc:  # that unit's placements fail; the others run
                self.libraries.broken.setdefault(unit.name, exc)
        self._tmp = tempfile.mkdtemp(prefix="autoplace-")
        save_program(program, self._tmp)
        self._runner = PopenWorker(initializer=_start_runner, initargs=(
            self._tmp, graph.to_dict(), profile, str(cache_dir), self._files()))
        self.runner_compiled = 0

    def _files(self) -> dict[str, str]:
        """Unit -> its library, for the runner (which then compiles nothing)."""
        return {u.name: str(self.libraries.path(u.name)) for u in self.profile.units
                if u.name not in self.libraries.broken}

    @property
    def compiled(self) -> int:
        """Libraries compiled for this measurer, here and in its runner."""
        return len(self.libraries.compiled) + self.runner_compiled

    def measure(self, placements: Sequence[Placement]) -> list[MeasureResult]:
        batch = Batch(placements, self.precheck)
        for key in batch.keys():
            batch.set(key, self._run(batch.placements[key]))
        return batch.done()

    def _run(self, placement: Placement) -> MeasureResult:
        broken = [self.libraries.broken[u] for u in sorted(placement.units_used())
                  if u in self.libraries.broken]
        if broken:
            return MeasureResult.failure(ErrorKind.BUILD, str(broken[0]))
        settings = dataclasses.asdict(self.settings)
        try:
            self._runner.send(time_placement, (placement.to_json(), settings, self.seed),
                              timeout=self.timeout)
            res = self._runner.recv()
        except TimeoutError:
            return MeasureResult.failure(ErrorKind.TIMEOUT,
                                         f"run exceeded the {self.timeout:g} s timeout")
        except ChildProcessError:
            return MeasureResult.failure(ErrorKind.RUN, "the run crashed its process")
        if "error" in res:
            return MeasureResult.failure(ErrorKind(res["error"]), res["detail"])
        self.runner_compiled += res["compiled"]
        return dataclasses.replace(result_from_times(res["times"]), unit_busy_s=res["busy"])

    def close(self) -> None:
        self._runner.kill()
        shutil.rmtree(self._tmp, ignore_errors=True)
