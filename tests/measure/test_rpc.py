"""RPCMeasurer and ``autoplace serve``: a real tracker and real server processes on 127.0.0.1.

Servers are ``autoplace serve`` subprocesses, each in its own process group, so a test can
kill or freeze one with everything it spawned.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import psutil
import pytest
from factories import free_port, resident_and_streamed
from tvm.rpc.tracker import Tracker

from autoplace.deploy.run import TimeSettings
from autoplace.hardware.load import load_profile
from autoplace.measure.base import ErrorKind
from autoplace.measure.rpc import NoServerError, RPCMeasurer, simulate_chunks
from autoplace.measure.rpc_runtime import remote_function, remote_json
from autoplace.measure.server import (
    INFO_FUNC,
    LOAD_FUNC,
    MAX_GRAPH_BYTES,
    MAX_GRAPH_OPS,
    MAX_SIM_BYTES,
    MAX_SIM_PLACEMENTS,
    SIM_FUNC,
    registered,
    wait_registered,
)
from autoplace.measure.simulator import Simulator
from autoplace.records.tuning_log import TuningLog, read
from autoplace.search import TuneConfig, baselines, tune
from autoplace.space import Placement, SearchSpace

#: About a second per candidate on a server, whatever the module.
SLOW = TimeSettings(number=1, repeat=2, warmup=0, min_repeat_ms=500)


@pytest.fixture(scope="module")
def tracker():
    t = Tracker("127.0.0.1", port=9190, port_end=9399, silent=True)
    yield f"127.0.0.1:{t.port}"
    t.terminate()


class Servers:
    """``autoplace serve`` processes started under one key; all killed at the end."""

    def __init__(self, tracker: str, key: str, hw: str = "soc"):
        self.tracker, self.key, self.hw, self.procs, self.ports = tracker, key, hw, [], []

    def start(self, n: int, *options: str) -> None:
        for _ in range(n):
            self.procs.append(subprocess.Popen(
                [sys.executable, "-m", "autoplace", "serve", "--hw", self.hw,
                 "--rpc-tracker", self.tracker, "--rpc-key", self.key, *options],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                start_new_session=True))
        for p in self.procs[-n:]:
            ready = p.stdout.readline()
            assert ready.startswith("READY port=")
            self.ports.append(int(ready.split()[1].removeprefix("port=")))
        wait_registered(self.tracker, self.key, len(self.alive()))

    def alive(self) -> list:
        return [p for p in self.procs if p.poll() is None]

    def signal(self, proc, sig) -> None:
        os.killpg(proc.pid, sig)

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGCONT)
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


@pytest.fixture
def servers(tracker, request):
    s = Servers(tracker, f"t-{request.node.name[:40]}")
    yield s
    s.stop()


def distinct(space: SearchSpace) -> list[Placement]:
    return [space.uniform("cpu1"), space.from_user({"D": "accelerator1"}),
            space.from_user({"E": {"unit": "accelerator2", "scope": "sram2"}}),
            space.from_user({"C": {"unit": "accelerator1", "scope": "sram1"}})]


class Spy(RPCMeasurer):
    """The RPC measurer, telling the test the pid of the session process each candidate
    starts on (``autoplace serve`` answers it), so a fault lands on a candidate in flight."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.started: queue.Queue = queue.Queue()

    def _on_server(self, sess, task, fresh):
        self.started.put(json.loads(str(sess.get_function(INFO_FUNC)()))["pid"])
        return super()._on_server(sess, task, fresh)

    def next_server(self, servers: Servers, timeout: float = 300.0):
        """The ``autoplace serve`` process of the next candidate to start (SLOW keeps it
        on that server for at least a second)."""
        pid = self.started.get(timeout=timeout)
        ancestors = {p.pid for p in psutil.Process(pid).parents()}
        return next(p for p in servers.procs if p.pid in ancestors)

    def forget_started(self) -> None:
        while not self.started.empty():
            self.started.get_nowait()


@pytest.mark.parametrize("mode", ["runtime", "run"])
def test_runs_placements_on_two_servers(seed, soc, servers, tracker, mode):
    servers.start(2)
    mod, graph = seed
    space = SearchSpace(graph, soc)
    batch = distinct(space)
    bad = Placement(ops={**batch[0].ops, "C": ("cpu1", "sram2")}, copies={})
    m = RPCMeasurer(mod, graph, soc, tracker=tracker, key=servers.key,
                    settings=TimeSettings(repeat=3), timeout=60, mode=mode)
    try:
        results = m.measure(batch[:2] + [bad] + batch[2:])
    finally:
        m.close()
    assert [r.error for r in results] == [None, None, ErrorKind.INVALID, None, None]
    assert all(0 < r.latency_s < 0.1 for r in results if r.ok)
    assert m.name == "rpc"


