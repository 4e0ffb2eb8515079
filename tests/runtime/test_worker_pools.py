"""TVM's thread pool is per calling thread: each unit's worker sizes and pins its own.

Checked by running it (the notes left it open): ``runtime.config_threadpool`` on a worker
thread pins that thread and sizes that thread's pool, and leaves every other thread's alone.
"""

from __future__ import annotations

import os
import queue

import pytest
import tvm

from autoplace.runtime.workers import Worker, pool_setup

pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2,
                                reason="needs two CPUs to pin two workers apart")


def probe(worker: Worker) -> tuple[set[int], int]:
    """The worker thread's CPU affinity and the size of its TVM pool."""
    out: queue.SimpleQueue = queue.SimpleQueue()
    threads = tvm.get_global_func("runtime.NumThreads")
    worker.submit(lambda: out.put((os.sched_getaffinity(0), int(threads()))))
    return out.get(timeout=30)


def test_each_worker_pins_and_sizes_its_own_pool():
    cpus = sorted(os.sched_getaffinity(0))[:2]
    first = Worker("first", pool_setup(1, [cpus[0]]))
    second = Worker("second", pool_setup(1, [cpus[1]]))
    both = Worker("both", pool_setup(2, cpus))
    try:
        assert probe(first) == ({cpus[0]}, 1)
        assert probe(second) == ({cpus[1]}, 1)
        assert probe(both)[1] == 2
        assert probe(first) == ({cpus[0]}, 1)  # still: the others' set-up left it alone
    finally:
        for w in (first, second, both):
            w.close()
    assert os.sched_getaffinity(0) >= set(cpus)  # the calling thread is not pinned
