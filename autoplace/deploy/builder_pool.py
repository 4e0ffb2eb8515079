"""MetaSchedule's local builder with its worker processes kept for a job.

``LocalBuilder`` starts a new pool of worker processes for every batch it builds (TVM's
workaround for a leak in long-lived workers), and each worker imports TVM (2-5 s here) before
it builds anything: ``tune-kernels`` builds at least two batches per kernel (its search, its
default schedule), so most of a short job was worker start-up. :class:`PooledBuilder` builds
as ``LocalBuilder`` does (same worker function semantics, timeouts and error texts) but keeps
its pool for :data:`BATCHES_PER_POOL` batches, then starts a fresh one (the leak stays
bounded), and :meth:`~PooledBuilder.close` ends it.
"""

from __future__ import annotations

from tvm.ir.utils import derived_object
from tvm.runtime import save_param_dict
from tvm.s_tir.meta_schedule.builder import BuilderInput, BuilderResult, PyBuilder
from tvm.support.popen_pool import PopenPoolExecutor, StatusKind

from autoplace.deploy.candidate_build import build_and_export

#: batches a pool of workers builds before it is replaced by a fresh one
BATCHES_PER_POOL = 32


@derived_object
class PooledBuilder(PyBuilder):
    """Builds candidates in ``max_workers`` processes kept across batches.

    ``f_build(mod, target, params)`` builds a candidate in a worker and
    :func:`autoplace.deploy.candidate_build.build_and_export` writes it (linked by
    ``compiler`` when one is given); a build over
    ``timeout_sec`` is killed and reported as ``LocalBuilder`` reports it.
    """

    def __init__(self, *, max_workers: int, timeout_sec: float, f_build, compiler=None):
        super().__init__()
        self.max_workers, self.timeout_sec = max_workers, timeout_sec
        self.f_build, self.compiler = f_build, compiler
        self._pool: PopenPoolExecutor | None = None
        self._batches = 0
        #: pools started so far (one per :data:`BATCHES_PER_POOL` batches)
        self.pools_started = 0

    def build(self, build_inputs: list[BuilderInput]) -> list[BuilderResult]:
        f_build, compiler = self.f_build, self.compiler
        work = [(f_build, compiler, b.mod, b.target,
                 None if b.params is None else save_param_dict(b.params))
                for b in build_inputs]
        return [_result(r, self.timeout_sec) for r in self._ready_pool().map_with_error_catching(
            lambda x: build_and_export(*x), work)]

    def _ready_pool(self) -> PopenPoolExecutor:
        if self._pool is None or self._batches >= BATCHES_PER_POOL:
            self.close()
            self._pool = PopenPoolExecutor(max_workers=self.max_workers,
                                           timeout=self.timeout_sec)
            self.pools_started += 1
        self._batches += 1
        return self._pool

    def close(self) -> None:
        """End the worker processes (a later :meth:`build` starts new ones)."""
        if self._pool is not None:
            self._pool.shutdown()
        self._pool, self._batches = None, 0


def _result(done, timeout_sec: float) -> BuilderResult:
    if done.status == StatusKind.COMPLETE:
        return BuilderResult(done.value, None)
    if done.status == StatusKind.TIMEOUT:
        return BuilderResult(None, f"LocalBuilder: Timeout, killed after {timeout_sec} seconds")
    return BuilderResult(None, f"LocalBuilder: An exception occurred\n{done.value}")