def test_a_board_receives_the_kernels_once_per_job_then_only_placements(seed, soc, servers,
                                                                       tracker, tmp_path):
    servers.start(1)
    mod, graph = seed
    space = SearchSpace(graph, soc)
    m = RPCMeasurer(mod, graph, soc, tracker=tracker, key=servers.key, timeout=60,
                    settings=TimeSettings(repeat=2), cache_dir=tmp_path)
    try:
        first = m.measure(distinct(space)[:2])
        second = m.measure(distinct(space)[2:])
        uploads = m.sessions.job.uploads
    finally:
        m.close()
    assert [r.error for r in first + second] == [None] * 4, [r.detail for r in first + second]
    assert uploads == 1  # one session for the whole job: the kernels went over once
    assert set(second[0].unit_busy_s) == {"cpu1", "accelerator2"}  # the board's trace


def test_resident_weights_are_placed_when_a_server_loads_the_library(weighted, soc, servers,
                                                                      tracker):
    servers.start(1)
    mod, graph = weighted
    space = SearchSpace(graph, soc)
    m = RPCMeasurer(mod, graph, soc, tracker=tracker, key=servers.key,
                    settings=TimeSettings(repeat=2), timeout=60, build_workers=1)
    try:
        results = m.measure([resident_and_streamed(space), space.uniform("cpu1")])
    finally:
        m.close()
    assert [r.error for r in results] == [None, None], [r.detail for r in results]


def test_simulated_boards_answer_as_the_simulator(seed, soc, servers, tracker):
    servers.start(2)
    _, graph = seed
    space = SearchSpace(graph, soc)
    batch = [p for _, p in baselines(space)] + distinct(space)
    m = RPCMeasurer(None, graph, soc, tracker=tracker, key=servers.key, mode="simulate")
    try:
        remote = m.measure(batch)
    finally:
        m.close()
    local = Simulator(SearchSpace(graph, soc)).measure(batch)
    assert [r.to_dict() for r in remote] == [r.to_dict() for r in local]
    assert m.name == "rpc-sim"


def test_a_server_of_another_profile_is_refused(seed, servers, tracker):
    servers.start(1)
    _, graph = seed
    host = load_profile("host")
    m = RPCMeasurer(None, graph, host, tracker=tracker, key=servers.key, mode="simulate")
    try:
        with pytest.raises(ValueError, match="simulates profile 'soc'.*not 'host'"):
            m.measure([SearchSpace(graph, host).uniform("cpu")])
    finally:
        m.close()


def _tune_in_thread(space, measurer, log_path, trials):
    out: dict = {}

    def job():
        try:
            with TuningLog(log_path) as log:
                out["result"] = tune(space, measurer, log,
                                     TuneConfig(trials=trials, batch_size=4, seed=0))
        except BaseException as exc:  # noqa: BLE001 - inspected by the test
            out["error"] = exc

    th = threading.Thread(target=job)
    th.start()
    return th, out


def test_a_server_killed_mid_job(seed, soc, servers, tracker, tmp_path):
    servers.start(2)
    mod, graph = seed
    space = SearchSpace(graph, soc)
    m = Spy(mod, graph, soc, tracker=tracker, key=servers.key, settings=SLOW, timeout=60)
    log = tmp_path / "tune.jsonl"
    th, out = _tune_in_thread(space, m, log, trials=4)
    servers.signal(m.next_server(servers), signal.SIGKILL)
    th.join(600)
    m.close()
    assert "error" not in out, out.get("error")
    records = read(log)
    assert len(records) == out["result"].measured >= len(baselines(space)) + 4
    assert len({(r.strategy, r.trial) for r in records}) == len(records)
    lost = [r for r in records if r.result.error is ErrorKind.CONNECTION]
    # one candidate was in flight (a batch measures a repeated placement once)
    seen = [(r.strategy, r.result.error, r.result.detail[:200]) for r in records
            if r.result.error]
    assert len({r.placement.to_json() for r in lost}) == 1, seen
    assert "lost the server" in lost[0].result.detail
    assert sum(r.result.ok for r in records) == len(records) - len(lost)
    assert registered(tracker, servers.key) == 1


