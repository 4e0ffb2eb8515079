"""Run a placement as it is placed: every unit at once, copies on their engines.

The simulator's schedule (:mod:`autoplace.space.schedule`) executed for real, on this host:

- kernels compiled once per (kernel, unit target) into a library per target, cached on disk
  (:mod:`autoplace.runtime.libraries`); a candidate placement is assembled, never rebuilt;
- a worker thread per unit, with its own TVM thread pool pinned to the unit's ``cpus``, and
  one per DMA engine (:mod:`autoplace.runtime.workers`); a ``sync`` copy runs on the host
  unit's worker, an ``async`` one on its engine's, overlapping compute; a worker runs its
  share of a run in C, without Python between kernels (:mod:`autoplace.runtime.native`);
- work waits only for the work whose results it reads (events), and for the work before it
  on its own resource (:mod:`autoplace.runtime.executor`);
- buffers in one pool per scope, storage reused only where the schedule orders it
  (:mod:`autoplace.runtime.memory`); resident weights copied into their scope once;
- given the model as imported (``source``), the ops a placement puts on a unit with a code
  generator run as the regions its BYOC build makes (:mod:`autoplace.deploy.offload`),
  each one piece of work on the unit's worker.

``Runtime`` is what ``autoplace run``, the local measurer and ``calibrate`` use
(docs/runtime.md). Imports TVM.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import tvm

from autoplace.deploy.kernel_db import KernelDatabase
from autoplace.deploy.offload import (
    Offload,
    check_codegens,
    offload_units,
    partition,
    region_functions,
)
from autoplace.deploy.region_calls import RegionCall
from autoplace.deploy.run import TimeSettings
from autoplace.deploy.schedule import declared_cores
from autoplace.deploy.targets import BuildError
from autoplace.graph import OpGraph
from autoplace.hardware.profile import Profile
from autoplace.runtime.assemble import Assembled, assemble, copy_tensor, plan_buffers, timing_of
from autoplace.runtime.executor import Executor, RunError, RunTimeout, RunTrace
from autoplace.runtime.layout import runtime_program
from autoplace.runtime.libraries import KernelLibraries
from autoplace.runtime.memory import PoolError
from autoplace.runtime.native import native_library
from autoplace.runtime.program import Program, read_program
from autoplace.space import Placement, SearchSpace
from autoplace.space.schedule import Timing

#: where kernel libraries are cached unless told otherwise
DEFAULT_CACHE = Path.home() / ".cache" / "autoplace" / "kernels"

__all__ = ["DEFAULT_CACHE", "Assembled", "BuildError", "KernelLibraries", "PoolError",
           "Program", "RunError", "RunTimeout", "RunTrace", "Runtime", "read_program"]


def check_program(program: Program, graph: OpGraph) -> None:
    """Refuse a program whose kernels are not the graph's ops, one for one."""
    if len(program.kernels) != len(graph.ops):
        raise BuildError(f"module does not match graph {graph.name!r}: "
                         f"{len(program.kernels)} kernels, the graph has {len(graph.ops)} ops")
    for k, (kernel, op) in enumerate(zip(program.kernels, graph.ops)):
        if op.func and op.func != kernel.func:
            raise BuildError(f"module does not match graph {graph.name!r}: kernel {k} "
                             f"calls {kernel.func!r}, the graph expects {op.func!r}")


