"""Run assembled placements: each resource's worker runs its share of the schedule.

A run hands every resource (unit or DMA engine) its work, in the schedule's order; a piece
of work that reads the result of work on another resource waits for that work's event, not
for a global order. Workers live as long as the executor (a unit's thread pool is set up
once). Each run records when every piece of work started and ended (:class:`RunTrace`).
A worker runs its share in C (:mod:`autoplace.runtime.native`) where the loop compiled,
staying there between runs, else in Python (:func:`_execute`); both run the same calls in the
same order and wait for the same work.
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
from autoplace.runtime.native import WAIT_SLICE_NS, NativePlan, NativeRun, Station
from autoplace.runtime.workers import Worker, pool_setup

#: the state of runs stopped past their timeout, kept: a worker may still be in a kernel,
#: and it marks the item done when the kernel returns
_STRANDED: list[NativeRun] = []


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


class Executor:
    """Worker threads for a profile's units and DMA engines, made on first use; their loop
    in C when ``native`` (the compiled library) is given."""

    def __init__(self, profile: Profile, threads_of: dict[str, int],
                 native: ctypes.CDLL | None = None):
        self.profile = profile
        self.threads_of = threads_of  # unit -> threads of its pool
        self.native = native
        self.workers: dict[str, Worker] = {}
        self.stations: dict[str, Station] = {}  # resource -> where its worker waits in C
        self._native_run: NativeRun | None = None  # the last plan's, reused while it runs
        self.broken = ""

    def worker(self, resource: str) -> Worker:
        if resource not in self.workers:
            setup = None
            if resource in self.profile.unit_index:
                unit = self.profile.unit(resource)
                setup = pool_setup(self.threads_of.get(resource, 1), unit.cpus)
            self.workers[resource] = Worker(resource, setup)
        return self.workers[resource]

    def station(self, resource: str) -> Station:
        """Where ``resource``'s worker waits for its share of a run, in C (its thread set
        up first; a worker that could not set up is a :class:`RunError`)."""
        if resource not in self.stations:
            worker = self.worker(resource)
            worker.ready.wait()
            if worker.setup_error is not None:
                raise RunError(f"worker {worker.name!r} could not start: "
                               f"{worker.setup_error}"[:400])
            station = self.stations[resource] = Station()
            worker.submit(functools.partial(station.serve, self.native))
        return self.stations[resource]

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
        run = self._native(a.native)
        t0 = time.perf_counter_ns()
        run.launch()
        deadline = None if timeout is None else t0 + int(timeout * 1e9)
        while not run.wait(WAIT_SLICE_NS if deadline is None else
                           min(WAIT_SLICE_NS, deadline - time.perf_counter_ns())):
            if deadline is not None and time.perf_counter_ns() >= deadline:
                run.stop()
                _STRANDED.append(run)  # a worker still in a kernel writes to it after
                self.broken = f"a run exceeded its {timeout:g} s timeout"
                raise RunTimeout(self.broken)
        wall = time.perf_counter_ns() - t0
        if run.failure is not None:
            item, why = run.failure
            raise RunError(f"{a.labels[item]}: {why}"[:400] if item >= 0 else why[:400])
        n = len(a.calls)
        return RunTrace(start=tuple((run.start[:n] - t0).tolist()),
                        end=tuple((run.end[:n] - t0).tolist()), wall_ns=wall)

    def _native(self, plan: NativePlan) -> NativeRun:
        """The run state of ``plan`` on its resources' stations (kept for the next run)."""
        if self._native_run is None or self._native_run.plan is not plan:
            stations = [self.station(resource) for resource in plan.order]
            self._native_run = NativeRun(self.native, plan, stations)
        return self._native_run

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
        for station in self.stations.values():
            station.close(self.native)
        for w in self.workers.values():
            w.close()
        self.workers, self.stations, self._native_run = {}, {}, None