def test_no_server_left_stops_the_job(seed, soc, servers, tracker, tmp_path):
    servers.start(1)
    mod, graph = seed
    space = SearchSpace(graph, soc)
    m = Spy(mod, graph, soc, tracker=tracker, key=servers.key, settings=SLOW, timeout=60,
            server_wait=1.0)
    log = tmp_path / "tune.jsonl"
    th, out = _tune_in_thread(space, m, log, trials=8)
    n_base = len(baselines(space))
    deadline = time.monotonic() + 300
    while (not log.exists() or len(log.read_text().splitlines()) < n_base) and th.is_alive():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    m.forget_started()
    servers.signal(m.next_server(servers), signal.SIGKILL)  # a search candidate
    th.join(600)
    m.close()
    assert isinstance(out.get("error"), NoServerError)
    assert "no server left" in str(out["error"]) and "--resume" in str(out["error"])
    records = read(log)  # the baselines, whole, then what the batch in flight got
    names = [n for n, _ in baselines(space)]
    assert [r.strategy for r in records[:len(names)]] == names
    assert all(r.result.ok for r in records[:len(names)])
    assert len({(r.strategy, r.trial) for r in records}) == len(records)
    search = [r.result.error for r in records[len(names):]]
    # the candidate on the server when it died failed; the ones before it were measured
    assert search[-1:] == [ErrorKind.CONNECTION] and set(search[:-1]) <= {None}
    got = [r is not None for r in out["error"].partial]  # the batch it stopped in
    assert not all(got) and got == sorted(got, reverse=True)  # a measured head, no tail


def test_a_hung_server_times_out_and_is_abandoned(seed, soc, servers, tracker):
    # One server at a time, so which server a candidate meets is never left to chance.
    servers.start(1)
    mod, graph = seed
    first, *rest = distinct(SearchSpace(graph, soc))
    m = Spy(mod, graph, soc, tracker=tracker, key=servers.key, settings=SLOW, timeout=20)
    out: dict = {}

    def job():
        try:
            out["r"] = m.measure([first])
        except BaseException as exc:  # noqa: BLE001 - inspected below
            out["error"] = exc

    th = threading.Thread(target=job)
    th.start()
    servers.signal(m.next_server(servers), signal.SIGSTOP)
    th.join(600)
    assert "error" not in out, out.get("error")
    [hung] = out["r"]
    assert hung.error is ErrorKind.TIMEOUT and "within 20 s; server abandoned" in hung.detail
    servers.start(1)  # the frozen server stays registered but is never handed out again
    later = m.measure(rest)
    m.close()
    assert [r.error for r in later] == [None] * len(rest)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autoplace", *args], capture_output=True,
                          text=True, timeout=600)


def test_tune_through_rpc_from_the_command_line(servers, tracker, tmp_path):
    servers.start(1)
    log = tmp_path / "tune.jsonl"
    proc = _cli("tune", "seed_te", "--hw", "soc", "--trials", "2", "--measurer", "rpc",
                "--rpc-tracker", tracker, "--rpc-key", servers.key, "--log", str(log),
                "--no-progress")
    assert proc.returncode == 0, proc.stderr
    records = read(log)
    assert records and {r.measurer for r in records} == {"rpc"}
    assert all(r.result.ok for r in records)


def test_tune_on_simulated_boards_from_the_command_line(servers, tracker, tmp_path):
    servers.start(2)
    rpc_log, sim_log = tmp_path / "rpc.jsonl", tmp_path / "sim.jsonl"
    common = ("tune", "seed_te", "--hw", "soc", "--trials", "6", "--seed", "4",
              "--no-progress")
    proc = _cli(*common, "--log", str(rpc_log), "--measurer", "rpc-sim", "--rpc-tracker",
                tracker, "--rpc-key", servers.key)
    assert proc.returncode == 0, proc.stderr
    assert _cli(*common, "--log", str(sim_log)).returncode == 0
    through, here = read(rpc_log), read(sim_log)
    assert {r.measurer for r in through} == {"rpc-sim"}
    # the same seed gives the same candidates and latencies as the simulator in-process
    assert [(r.placement, r.result.latency_s) for r in through] == \
        [(r.placement, r.result.latency_s) for r in here]


