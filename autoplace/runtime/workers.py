"""One worker thread per resource: a unit (its own TVM thread pool) or a DMA engine.

TVM's CPU thread pool belongs to the thread that launches a parallel kernel
(``ThreadPool::ThreadLocal``), and ``runtime.config_threadpool`` configures the pool of the
thread that calls it, pinning that thread too (checked by running it:
``tests/runtime/test_worker_pools.py``). So a unit's worker configures its pool once, when it
starts: ``num-cores`` threads, one per CPU of the unit's ``cpus`` (pinned), or spread over
all CPUs when the profile names none. A kernel call releases Python's GIL, so workers run
kernels at the same time. A DMA engine's worker only copies.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Sequence

import tvm

#: ``runtime.config_threadpool`` modes (TVM's ThreadGroup::AffinityMode)
ONE_CORE_PER_THREAD = -2
SHARE_ALL_CORES = -3


def pool_setup(threads: int, cpus: Sequence[int] = ()) -> Callable[[], None]:
    """A function that sizes (and pins) the calling thread's TVM pool."""
    def setup() -> None:
        config = tvm.get_global_func("runtime.config_threadpool")
        allowed = os.sched_getaffinity(0)
        if not set(cpus) <= allowed:
            raise ValueError(f"cpus {list(cpus)} are not all CPUs this process may use "
                             f"({sorted(allowed)})")
        if cpus:
            config(ONE_CORE_PER_THREAD, len(cpus), [str(c) for c in cpus])
        else:
            everything = sorted(os.sched_getaffinity(0))
            config(SHARE_ALL_CORES, threads, [str(c) for c in everything])
    return setup


class Worker:
    """A thread that runs the jobs put to it, one after another, until closed."""

    def __init__(self, name: str, setup: Callable[[], None] | None = None):
        self.name = name
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._setup = setup
        self.setup_error: BaseException | None = None
        self.ready = threading.Event()  # set once the set-up is done (or failed)
        self._thread = threading.Thread(target=self._loop, name=f"autoplace-{name}",
                                        daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        try:
            if self._setup is not None:
                self._setup()
        except BaseException as exc:  # noqa: BLE001 - reported on the first job
            self.setup_error = exc
        self.ready.set()
        while (job := self._jobs.get()) is not None:
            job()

    def submit(self, job: Callable[[], None]) -> None:
        self._jobs.put(job)

    def close(self) -> None:
        self._jobs.put(None)

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)
