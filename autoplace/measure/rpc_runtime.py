"""The client side of the runtime over RPC: a job's files uploaded once per session.

A :class:`BoardJob` holds what a board needs to run any placement of one model: the program
and its weights, the graph, the profile and a kernel library per unit target, compiled here
once (:class:`~autoplace.runtime.libraries.KernelLibraries`). :class:`Sessions` keeps the
sessions the tracker granted for the whole job: a session's first use uploads the files and
loads the runtime on the board (``autoplace serve``: :mod:`autoplace.measure.board`); every
candidate after that sends only its placement.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
import threading
import weakref
from pathlib import Path

from autoplace.graph import OpGraph
from autoplace.hardware.profile import Profile
from autoplace.hardware.write import to_toml
from autoplace.measure.base import MeasureResult
from autoplace.measure.board import RUNTIME_LOAD_FUNC, RUNTIME_TIME_FUNC
from autoplace.measure.local import result_from_times
from autoplace.measure.server import INFO_FUNC
from autoplace.runtime.libraries import KernelLibraries
from autoplace.runtime.packed_weights import copy_library
from autoplace.runtime.program import PROGRAM_FILE, WEIGHTS_FILE, Program, save_program
from autoplace.space import Placement
from autoplace.space.problem import ErrorKind

#: the remote functions each session has fetched, kept while the session lives. A remote
#: handle's destructor asks the server to free it and waits for the answer, holding the
#: GIL: a server frozen between answering a call and that request froze every thread of
#: the process, the one that would abandon the server after its timeout too (CI, 7c59ca3)
_FUNCTIONS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_FUNCTIONS_LOCK = threading.Lock()


def remote_function(sess, func: str):
    """Remote function ``func`` of ``sess``, fetched once per session and never freed before
    it (a call on a frozen server then blocks in the call, without the GIL)."""
    with _FUNCTIONS_LOCK:
        kept = _FUNCTIONS.setdefault(sess, {})
        handle = kept.get(func)
    if handle is None:
        handle = sess.get_function(func)
        with _FUNCTIONS_LOCK:
            handle = kept.setdefault(func, handle)
    return handle


def remote_json(sess, func: str, *args) -> dict:
    """Call remote function ``func`` (:func:`remote_function`); its JSON answer, or
    RuntimeError with its error."""
    answer = json.loads(str(remote_function(sess, func)(*args)))
    if "error" in answer and "detail" not in answer:
        raise RuntimeError(f"{func} on the server: {answer['error']}")
    return answer


def _alive(sess) -> bool:
    """Whether a session still answers (any server, stock or not, knows its CPU)."""
    try:
        return bool(sess.cpu(0).exist)
    except Exception:  # noqa: BLE001 - any failure means it does not answer
        return False


class BoardJob:
    """The files of one model's job for a board, written once into a temporary directory."""

    def __init__(self, program: Program, graph: OpGraph, profile: Profile,
                 libraries: KernelLibraries):
        self.profile = profile
        self.uploads = 0  # sessions the job was uploaded to
        self.dir = Path(tempfile.mkdtemp(prefix="autoplace-job-"))
        save_program(program, self.dir)
        (self.dir / "graph.json").write_text(json.dumps(graph.to_dict()))
        (self.dir / "profile.toml").write_text(to_toml(profile, "an RPC job's profile"))
        names: dict[str, str] = {}
        self.job = {"program": PROGRAM_FILE, "weights": WEIGHTS_FILE, "graph": "graph.json",
                    "profile": "profile.toml", "libraries": {}}
        for unit in profile.units:
            if unit.name in libraries.broken:
                continue
            src = libraries.path(unit.name)
            if str(src) not in names:
                names[str(src)] = f"kernels-{len(names)}.so"
                copy_library(src, self.dir / names[str(src)])  # (its pack table too)
            self.job["libraries"][unit.name] = names[str(src)]

    def files(self) -> list[Path]:
        return sorted(self.dir.iterdir())

    def start(self, sess) -> None:
        """Upload the job and load the runtime on the board behind ``sess``; ValueError if
        it is not ``autoplace serve`` of this profile."""
        try:
            info = remote_json(sess, INFO_FUNC)
        except AttributeError as exc:  # no such function, or a session that just died
            if not _alive(sess):
                raise ConnectionError("the server went away") from exc
            raise ValueError("rpc: the server is not `autoplace serve` (a stock TVM RPC "
                             "server runs VM builds: --rpc-mode vm)") from exc
        if info.get("profile_hash") != self.profile.hash:
            raise ValueError(f"rpc: the board serves profile {info.get('profile')!r}, not "
                             f"{self.profile.name!r} (hash {self.profile.hash})")
        for path in self.files():
            sess.upload(str(path))
        remote_json(sess, RUNTIME_LOAD_FUNC, json.dumps(self.job))
        self.uploads += 1

    def time(self, sess, placement: Placement, settings: dict, seed: int) -> MeasureResult:
        res = remote_json(sess, RUNTIME_TIME_FUNC, placement.to_json(),
                          json.dumps({**settings, "seed": seed}))
        if "error" in res:
            return MeasureResult.failure(ErrorKind(res["error"]), res["detail"])
        return dataclasses.replace(result_from_times(res["times"]), unit_busy_s=res["busy"])

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


class Sessions:
    """Sessions kept for the job; each started (the job uploaded) on its first lease.

    A worker with none free asks the tracker for another, and gives up waiting as soon as
    a kept one is given back (the job's own sessions hold the servers it waits for)."""

    def __init__(self, open_session, job: BoardJob):
        self._open, self.job = open_session, job
        self._free: list = []
        self._lock = threading.Lock()

    def lease(self) -> tuple[object, bool]:
        """(session, whether the job must still be started on it)."""
        while True:
            with self._lock:
                if self._free:
                    return self._free.pop(), False
            sess = self._open(lambda: bool(self._free))
            if sess is not None:
                return sess, True

    def give_back(self, sess) -> None:
        with self._lock:
            self._free.append(sess)

    def close(self) -> None:
        with self._lock:
            self._free.clear()