def test_no_server_under_the_key_is_one_line_from_the_command_line(tracker, tmp_path):
    proc = _cli("tune", "seed_te", "--hw", "soc", "--trials", "2", "--measurer", "rpc",
                "--rpc-tracker", tracker, "--rpc-key", "nobody-here", "--log",
                str(tmp_path / "t.jsonl"), "--no-progress")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "rpc: no server left under key 'nobody-here'" in lines[0]
    assert "--resume" in lines[0]


def test_a_client_reaches_no_file_outside_the_work_directory(servers, tracker, tmp_path):
    from tvm import rpc

    servers.start(1)
    host, port = tracker.rsplit(":", 1)
    sess = rpc.connect_tracker(host, int(port)).request(servers.key)
    secret = tmp_path / "secret.txt"
    secret.write_text("mine")
    refused = 0
    for path in (str(secret), "../" * 16 + str(secret).lstrip("/"), "sub/../../x"):
        for call, args in ((sess.download, (path,)), (sess.remove, (path,)),
                           (sess.upload, (bytearray(b"evil"), path))):
            with pytest.raises(Exception, match="work directory"):
                call(*args)
            refused += 1
    assert refused == 9 and secret.read_text() == "mine"
    sess.upload(bytearray(b"payload"), "ok.bin")  # what a tuning job does still works
    assert bytes(sess.download("ok.bin")) == b"payload"
    sess.remove("ok.bin")
    with pytest.raises(Exception, match="Cannot open"):
        sess.download("ok.bin")  # gone: the error is the missing file, not the path
    assert json.loads(str(sess.get_function(INFO_FUNC)()))["profile"] == "soc"


def test_a_graph_over_the_limits_is_refused(servers, tracker):
    from tvm import rpc

    servers.start(1)
    host, port = tracker.rsplit(":", 1)
    sess = rpc.connect_tracker(host, int(port)).request(servers.key)
    load = sess.get_function(LOAD_FUNC)
    op = {"name": "a", "kind": "elementwise", "flops": 1.0, "bytes_read": 4, "output_bytes": 4,
          "external_bytes": 0, "weight_bytes": 0, "func": "f"}
    many = {"name": "g", "ops": [{**op, "name": f"o{i}"} for i in range(MAX_GRAPH_OPS + 1)],
            "edges": []}
    assert "20,001 ops is over the limit" in json.loads(str(load(json.dumps(many))))["error"]
    big = json.dumps({"name": "x" * MAX_GRAPH_BYTES, "ops": [op], "edges": []})
    assert "bytes is over the limit" in json.loads(str(load(big)))["error"]
    small = json.dumps({"name": "g", "ops": [op], "edges": []})
    assert "graph_fp" in json.loads(str(load(small)))


def _answer_within(seconds: float, fn):
    """``fn()``, run in a thread: a test that fails, not one that hangs, when no answer
    comes (a TVM client call has no timeout of its own)."""
    box: dict = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - raised again below
            box["error"] = exc

    th = threading.Thread(target=run, daemon=True)
    th.start()
    th.join(seconds)
    assert not th.is_alive(), f"no answer within {seconds:g} s"
    if "error" in box:
        raise box["error"]
    return box["value"]


def _session(tracker: str, key: str):
    from tvm import rpc

    host, port = tracker.rsplit(":", 1)
    return rpc.connect_tracker(host, int(port)).request(key)


def _info(sess) -> dict:
    return json.loads(str(sess.get_function(INFO_FUNC)()))


def test_a_sessions_remote_functions_are_fetched_once_and_kept(servers, tracker):
    """A remote handle freed asks its server and waits, holding the GIL: the measurer's
    calls keep theirs for the session's life, so a server that freezes after answering
    leaves a call to block (and time out), not a destructor."""
    servers.start(2)
    one, two = _session(tracker, servers.key), _session(tracker, servers.key)
    first = remote_function(one, INFO_FUNC)
    assert remote_json(one, INFO_FUNC)["profile"] == "soc"
    assert remote_function(one, INFO_FUNC) is first
    assert remote_function(two, INFO_FUNC) is not first  # (a handle is one session's)
    assert remote_json(two, INFO_FUNC)["pid"] != remote_json(one, INFO_FUNC)["pid"]


def test_silent_connections_do_not_hold_off_a_session(servers, tracker):
    """TVM's one listen loop waits for a handshake with no timeout; the server drops a
    connection silent past --handshake-timeout, so a real session is served after them."""
    servers.start(1, "--handshake-timeout", "1")
    silent = [socket.create_connection(("127.0.0.1", servers.ports[0])) for _ in range(3)]
    try:
        info = _answer_within(60, lambda: _info(_session(tracker, servers.key)))
    finally:
        for conn in silent:
            conn.close()
    assert info["profile"] == "soc"


