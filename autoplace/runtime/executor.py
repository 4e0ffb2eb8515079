"""Run assembled placements: each resource's worker runs its share of the schedule.

A run hands every resource (unit or DMA engine) its work, in the schedule's order; a piece
of work that reads the result of work on another resource waits for that work's event, not
for a global order. Workers live as long as the executor (a unit's thread pool is set up
once). Each run records when every piece of work started and ended (:class:`RunTrace`).
A worker runs its share in C (:mod:`autoplace.runtime.native`) where the loop compiled, else
in Python (:func:`_execute`); both run the same calls in the same order and wait for the
same work.
"""

from __future__ import annotations

import ctypes
import functools
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from autoplace.hardware.profile import Profile
from autoplace.runtime.assemble import Assembled
from autoplace.runtime.native import NativePlan, NativeRun
from autoplace.runtime.workers import Worker, pool_setup


class RunError(RuntimeError):
    """A run failed: the message names the op or copy, and why."""


class RunTimeout(RunError):
    """A run did not finish in time; the executor cannot run again (a kernel may still be
    running on a worker)."""


@dataclass(frozen=True)
class RunTrace:
    """When each piece of work ran, in ns since the run started (``perf_counter_ns``)."""

    start: tuple[int, ...]
    end: tuple[int, ...]
    wall_ns: int


class _State:
    """One run's progress, shared by its workers."""

    def __init__(self, n: int):
        self.start = [0] * n
        self.end = [0] * n
        self.error: tuple[int, BaseException] | None = None
        self.lock = threading.Lock()

    def fail(self, item: int, exc: BaseException) -> None:
        with self.lock:
            if self.error is None:
                self.error = (item, exc)

    def stop(self, events: list, timeout: float) -> None:
        """End the run early: failed, and every event set (nobody waits any more)."""
        self.fail(-1, TimeoutError(f"the run exceeded {timeout:g} s"))
        for ev in events:
            if ev is not None:
                ev.set()


def _execute(a: Assembled, items: tuple[int, ...], events: list, state: _State,
             done: queue.SimpleQueue, worker: Worker) -> None:
    item = -1
    try:
        if worker.setup_error is not None:
            raise RuntimeError(f"worker {worker.name!r} could not start: "
                               f"{worker.setup_error}")
        clock, calls, waits, signals = time.perf_counter_ns, a.calls, a.waits, a.signals
        for item in items:
            for d in waits[item]:
                events[d].wait()
            if state.error is not None:
                return
            state.start[item] = clock()
            for func, args in calls[item]:
                func(*args)
            state.end[item] = clock()
            if signals[item]:
                events[item].set()
    except BaseException as exc:  # noqa: BLE001 - reported by run()
        state.fail(item, exc)
        for ev in events:
            if ev is not None:
                ev.set()  # nobody waits for work that will not come
    finally:
        done.put(None)


def _execute_native(run: NativeRun, plan: NativePlan, resource: str,
                    done: queue.SimpleQueue, worker: Worker) -> None:
    try:
        if worker.setup_error is not None:
            raise RuntimeError(f"worker {worker.name!r} could not start: "
                               f"{worker.setup_error}")
        run.execute(plan, resource)
    except BaseException as exc:  # noqa: BLE001 - reported by run()
        run.fail_from_python(exc)
    finally:
        done.put(None)


class Executor:
    """Worker threads for a profile's units and DMA engines, made on first use; their loop
    in C when ``native`` (the compiled library) is given."""

    def __init__(self, profile: Profile, threads_of: dict[str, int],
                 native: ctypes.CDLL | None = None):
        self.profile = profile
        self.threads_of = threads_of  # unit -> threads of its pool
        self.native = native
        self.workers: dict[str, Worker] = {}
        self.broken = ""

    def worker(self, resource: str) -> Worker:
        if resource not in self.workers:
            setup = None
            if resource in self.profile.unit_index:
                unit = self.profile.unit(resource)
                setup = pool_setup(self.threads_of.get(resource, 1), unit.cpus)
            self.workers[resource] = Worker(resource, setup)
        return self.workers[resource]

    def run(self, a: Assembled, timeout: float | None = None) -> RunTrace:
        """One run of ``a`` (its input tensors already filled); raises :class:`RunError`."""
        if self.broken:
            raise RunTimeout(self.broken)
        if self.native is not None:
            return self._run_native(a, timeout)
        events = a.events
        for ev in events:
            if ev is not None:
                ev.clear()
        state, done = _State(len(a.calls)), queue.SimpleQueue()
        t0 = time.perf_counter_ns()
        for resource, items in a.schedule.order.items():
            worker = self.worker(resource)
            worker.submit(functools.partial(_execute, a, items, events, state, done, worker))
        self._wait(done, len(a.schedule.order), timeout,
                   functools.partial(state.stop, events, timeout))
        wall = time.perf_counter_ns() - t0
        if state.error is not None:
            raise RunError(self._describe(a, *state.error))
        return RunTrace(start=tuple(s - t0 for s in state.start),
                        end=tuple(e - t0 for e in state.end), wall_ns=wall)

    def _run_native(self, a: Assembled, timeout: float | None) -> RunTrace:
        run, done, plan = NativeRun(self.native, len(a.calls)), queue.SimpleQueue(), a.native
        t0 = time.perf_counter_ns()
        for resource in a.schedule.order:
            worker = self.worker(resource)
            worker.submit(functools.partial(_execute_native, run, plan, resource, done, worker))
        self._wait(done, len(a.schedule.order), timeout, run.stop)
        wall = time.perf_counter_ns() - t0
        if run.failure is not None:
            item, why = run.failure
            raise RunError(f"{a.labels[item]}: {why}"[:400] if item >= 0 else why[:400])
        n = len(a.calls)
        return RunTrace(start=tuple((run.start[:n] - t0).tolist()),
                        end=tuple((run.end[:n] - t0).tolist()), wall_ns=wall)

    def _wait(self, done: queue.SimpleQueue, n: int, timeout: float | None,
              stop: Callable[[], None]) -> None:
        """Wait for ``n`` workers to end the run; past ``timeout``, ``stop`` it (each
        worker ends at its next item) and refuse further runs."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for _ in range(n):
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                done.get(timeout=left)
            except queue.Empty:
                stop()
                self.broken = f"a run exceeded its {timeout:g} s timeout"
                raise RunTimeout(self.broken) from None

    @staticmethod
    def _describe(a: Assembled, item: int, exc: BaseException) -> str:
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        why = next((ln for ln in reversed(lines) if "Error" in ln), lines[-1] if lines else "")
        why = f"{type(exc).__name__}: {why}" if why else repr(exc)
        return (why if item < 0 else f"{a.labels[item]}: {why}")[:400]

    def close(self) -> None:
        for w in self.workers.values():
            w.close()
        self.workers = {}
