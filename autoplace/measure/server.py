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
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from autoplace.graph import OpGraph
from autoplace.profile import Profile

INFO_FUNC = "autoplace.server_info"
LOAD_FUNC = "autoplace.load_graph"
SIM_FUNC = "autoplace.simulate"


def _answer(fn, *args) -> str:
    try:
        return json.dumps(fn(*args))
    except BaseException as exc:  # noqa: BLE001 - never let a session die (see module doc)
        return json.dumps({"error": f"{type(exc).__name__}: {exc}"[:2000]})


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

        graph = OpGraph.from_dict(json.loads(graph_json), source="rpc request")
        self.sim = Simulator(SearchSpace(graph, self.profile))
        return {"graph_fp": graph.fingerprint}

    def simulate(self, placements_json: str) -> dict:
        from autoplace.space import Placement

        if self.sim is None:
            raise ValueError(f"call {LOAD_FUNC} first")
        placements = [Placement.from_dict(d) for d in json.loads(placements_json)]
        return {"results": [r.to_dict() for r in self.sim.measure(placements)]}


def register_functions(profile: Profile) -> None:
    """Register the remote functions (in the server's worker, via server_init_callback)."""
    import tvm

    service = SimulatorService(profile)
    tvm.register_global_func(INFO_FUNC, lambda: _answer(service.info), override=True)
    tvm.register_global_func(LOAD_FUNC, lambda g: _answer(service.load_graph, str(g)),
                             override=True)
    tvm.register_global_func(SIM_FUNC, lambda p: _answer(service.simulate, str(p)),
                             override=True)


def parse_addr(text: str, what: str = "--tracker") -> tuple[str, int]:
    """``HOST:PORT`` -> (host, port); anything else is a ValueError naming the option."""
    host, sep, port = str(text).rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{what}: expected HOST:PORT, got {text!r}")
    return host, int(port)


def start(profile: Profile, tracker: str, key: str, *, host: str = "127.0.0.1",
          port: int = 9090, port_end: int = 9199):
    """Start the server (registered on ``tracker`` under ``key``); returns the tvm Server."""
    from tvm import rpc

    return rpc.Server(host, port=port, port_end=port_end, key=key,
                      tracker_addr=parse_addr(tracker), silent=True,
                      server_init_callback=lambda: register_functions(profile))


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
