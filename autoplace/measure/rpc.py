"""Measure placements through a TVM RPC tracker: real boards, or simulated ones.

``mode="runtime"``: the kernels are compiled here once per unit target; each session a
board (``autoplace serve``) grants receives them once, with the weights, and then runs each
candidate's placement with the runtime (:mod:`autoplace.measure.rpc_runtime`). ``mode="run"``
(any TVM RPC server, a stock one too): each candidate is built here into one Relax VM
library (parallel workers), uploaded, loaded and timed there. ``mode="simulate"``: nothing
is built; the servers (``autoplace serve``) simulate the placements with their profile.

One worker thread per server registered under the key measures in parallel, each with its
own session. Faults are results: a call that exceeds ``timeout`` abandons its server
(TIMEOUT), a server that dies mid-call fails the candidate in flight (CONNECTION) and the
others carry on; when no server is left the batch raises :class:`NoServerError` with the
results it got (:class:`~autoplace.measure.base.MeasurementStopped`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import queue
import socket
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from tvm import rpc

from autoplace.deploy.pool import first_line
from autoplace.deploy.run import DEFAULT_TIMING, Loaded, TimeSettings, random_inputs
from autoplace.deploy.targets import BuildError, InvalidTarget
from autoplace.graph import OpGraph
from autoplace.hardware.profile import Profile
from autoplace.measure.base import MeasurementStopped, MeasureResult
from autoplace.measure.local import Batch, BuildingMeasurer, result_from_times
from autoplace.measure.rpc_runtime import BoardJob, Sessions, remote_json
from autoplace.measure.server import (
    INFO_FUNC,
    LOAD_FUNC,
    MAX_SIM_BYTES,
    MAX_SIM_PLACEMENTS,
    SIM_FUNC,
    parse_addr,
)
from autoplace.runtime.libraries import KernelLibraries
from autoplace.space import Placement, SearchSpace
from autoplace.space.problem import ErrorKind

MODES = ("runtime", "run", "simulate")
#: Session requests made before giving up on the servers under a key.
ATTEMPTS = 3
#: how long a board keeps a runtime job's session (it is kept for the whole job)
JOB_SESSION_S = 24 * 3600.0
#: how often a worker waiting for a session looks whether the job freed one of its own
STOP_TICK = 0.2


class NoServerError(MeasurementStopped, ConnectionError):
    """No RPC server is left under the key: the job cannot go on."""


class _Dead(Exception):
    """The session is gone (server killed, connection lost)."""


def _call(fn, timeout: float):
    """``fn()`` in a daemon thread: ("ok", value), ("error", exc) or ("timeout", None).

    A call that overruns is abandoned with its thread (a frozen server never answers).
    """
    box: dict = {}

    def target():
        try:
            box["ok"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller as a value
            box["error"] = exc

    th = threading.Thread(target=target, daemon=True)
    th.start()
    th.join(timeout)
    if th.is_alive():
        return "timeout", None
    return ("ok", box["ok"]) if "ok" in box else ("error", box["error"])


#: connection attempts (a second apart) before a tracker address is called unreachable
PROBES = 3


def _probe(addr: tuple[str, int]) -> None:
    """An OSError unless something accepts TCP connections at ``addr`` within
    :data:`PROBES` attempts (a tracker being started gets a few seconds)."""
    for attempt in range(PROBES):
        try:
            with socket.create_connection(addr, timeout=2.0):
                return
        except OSError:
            if attempt == PROBES - 1:
                raise
            time.sleep(1.0)


def servers_under(tracker: tuple[str, int], key: str, *, probe: bool = True) -> int:
    """Servers the tracker at ``tracker`` has registered under ``key`` (free or busy);
    NoServerError, one line, when the tracker cannot be reached (``probe``: try a TCP
    connection first: TVM retries a closed port for 60 s, warning 12 times)."""
    try:
        if probe:
            _probe(tracker)
        summary = rpc.connect_tracker(*tracker).summary()
    except (OSError, RuntimeError) as exc:
        raise NoServerError(f"cannot reach the RPC tracker at {tracker[0]}:{tracker[1]}: "
                            f"{first_line(exc)}") from None
    return sum(1 for s in summary.get("server_info", []) if s.get("key") == f"server:{key}")


#: how TVM's client says a call's answer never came because the server closed the session:
#: it read ``RPCCode::kShutdown`` (1) where it waited for ``kReturn`` (a server killed in
#: the middle of a call, seen in CI on 7c59ca3, was called a failed run)
SHUT_DOWN_MID_CALL = "(code == RPCCode::kReturn) is false: code=1"


def _connection_lost(exc: BaseException) -> bool:
    text = str(exc)
    return isinstance(exc, OSError | EOFError) or any(
        s in text for s in ("kShutdown", SHUT_DOWN_MID_CALL, "Connection", "connection",
                            "Broken pipe", "socket"))


class RPCMeasurer(BuildingMeasurer):
    """Measures placements on the servers a TVM RPC tracker has under ``key``.

    ``tracker`` is ``HOST:PORT``. ``mode="runtime"`` and ``"run"`` need ``mod`` (the
    fused module of ``graph``); ``mode="simulate"`` does not. ``cache_dir`` holds the
    runtime's kernel libraries (``cross_compiler`` links those of units of another
    architecture than this host's: a board's; ``kernels``, a
    :class:`~autoplace.deploy.kernel_db.KernelDatabase`, schedules them). ``timeout``
    bounds one candidate on a server (upload, load and timing, or one simulation);
    ``server_wait`` is how long to wait for a session before asking the tracker whether any
    server is left.
    """

    def __init__(self, mod, graph: OpGraph, profile: Profile, *, tracker: str, key: str,
                 mode: str = "runtime", space: SearchSpace | None = None,
                 settings: TimeSettings = DEFAULT_TIMING, timeout: float = 60.0,
                 build_timeout: float | None = None, build_workers: int = 2,
                 check_capacity: bool = True, seed: int = 0, server_wait: float = 5.0,
                 workdir=None, memory_scopes: str = "global", cache_dir=None,
                 cross_compiler: str | None = None, kernels=None):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got mode={mode!r}")
        if mode != "simulate" and mod is None:
            raise ValueError(f"mode={mode!r} needs the module to build")
        if timeout <= 0 or server_wait <= 0:
            raise ValueError(f"timeout > 0 and server_wait > 0 must hold, got "
                             f"timeout={timeout}, server_wait={server_wait}")
        self.tracker, self.key, self.mode = parse_addr(tracker, "--rpc-tracker"), key, mode
        self.settings, self.timeout, self.seed = settings, timeout, seed
        self.server_wait = server_wait
        self.name = "rpc-sim" if mode == "simulate" else "rpc"
        self._lock = threading.Lock()
        self._tracker_seen = False
        self.server_count()  # fail fast on a wrong tracker address
        super().__init__(mod if mode == "run" else None, graph, profile, space=space,
                         build_workers=build_workers, build_timeout=build_timeout,
                         check_capacity=check_capacity and mode != "simulate",
                         workdir=workdir, memory_scopes=memory_scopes, kernels=kernels)
        self.sessions = self._job(mod, cache_dir, cross_compiler, kernels) \
            if mode == "runtime" else None

    def _job(self, mod, cache_dir, cross_compiler: str | None, kernels) -> Sessions:
        """The runtime job's files (every unit's library compiled or found here first)."""
        from autoplace.runtime import DEFAULT_CACHE, check_program
        from autoplace.runtime.layout import runtime_program

        program = runtime_program(mod, self.graph, self.profile)
        check_program(program, self.graph)
        libraries = KernelLibraries(program, self.graph, self.profile,
                                    Path(cache_dir or DEFAULT_CACHE),
                                    cross_compiler=cross_compiler, kernels=kernels)
        for unit in self.profile.units:
            try:
                libraries.build(unit.name)
            except InvalidTarget:  # the profile's error: refused before any run
                raise
            except BuildError as exc:  # that unit's placements fail; the others run
                libraries.broken.setdefault(unit.name, exc)
        self.broken = libraries.broken
        return Sessions(lambda stop: self._open(JOB_SESSION_S, stop),
                        BoardJob(program, self.graph, self.profile, libraries))

    # -- tracker -------------------------------------------------------------------------
    def server_count(self) -> int:
        """Servers registered under the key (free or busy)."""
        n = servers_under(self.tracker, self.key, probe=not self._tracker_seen)
        self._tracker_seen = True
        return n

    def _addr(self) -> str:
        return f"{self.tracker[0]}:{self.tracker[1]}"

    def _no_server(self, why: str, detail: str) -> NoServerError:
        return NoServerError(
            f"rpc: {why} under key {self.key!r} on tracker {self._addr()} ({detail}); "
            "candidates measured so far are in the log. Start servers (autoplace serve --hw "
            f"PROFILE --rpc-tracker {self._addr()} --rpc-key {self.key}) and run the same command "
            "again with --resume to continue")

    def _open(self, session_timeout: float | None = None, stop=None):
        """A session for the key; waits while servers are busy, raises when none is left;
        None as soon as ``stop()`` holds while it waits.

        One attempt waits up to ``timeout + server_wait`` (a busy server frees within one
        candidate's timeout). An attempt that fails or hangs (the tracker handed out a
        server that just died or froze) is given up and the request made again; after
        :data:`ATTEMPTS` attempts without a session, or when no server is registered,
        :class:`NoServerError`.
        """
        patience = self.timeout + self.server_wait
        lifetime = session_timeout or self.timeout + 60.0
        for _ in range(ATTEMPTS):
            status, value = self._request(time.monotonic() + patience, lifetime, stop)
            if status in ("ok", "stopped"):
                return value
            if self.server_count() == 0:
                raise self._no_server("no server left", str(value))
            time.sleep(min(1.0, self.server_wait))  # the tracker may still list a dead one
        raise self._no_server(f"no server answered in {ATTEMPTS} attempts of {patience:g} s",
                              str(value))

    def _request(self, deadline: float, lifetime: float, stop=None) -> tuple[str, object]:
        """One tracker request: ("ok", session), ("failed", why), or ("stopped", None) when
        ``stop()`` holds while it waits; the server ends the session ``lifetime`` seconds
        after it starts."""
        box, done, cancelled = {}, threading.Event(), threading.Event()

        def request():
            try:
                sess = rpc.connect_tracker(*self.tracker).request(
                    self.key, priority=1, session_timeout=lifetime, max_retry=1)
                if not cancelled.is_set():
                    box["sess"] = sess
            except BaseException as exc:  # noqa: BLE001 - reported to the caller
                box["error"] = exc
            finally:
                done.set()

        threading.Thread(target=request, daemon=True).start()
        checked = time.monotonic()
        while not done.wait(STOP_TICK if stop else self.server_wait):
            if stop is not None and stop():
                cancelled.set()
                return "stopped", None
            if time.monotonic() - checked < self.server_wait:
                continue
            checked = time.monotonic()
            if self.server_count() == 0 or time.monotonic() > deadline:
                cancelled.set()  # a session granted later is dropped at once
                return "failed", "waited for a session in vain"
        if "error" in box:
            return "failed", first_line(box["error"])
        return "ok", box["sess"]

    # -- measuring -----------------------------------------------------------------------
    def measure(self, placements: Sequence[Placement]) -> list[MeasureResult]:
        batch = Batch(placements, self.precheck)
        servers = self.server_count() if batch.keys() else 0
        if self.mode == "run":
            tasks = list(self._build(batch).items())
        elif self.mode == "runtime":
            tasks = [(k, batch.placements[k]) for k in batch.keys()]
        else:
            tasks = [(keys, [batch.placements[k] for k in keys])
                     for keys in simulate_chunks(batch.keys(), servers)]
        if tasks:
            try:
                self._dispatch(batch, tasks, servers)
            except NoServerError as exc:  # keep what was measured before the servers went
                raise NoServerError(str(exc), batch.results) from None
        return batch.done()

    def _dispatch(self, batch: Batch, tasks: list, servers: int) -> None:
        todo: queue.Queue = queue.Queue()
        for task in tasks:
            todo.put(task)
        errors: list[BaseException] = []
        workers = max(1, min(len(tasks), servers))
        threads = [threading.Thread(target=self._worker, args=(batch, todo, errors),
                                    daemon=True) for _ in range(workers)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        if errors:
            raise errors[0]

    def _worker(self, batch: Batch, todo: queue.Queue, errors: list) -> None:
        """Take candidates until none is left; one session per candidate (a session kept
        for the job in runtime mode: its first candidate uploads the job).

        The candidate is taken before the session is asked for: a session opened only to
        find nothing left to do could wait on a hung server for nothing.
        """
        while not errors:
            try:
                key, task = todo.get_nowait()
            except queue.Empty:
                return
            try:
                sess, fresh = self.sessions.lease() if self.sessions else (self._open(), True)
            except (NoServerError, ValueError) as exc:
                errors.append(exc)
                return
            status, value = _call(lambda s=sess, t=task, f=fresh: self._on_server(s, t, f),
                                  self.timeout)
            if self.sessions and status == "ok":
                self.sessions.give_back(sess)
            del sess
            if self.mode == "run" and status != "timeout":  # a hung upload may still read it
                self._discard(task)
            try:
                result = self._outcome(status, value)
            except ValueError as exc:  # misuse (a server with another profile): stop
                errors.append(exc)
                return
            with self._lock:
                for k, r in zip(*_as_lists(key, result)):
                    batch.set(k, r)

    def close(self) -> None:
        if self.sessions is not None:
            self.sessions.close()
            self.sessions.job.close()
        super().close()

    def _outcome(self, status: str, value) -> MeasureResult:
        if status == "timeout":
            return MeasureResult.failure(ErrorKind.TIMEOUT, f"no answer from the server within "
                                         f"{self.timeout:g} s; server abandoned")
        if status == "ok":
            return value
        if isinstance(value, ValueError):
            raise value
        if _connection_lost(value):
            return MeasureResult.failure(ErrorKind.CONNECTION, "lost the server during the "
                                         f"measurement ({first_line(value)})")
        return MeasureResult.failure(ErrorKind.RUN, first_line(value))

    def _on_server(self, sess, task, fresh: bool):
        if self.mode == "simulate":
            return self._simulate(sess, task)
        if self.mode == "runtime":
            broken = [self.broken[u] for u in sorted(task.units_used()) if u in self.broken]
            if broken:
                return MeasureResult.failure(ErrorKind.BUILD, str(broken[0]))
            if fresh:
                self.sessions.job.start(sess)
            return self.sessions.job.time(sess, task, dataclasses.asdict(self.settings),
                                          self.seed)
        name = os.path.basename(task.path)
        sess.upload(task.path)
        loaded = Loaded(sess.load_module(name), device=sess.device)
        args = loaded.inputs(random_inputs(loaded.meta, self.seed))
        return result_from_times(loaded.time(args, self.settings))

    def _simulate(self, sess, placements: list[Placement]) -> list[MeasureResult]:
        info = remote_json(sess, INFO_FUNC)
        if info.get("profile_hash") != self.profile.hash:
            raise ValueError(f"rpc: the server under key {self.key!r} simulates profile "
                             f"{info.get('profile')!r} (hash {info.get('profile_hash')}), "
                             f"not {self.profile.name!r} (hash {self.profile.hash})")
        remote_json(sess, LOAD_FUNC, json.dumps(self.graph.to_dict()))
        res = remote_json(sess, SIM_FUNC, json.dumps([p.to_dict() for p in placements],
                                                     separators=(",", ":")))
        return [MeasureResult.from_dict(r) for r in res["results"]]


def simulate_chunks(keys: list[str], servers: int, *, count: int = MAX_SIM_PLACEMENTS,
                    chars: int = MAX_SIM_BYTES) -> list[list[str]]:
    """``keys`` (placements as compact JSON) in order, one chunk per server (a simulation
    is cheap, a session is not), each within what a server takes in one request: ``count``
    placements, ``chars`` of JSON for the list."""
    size = min(count, max(1, -(-len(keys) // max(1, servers))))
    chunks: list[list[str]] = []
    used = 0
    for key in keys:
        if not chunks or len(chunks[-1]) == size or used + len(key) + 1 > chars:
            chunks.append([])
            used = 1  # "[" and "]", and a comma between two placements
        chunks[-1].append(key)
        used += len(key) + 1
    return chunks


def _as_lists(key, result) -> tuple[list, list]:
    """(keys, results) of a task: one candidate (run) or a chunk of them (simulate)."""
    if isinstance(key, list):
        return key, result if isinstance(result, list) else [result] * len(key)
    return [key], [result]