def test_a_malformed_handshake_does_not_stop_the_server(servers, tracker):
    """A key of length 0, or not UTF-8, raised out of TVM's listen loop: no session ever
    again."""
    from tvm.rpc.base import RPC_MAGIC

    servers.start(1)
    for key in (b"", b"\xff\xfe"):
        with socket.create_connection(("127.0.0.1", servers.ports[0]), timeout=60) as conn:
            conn.sendall(struct.pack("<ii", RPC_MAGIC, len(key)) + key)
            assert conn.recv(4) == b""  # dropped (without the fix: maybe never)
    info = _answer_within(60, lambda: _info(_session(tracker, servers.key)))
    assert info["profile"] == "soc"


def test_a_handshake_trickled_a_byte_at_a_time_is_dropped_at_its_deadline(servers, tracker):
    """Each byte within the timeout of the last one, the handshake would take 40 s; the
    server drops the connection when the timeout has passed since the accept, before the
    key is all sent, and serves a real session after it."""
    from tvm.rpc.base import RPC_MAGIC

    servers.start(1, "--handshake-timeout", "1")
    key = b"client:" + b"x" * 93
    sent = []
    with socket.create_connection(("127.0.0.1", servers.ports[0]), timeout=60) as conn:
        conn.sendall(struct.pack("<ii", RPC_MAGIC, len(key)))

        def trickle():
            try:
                for byte in key:
                    conn.sendall(bytes([byte]))
                    sent.append(byte)
                    time.sleep(0.4)
            except OSError:
                pass

        th = threading.Thread(target=trickle, daemon=True)
        th.start()
        try:
            answer = conn.recv(4)  # without the deadline: 4 bytes "mismatch", after 40 s
        except ConnectionResetError:
            answer = b""
    assert answer == b"" and len(sent) < len(key)
    info = _answer_within(60, lambda: _info(_session(tracker, servers.key)))
    assert info["profile"] == "soc"


def test_a_handshake_key_too_long_is_refused_unread(servers, tracker):
    from tvm.rpc.base import RPC_MAGIC

    from autoplace.measure.handshake import MAX_KEY_BYTES

    servers.start(1, "--handshake-timeout", "600")  # the deadline is not what drops it
    with socket.create_connection(("127.0.0.1", servers.ports[0]), timeout=60) as conn:
        conn.sendall(struct.pack("<ii", RPC_MAGIC, MAX_KEY_BYTES + 1) + b"client:")
        try:
            assert conn.recv(4) == b""  # dropped, without waiting for the key's bytes
        except ConnectionResetError:
            pass
    info = _answer_within(60, lambda: _info(_session(tracker, servers.key)))
    assert info["profile"] == "soc"


def test_a_simulate_request_over_the_limits_is_refused(seed, soc, servers, tracker):
    servers.start(1)
    _, graph = seed
    sess = _session(tracker, servers.key)
    sess.get_function(LOAD_FUNC)(json.dumps(graph.to_dict()))
    simulate = sess.get_function(SIM_FUNC)
    one = SearchSpace(graph, soc).uniform("cpu1").to_dict()
    many = json.dumps([one] * (MAX_SIM_PLACEMENTS + 1))
    assert json.loads(str(simulate(many)))["error"].endswith(
        f"request of {MAX_SIM_PLACEMENTS + 1:,} placements is over the limit of "
        f"{MAX_SIM_PLACEMENTS:,}")
    padded = " " * MAX_SIM_BYTES + json.dumps([one])  # one placement, too many bytes
    assert f"bytes is over the limit of {MAX_SIM_BYTES:,}" in \
        json.loads(str(simulate(padded)))["error"]
    assert "expected a JSON list" in json.loads(str(simulate("{}")))["error"]
    [result] = json.loads(str(simulate(json.dumps([one]))))["results"]  # the same session
    assert result["error"] is None and _info(sess)["profile"] == "soc"


def test_an_upload_over_the_limit_is_refused_and_nothing_written(servers, tracker):
    servers.start(1, "--max-upload-mib", "1")
    sess = _session(tracker, servers.key)
    with pytest.raises(Exception, match="'big.bin' of 1,048,577 bytes is over the server's "
                                        "limit of 1,048,576"):
        sess.upload(bytearray(b"x" * ((1 << 20) + 1)), "big.bin")
    with pytest.raises(Exception, match="Cannot open"):
        sess.download("big.bin")
    sess.upload(bytearray(b"y" * (1 << 20)), "big.bin")  # at the limit, taken
    assert bytes(sess.download("big.bin")) == b"y" * (1 << 20)
    assert _info(sess)["profile"] == "soc"


