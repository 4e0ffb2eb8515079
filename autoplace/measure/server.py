"""A TVM RPC server that also serves the simulator of one profile (``autoplace serve``).

It is a stock ``tvm.rpc.Server`` (so it also loads and runs uploaded libraries, like any
board) plus three remote functions registered in its worker process:

- ``autoplace.server_info()``: JSON ``{"profile", "profile_hash", "pid"}``;
- ``autoplace.load_graph(graph_json)``: keeps an op graph for this session;
- ``autoplace.simulate(placements_json)``: simulates placements of that graph and
  returns JSON ``{"results": [MeasureResult.to_dict(), ...]}``.

A Python exception inside a session process becomes an ``RPCError`` on the client, but a
session process that dies stops the server from ever serving again (TVM 0.27), so these
functions catch everything and answer ``{"error": ...}`` instead.

What a client can do is confined to what a tuning job needs. TVM's file functions (upload,
download, remove, load_module) take any path, absolute or with ``..``; here every path
must be a relative name inside the session's work directory, and a graph over
:data:`MAX_GRAPH_BYTES` or :data:`MAX_GRAPH_OPS` is refused. What a client can hold is
bounded too: a connection whose handshake is not done ``handshake_timeout`` after it was
accepted is dropped (TVM's one listen loop would wait for it forever, serving no one else:
:mod:`autoplace.measure.handshake`), a simulate request
over :data:`MAX_SIM_BYTES` or :data:`MAX_SIM_PLACEMENTS` is refused, and so is an upload
over ``max_upload_mib``. TVM RPC has no authentication: the server binds 127.0.0.1 unless
told otherwise; to reach boards on other hosts, use a private network or an SSH tunnel,
never a public address.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import PurePosixPath

from autoplace.graph import OpGraph
from autoplace.hardware.profile import Profile
from autoplace.measure.board import answer, register_runtime
from autoplace.measure.handshake import bound_handshakes

#: the largest graph a client may load: JSON text, and ops (the bundled graphs are under
#: 0.5 MB and 1,000 ops)
MAX_GRAPH_BYTES, MAX_GRAPH_OPS = 4 << 20, 20_000
#: the largest simulate request: JSON text, and placements (a placement takes about 60
#: characters per op; the RPC measurer sends chunks within both)
MAX_SIM_BYTES, MAX_SIM_PLACEMENTS = 16 << 20, 1024
#: how long after its accept a connection's handshake must be done: the default, the most
HANDSHAKE_TIMEOUT_S, MAX_HANDSHAKE_TIMEOUT_S = 5.0, 3600.0
#: the largest upload by default, MiB
MAX_UPLOAD_MIB = 2048

INFO_FUNC = "autoplace.server_info"
LOAD_FUNC = "autoplace.load_graph"
SIM_FUNC = "autoplace.simulate"
UPLOAD_FUNC = "tvm.rpc.server.upload"


def _within(what: str, count: int, unit: str, limit: int) -> None:
    if count > limit:
        raise ValueError(f"{what} of {count:,} {unit} is over the limit of {limit:,}")


class SimulatorService:
    """The state behind the remote functions of one session: the profile and a graph."""

    def __init__(self, profile: Profile):
        self.profile = profile
        self.sim = None

    def info(self) -> dict:
        return {"profile": self.profile.name, "profile_hash": self.profile.hash,
                "pid": os.getpid()}

    def load_graph(self, graph_json: str) -> dict:
        from autoplace.measure.simulator import Simulator
        from autoplace.space import SearchSpace

        _within("graph", len(graph_json), "bytes", MAX_GRAPH_BYTES)
        data = json.loads(graph_json)
        if isinstance(data, dict):
            _within("graph", len(data.get("ops") or ()), "ops", MAX_GRAPH_OPS)
        graph = OpGraph.from_dict(data, source="rpc request")
        self.sim = Simulator(SearchSpace(graph, self.profile))
        return {"graph_fp": graph.fingerprint}

    def simulate(self, placements_json: str) -> dict:
        from autoplace.space import Placement

        if self.sim is None:
            raise ValueError(f"call {LOAD_FUNC} first")
        placements = [Placement.from_dict(d) for d in _placement_items(placements_json)]
        return {"results": [r.to_dict() for r in self.sim.measure(placements)]}


def _placement_items(text: str) -> list:
    """The items of a simulate request: its size is checked before it is parsed, its count
    before any placement is read or simulated."""
    _within("request", len(text), "bytes", MAX_SIM_BYTES)
    items = json.loads(text)
    if not isinstance(items, list):
        raise ValueError(f"expected a JSON list of placements, got {type(items).__name__}")
    _within("request", len(items), "placements", MAX_SIM_PLACEMENTS)
    return items


def confined(root: str, name: str) -> str:
    """The path of ``name`` inside the directory ``root``; a ValueError for an absolute
    path, a ``..`` part, or a symlink leading out."""
    name = str(name)
    if os.path.isabs(name) or ".." in PurePosixPath(name).parts:
        raise ValueError(f"{name!r}: only names inside the server's work directory")
    path = os.path.realpath(os.path.join(root, name))
    if os.path.commonpath([path, root]) != root:
        raise ValueError(f"{name!r}: outside the server's work directory")
    return path


def _confine_sessions(max_upload_bytes: int) -> None:
    """Make each session's file paths :func:`confined` to its work directory, and its
    uploads :func:`_bound_uploads`.

    TVM sets a session up in ``tvm.rpc.server._server_env`` (forked from this process), which
    registers the path function its C++ upload/download/remove call and the module loaders
    use; the wrapper replaces both afterwards. Private to TVM (pinned to 0.27): the tests in
    ``tests/measure/test_rpc.py`` fail if it changes.
    """
    import tvm
    import tvm.rpc.server as tvm_server

    setup = tvm_server._server_env

    def confined_env(load_library, work_path=None):
        temp = setup(load_library, work_path)
        root = os.path.realpath(temp.temp_dir)
        temp.relpath = lambda name: confined(root, name)  # load_module, linked modules
        tvm.register_global_func("tvm.rpc.server.workpath", temp.relpath, override=True)
        _bound_uploads(max_upload_bytes)
        return temp

    tvm_server._server_env = confined_env


def _bound_uploads(max_bytes: int) -> None:
    """Refuse an upload over ``max_bytes``; nothing is written. TVM's protocol has read the
    whole blob into the session's memory by then: this bounds the disk, not the memory."""
    import tvm

    upload = tvm.get_global_func(UPLOAD_FUNC)

    def bounded(name, blob):
        if len(blob) > max_bytes:
            raise ValueError(f"upload {name!r} of {len(blob):,} bytes is over the "
                             f"server's limit of {max_bytes:,} (--max-upload-mib)")
        return upload(name, blob)

    tvm.register_global_func(UPLOAD_FUNC, bounded, override=True)