class Runtime:
    """Placements of one model run on this host's units at once.

    ``mod`` is the fused module the op graph was made from (``models.load_module``), or
    its :class:`Program`; ``cache_dir`` holds the compiled kernel libraries (``files``:
    unit -> library, an artefact's, instead; ``cross_compiler`` links those of units of
    another architecture; ``kernels``, a kernel database, schedules them).
    ``copy(src, dst)`` is how a DMA engine moves bytes (TVM's copy here). ``native``:
    workers run their share of a run in C (where the loop compiles; else in Python).
    ``source``: the model as imported (``models.import_model``); given it, the matches a
    placement puts on a unit with a ``codegen`` run as the regions its code generator
    builds (without it, as kernels built for the unit's target, a stand-in).
    """

    def __init__(self, mod: tvm.IRModule | Program, graph: OpGraph, profile: Profile, *,
                 cache_dir: str | Path, space: SearchSpace | None = None,
                 copy=copy_tensor, files: dict[str, Path] | None = None,
                 cross_compiler: str | None = None, kernels: KernelDatabase | None = None,
                 native: bool = True, source: tvm.IRModule | None = None):
        self.program = mod if isinstance(mod, Program) else runtime_program(mod, graph, profile)
        check_program(self.program, graph)
        self.graph, self.profile = graph, profile
        self.space = space or SearchSpace(graph, profile)
        self.libraries = KernelLibraries(self.program, graph, profile, Path(cache_dir),
                                         files=files, cross_compiler=cross_compiler,
                                         kernels=kernels)
        threads = {u.name: declared_cores(u.target) for u in profile.units}
        self.executor = Executor(profile, threads,
                                 native_library(Path(cache_dir)) if native else None)
        self.copy = copy
        self.source = source
        if source is not None:
            check_codegens(profile)
        self._offloads: dict[str, tuple] = {}
        #: when each piece of work ran in the last timed run
        self.last_trace: RunTrace | None = None

    def offload(self, placement: Placement) -> Offload | None:
        """What ``placement``'s BYOC build offloads (None without ``source``, or where it
        puts nothing on a unit with a code generator)."""
        return self._offload(placement)[0]

    def regions(self, placement: Placement) -> tuple[RegionCall, ...]:
        """The region calls ``placement``'s BYOC build makes, in ``main``'s order."""
        offload = self.offload(placement)
        return offload.calls if offload is not None else ()

    def _offload(self, placement: Placement) -> tuple[Offload | None, dict]:
        """(what is offloaded, the regions' functions by symbol), partitioned once per
        placement."""
        coded = {u.name for u in offload_units(self.profile)}
        if self.source is None or not coded & placement.units_used():
            return None, {}
        key = json.dumps(placement.to_dict(), sort_keys=True)
        if key not in self._offloads:
            built, offload = partition(self.source, self.graph, placement, self.profile)
            self._offloads[key] = (offload, region_functions(built, offload))
        return self._offloads[key]

    def kernel_units(self, placement: Placement) -> list[str]:
        """The units that run kernels of ``placement`` (not only regions)."""
        offloaded = {op for c in self.regions(placement) for op in c.ops}
        return sorted({placement.ops[op.name][0] for i, op in enumerate(self.graph.ops)
                       if i not in offloaded})

    def timing(self, placement: Placement) -> Timing:
        """The schedule this runtime runs for ``placement`` (each region one piece of
        work), with its simulated timing."""
        return timing_of(self.space, placement, self.regions(placement))

    def check(self, placement: Placement) -> None:
        """Refuse ``placement`` unless the runtime can run it as placed (its scopes' pools
        fit), and build its units' libraries (none is loaded: a board's may be of another
        architecture)."""
        self._refuse(placement)
        for unit in self.kernel_units(placement):
            self.libraries.build(unit)
        plan_buffers(self.program, self.space, placement, regions=self.regions(placement))

    def _refuse(self, placement: Placement) -> None:
        problem = self.space.check(placement)
        if problem:
            raise BuildError(f"cannot run: {problem.detail}")
        for unit in sorted(placement.units_used()):
            execution = self.profile.unit(unit).execution
            if execution != "stream":
                raise BuildError(f"unit {unit!r}: execution {execution!r} is not run by "
                                 "the runtime (a worker runs one kernel at a time)")

    def assemble(self, placement: Placement) -> Assembled:
        """``placement`` bound to compiled kernels and buffers (nothing compiled but the
        libraries of units not used before)."""
        self._refuse(placement)
        self.libraries.load_all(self.kernel_units(placement))
        return assemble(self.program, self.space, placement, self.libraries, copy=self.copy,
                        regions=self.regions(placement), functions=self._offload(placement)[1])

    def feed(self, a: Assembled, arrays: Sequence[np.ndarray]) -> None:
        """Copy the graph inputs into ``a``'s input buffers."""
        if len(arrays) != len(a.inputs):
            raise ValueError(f"{len(arrays)} inputs given, the model takes {len(a.inputs)}")
        for buf, arr, spec in zip(a.inputs, arrays, self.program.inputs):
            arr = np.ascontiguousarray(arr)
            if tuple(arr.shape) != spec.shape or str(arr.dtype) != spec.dtype:
                raise ValueError(f"input of shape {arr.shape} and dtype {arr.dtype}: the "
                                 f"model takes {spec.shape} {spec.dtype}")
            buf.copyfrom(arr)

    def run(self, a: Assembled, arrays: Sequence[np.ndarray] | None = None, *,
            timeout: float | None = None) -> list[np.ndarray]:
        """One run (after feeding ``arrays``, if given); the results as numpy arrays."""
        if arrays is not None:
            self.feed(a, arrays)
        self.executor.run(a, timeout)
        return [r.numpy() for r in a.results]

    def trace(self, a: Assembled, *, timeout: float | None = None) -> RunTrace:
        """One run of what ``a`` holds; when each piece of work ran."""
        return self.executor.run(a, timeout)

    def time(self, a: Assembled, settings: TimeSettings, *,
             timeout: float | None = None) -> list[float]:
        """Seconds per run, one value per repeat (the mean of ``number`` runs), after
        ``warmup`` runs; ``min_repeat_ms`` raises ``number`` as TVM's evaluator does. The
        last run's trace is kept in :attr:`last_trace`."""
        for _ in range(settings.warmup):
            self.last_trace = self.executor.run(a, timeout)
        number, out = settings.number, []
        for _ in range(settings.repeat):
            wall = self._runs(a, number, timeout)
            if settings.min_repeat_ms and not out and wall < settings.min_repeat_ms * 1e6:
                number = max(number + 1, int(number * settings.min_repeat_ms * 1e6 / wall))
                wall = self._runs(a, number, timeout)
            out.append(wall * 1e-9 / number)
        return out

    def _runs(self, a: Assembled, number: int, timeout: float | None) -> int:
        """Nanoseconds of ``number`` runs of ``a``, one after another."""
        wall = 0
        for _ in range(number):
            self.last_trace = self.executor.run(a, timeout)
            wall += self.last_trace.wall_ns
        return wall

    def busy_s(self, a: Assembled, trace: RunTrace) -> dict[str, float]:
        """Seconds each unit spent on its work (kernels and sync copies) in ``trace``."""
        out: dict[str, float] = {}
        units = self.profile.unit_index
        for w, start, end in zip(a.schedule.work, trace.start, trace.end):
            if w.resource in units:
                out[w.resource] = out.get(w.resource, 0.0) + (end - start) * 1e-9
        return out

    def close(self) -> None:
        self.executor.close()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