@pytest.mark.parametrize("option", [("--handshake-timeout", "0"),
                                    ("--handshake-timeout", "1e12"),
                                    ("--max-upload-mib", "0"),
                                    ("--max-upload-mib", "1.5")])
def test_a_serve_bound_out_of_range_is_one_line(option):
    proc = _cli("serve", "--hw", "soc", "--tracker", "127.0.0.1:1", "--key", "k", *option)
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("autoplace") and option[0] in line


def test_simulate_chunks_keep_to_a_servers_limits(seed, soc):
    _, graph = seed
    keys = [p.to_json() for p in distinct(SearchSpace(graph, soc))]

    def size(chunk):
        return len(json.dumps([json.loads(k) for k in chunk], separators=(",", ":")))

    assert simulate_chunks(keys, 2) == [keys[:2], keys[2:]]  # one chunk per server
    assert simulate_chunks(keys, 1, count=3) == [keys[:3], keys[3:]]
    fits = size(keys[:2])
    assert simulate_chunks(keys, 1, chars=fits)[0] == keys[:2]
    tighter = simulate_chunks(keys, 1, chars=fits - 1)
    assert tighter[0] == keys[:1] and sum(tighter, []) == keys
    assert all(size(c) <= fits - 1 for c in tighter)


def test_a_call_left_hanging_does_not_abort_the_command(servers, tracker, tmp_path):
    """A server frozen mid-job: its call times out and is abandoned with its thread; the
    command still ends with its own exit code and one line, not SIGABRT."""
    servers.start(1)
    log = tmp_path / "t.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "autoplace", "tune", "squeezenet", "--hw", "soc", "--trials",
         "100000", "--measurer", "rpc-sim", "--rpc-tracker", tracker, "--rpc-key",
         servers.key, "--timeout", "2", "--log", str(log), "--no-progress"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not log.exists() or log.stat().st_size < 5000:
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr
        time.sleep(0.05)
    servers.signal(servers.procs[0], signal.SIGSTOP)  # frozen: calls in flight never return
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 2, err
    assert len(err.strip().splitlines()) == 1 and "no server" in err, err
    assert "terminate called" not in err
    assert read(log)


def test_a_closed_tracker_port_is_one_line_without_retry_warnings(tmp_path):
    port = free_port()  # nothing listens there
    log = tmp_path / "t.jsonl"
    log.write_text("")
    proc = _cli("tune", "seed_te", "--hw", "soc", "--trials", "2", "--measurer", "rpc-sim",
                "--rpc-tracker", f"127.0.0.1:{port}", "--rpc-key", "k", "--log", str(log),
                "--no-progress")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()  # TVM's retries would add 12 warning lines
    assert len(lines) == 1 and f"cannot reach the RPC tracker at 127.0.0.1:{port}" in lines[0]
    assert log.read_text() == ""


def test_a_stock_tvm_server_runs_vm_builds_and_says_what_the_runtime_needs(seed, soc, tracker,
                                                                          tmp_path):
    """A plain ``python -m tvm.exec.rpc_server`` has no autoplace functions: the runtime
    mode stops with one line saying so, the VM mode measures on it."""
    key, port = "stock-server", free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tvm.exec.rpc_server", "--host",
                             "127.0.0.1", "--port", str(port), "--port-end", str(port + 1),
                             "--tracker", tracker, "--key", key], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_registered(tracker, key, 1)
        mod, graph = seed
        placement = SearchSpace(graph, soc).uniform("cpu1")
        vm = RPCMeasurer(mod, graph, soc, tracker=tracker, key=key, mode="run", timeout=60,
                         settings=TimeSettings(repeat=2), build_workers=1)
        try:
            (built,) = vm.measure([placement])
        finally:
            vm.close()
        m = RPCMeasurer(mod, graph, soc, tracker=tracker, key=key, timeout=60,
                        cache_dir=tmp_path)
        try:
            with pytest.raises(ValueError, match="not `autoplace serve`.*--rpc-mode vm"):
                m.measure([placement])
        finally:
            m.close()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert built.ok and built.latency_s > 0
