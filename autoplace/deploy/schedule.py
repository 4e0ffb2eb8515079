"""The default (untuned) schedule of every kernel autoplace builds, per target.

The placed module's kernels are TVM's legalized operators: one loop nest per block, run by
one thread, the reduction loops innermost. :func:`default_schedule` is what every build
(the runtime's libraries, the placed Relax module, calibration) applies to each of them:

- GPU targets (``"gpu"`` in the target's keys: cuda, opencl, vulkan, metal, ...): TVM's
  dlight default rules, which bind every kernel's loops to blocks and threads (a GPU
  kernel without them does not build).
- CPU targets: the rules of :mod:`autoplace.deploy.cpu_rules` (inlined elementwise
  producers, reductions tiled around a register tile of vectors, elementwise nests
  vectorised), the outer loops of every nest parallel when the target has ``num-cores``
  N > 1 (TVM's runtime thread pool splits them over the cores).

The runtime's thread pool is sized by the runner (:func:`threads_for`): TVM's default on x86
is half the logical CPUs (it assumes hyper-threading), one thread on a 2-vCPU machine.
"""

from __future__ import annotations

import os

import tvm
from tvm import tirx

from autoplace.deploy.cpu_rules import cpu_schedule, cpu_schedule_traced
from autoplace.hardware.profile import Profile


def cores(target: tvm.target.Target) -> int:
    """The ``num-cores`` of a target (1 when it has none)."""
    value = target.attrs.get("num-cores")
    return int(value) if value is not None else 1


def default_schedule(func: tirx.PrimFunc, target: tvm.target.Target) -> tirx.PrimFunc:
    """``func`` (a legalized operator) scheduled for ``target`` by the rules above: dlight's
    on a GPU, :func:`~autoplace.deploy.cpu_rules.cpu_schedule` on a CPU (its outer loops
    parallel when the target has ``num-cores`` > 1)."""
    if "gpu" in target.keys:
        return _gpu_schedule(func, target)
    return cpu_schedule(func, target, parallel=cores(target) > 1)


def traced_default_schedule(func: tirx.PrimFunc, target: tvm.target.Target):
    """:func:`default_schedule` on a CPU as an ``s_tir.Schedule`` with its trace (the steps
    TVM took, which MetaSchedule's database keeps and replays); None on a GPU, whose dlight
    rules leave no trace."""
    if "gpu" in target.keys:
        return None
    return cpu_schedule_traced(func, target, parallel=cores(target) > 1)


def _gpu_schedule(func: tirx.PrimFunc, target: tvm.target.Target) -> tirx.PrimFunc:
    """dlight's default GPU rules (matmul, GEMV, reductions, and the fallback that binds
    any other kernel's fused loops to blocks and threads), in the target's context."""
    from tvm.s_tir import dlight as dl

    rules = dl.ApplyDefaultSchedule(dl.gpu.Matmul(), dl.gpu.GEMV(), dl.gpu.Reduction(),
                                    dl.gpu.GeneralReduction(), dl.gpu.Fallback())
    with target:
        return rules(tvm.IRModule({"main": func}))["main"]


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
