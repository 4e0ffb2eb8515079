"""Kernels of a unit with several cores: their outer loops run in parallel.

A profile unit whose TVM target says ``num-cores = N`` (N > 1) has N cores for one kernel.
The placed module's kernels are TVM's legalized operators, unscheduled: one loop nest per
block, run by one thread. For such a unit, :func:`parallel_outer` fuses the leading
data-parallel loops of every loop nest at the kernel's root and marks the fused loop
parallel (TVM's runtime thread pool splits it over the cores), the first step every CPU
schedule takes (MetaSchedule's ``ParallelizeVectorizeUnroll``, dlight's CPU rules).
A nest whose outer loop is not data-parallel (a full reduction) stays serial.

The runtime's thread pool is sized by the runner (:func:`threads_for`): TVM's default on x86
is half the logical CPUs (it assumes hyper-threading), one thread on a 2-vCPU machine.
"""

from __future__ import annotations

import os

import tvm
from tvm import s_tir, tirx

from autoplace.hardware.profile import Profile

#: iterations of the fused parallel loop enough to keep every core busy (the loops inside
#: it are left alone)
MIN_PARALLEL = 64


def cores(target: tvm.target.Target) -> int:
    """The ``num-cores`` of a target (1 when it has none)."""
    value = target.attrs.get("num-cores")
    return int(value) if value is not None else 1


def default_schedule(func: tirx.PrimFunc, target: tvm.target.Target) -> tirx.PrimFunc:
    """``func`` as a build schedules it when no tuned schedule is known: its outer loops
    parallel on a target with several cores (:func:`parallel_outer`), else as it is."""
    return parallel_outer(func) if cores(target) > 1 else func


def parallel_outer(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with the leading spatial loops of each root loop nest fused and parallel."""
    sch = s_tir.Schedule(func, error_render_level="none")
    try:
        blocks = sch.get_child_blocks(sch.get_sblock("root"))
    except (s_tir.ScheduleError, RuntimeError, ValueError):  # no root block
        return func
    for block in blocks:
        sch = _parallel_nest(sch, block)
    return sch.mod["main"]


def _parallel_nest(sch: s_tir.Schedule, block) -> s_tir.Schedule:
    """``sch`` with the outer loops of ``block``'s nest that can run in parallel (TVM
    checks: they bind only data-parallel iterators of every block under them) fused and
    parallel, as few as give :data:`MIN_PARALLEL` iterations (the inner loops stay as they
    were, for the compiler to vectorise); as it was when that is one iteration."""
    best, extent = sch, 1
    for k, loop in enumerate(sch.get_loops(block), start=1):
        trial = sch.copy()
        loops = trial.get_loops(block)[:k]
        try:
            trial.parallel(trial.fuse(*loops) if k > 1 else loops[0])
        except (s_tir.ScheduleError, RuntimeError):
            break
        best, extent = trial, extent * _extent(sch, loop)
        if extent >= MIN_PARALLEL:
            break
    return best if extent > 1 else sch  # one iteration: nothing to share


def _extent(sch: s_tir.Schedule, loop) -> int:
    """A loop's trip count (a symbolic one counts as large)."""
    value = sch.get(loop).extent
    return int(value.value) if isinstance(value, tirx.IntImm) else MIN_PARALLEL


def threads_for(profile: Profile) -> int:
    """Threads of the runtime's pool to run ``profile``'s kernels: the most cores of a unit,
    at most this machine's CPUs."""
    most = max((declared_cores(u.target) for u in profile.units), default=1)
    return max(1, min(most, len(os.sched_getaffinity(0))))


def declared_cores(target) -> int:
    """A target table's ``num-cores`` (1 when absent or not a whole number: the build of
    such a unit fails, with the reason, before anything runs)."""
    value = target.get("num-cores", 1)
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def use_threads(n: int) -> None:
    """Size this process's TVM thread pool to ``n`` threads, unless ``TVM_NUM_THREADS`` says
    otherwise; before its first parallel kernel (the pool is made then, once)."""
    os.environ.setdefault("TVM_NUM_THREADS", str(n))