def register_functions(profile: Profile, *, handshake_timeout: float = HANDSHAKE_TIMEOUT_S,
                       max_upload_mib: int = MAX_UPLOAD_MIB) -> None:
    """Register the remote functions, confine file access and bound what a client may hold
    (in the server's worker, via server_init_callback)."""
    import tvm

    bound_handshakes(handshake_timeout)
    _confine_sessions(max_upload_mib << 20)

    service = SimulatorService(profile)
    tvm.register_global_func(INFO_FUNC, lambda: answer(service.info), override=True)
    tvm.register_global_func(LOAD_FUNC, lambda g: answer(service.load_graph, str(g)),
                             override=True)
    tvm.register_global_func(SIM_FUNC, lambda p: answer(service.simulate, str(p)),
                             override=True)
    register_runtime()


def parse_addr(text: str, what: str = "--tracker") -> tuple[str, int]:
    """``HOST:PORT`` -> (host, port); anything else is a ValueError naming the option."""
    host, sep, port = str(text).rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{what}: expected HOST:PORT, got {text!r}")
    return host, int(port)


def _check_limits(handshake_timeout: float, max_upload_mib: int) -> None:
    """A ValueError naming the option of a bound out of range."""
    if not 0 < handshake_timeout <= MAX_HANDSHAKE_TIMEOUT_S:  # (NaN fails too)
        raise ValueError(f"--handshake-timeout: must be in (0, {MAX_HANDSHAKE_TIMEOUT_S:g}] "
                         f"seconds, got {handshake_timeout!r}")
    if not isinstance(max_upload_mib, int) or max_upload_mib < 1:
        raise ValueError(f"--max-upload-mib: must be an integer > 0, got {max_upload_mib!r}")


def start(profile: Profile, tracker: str, key: str, *, host: str = "127.0.0.1",
          port: int = 9090, port_end: int = 9199,
          handshake_timeout: float = HANDSHAKE_TIMEOUT_S, max_upload_mib: int = MAX_UPLOAD_MIB):
    """Start the server (registered on ``tracker`` under ``key``); returns the tvm Server.

    A connection silent for ``handshake_timeout`` seconds before its handshake is done is
    dropped; an upload over ``max_upload_mib`` MiB is refused.
    """
    from tvm import rpc

    _check_limits(handshake_timeout, max_upload_mib)
    return rpc.Server(host, port=port, port_end=port_end, key=key,
                      tracker_addr=parse_addr(tracker), silent=True,
                      server_init_callback=lambda: register_functions(
                          profile, handshake_timeout=handshake_timeout,
                          max_upload_mib=max_upload_mib))


def serve_forever(server) -> None:
    """Block until SIGTERM/SIGINT, then stop the server and its worker processes."""

    def stop(*_):
        server.terminate()
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while True:
        time.sleep(3600)


def registered(tracker: str, key: str) -> int:
    """How many servers the tracker at ``tracker`` has under ``key``."""
    from tvm import rpc

    summary = rpc.connect_tracker(*parse_addr(tracker)).summary()
    return sum(1 for s in summary.get("server_info", []) if s.get("key") == f"server:{key}")


def wait_registered(tracker: str, key: str, count: int, timeout: float = 30.0) -> None:
    """Block until ``count`` servers are registered under ``key`` (registration is async)."""
    deadline = time.monotonic() + timeout
    while registered(tracker, key) != count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{registered(tracker, key)} servers under {key!r} on "
                               f"{tracker}, expected {count} after {timeout:g} s")
        time.sleep(0.1)


class LocalCluster:
    """A tracker and ``servers`` in-process servers of ``profile`` on 127.0.0.1.

    For tests and single-machine tuning; :meth:`close` stops everything (servers first).
    """

    def __init__(self, profile: Profile, key: str, *, servers: int = 1,
                 host: str = "127.0.0.1"):
        from tvm.rpc.tracker import Tracker

        self.key = key
        self._tracker = Tracker(host, port=9190, port_end=9399, silent=True)
        self.tracker = f"{host}:{self._tracker.port}"
        self.servers = [start(profile, self.tracker, key, host=host) for _ in range(servers)]
        wait_registered(self.tracker, key, servers)

    def close(self) -> None:
        for server in self.servers:
            server.terminate()
        self._tracker.terminate()

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
