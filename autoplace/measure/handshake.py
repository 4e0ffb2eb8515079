"""How ``autoplace serve`` bounds the handshake of a connection to TVM's RPC server.

TVM's server has one listen loop (``tvm.rpc.server._listen_loop``, TVM 0.27): it accepts a
connection, reads its handshake (a magic number, a key length, the key) and serves the
session, one connection at a time. As it stands, a client that never finishes its
handshake holds off every session, and a malformed one ends the loop for good. Here:

- the whole handshake must be done within ``seconds`` of the accept, however slowly its
  bytes come (one byte a second keeps no connection past the deadline);
- a key longer than :data:`MAX_KEY_BYTES` is refused before any of it is read (TVM would
  read up to 2 GiB into memory);
- a malformed key (of length 0, or not UTF-8) drops the connection and the loop listens
  again.

All of it wraps TVM's private listen loop (pinned to 0.27): the tests in
``tests/measure/test_rpc.py`` fail if it changes.
"""

from __future__ import annotations

import socket
import time

#: the longest handshake key taken, bytes (TVM's keys are ``client:<key> -timeout=<s>``)
MAX_KEY_BYTES = 4096


class _Connection:
    """An accepted connection whose reads must all be done by ``deadline``, and whose
    handshake key (after the magic number and the key's length: 8 bytes) is not too long."""

    def __init__(self, conn: socket.socket, seconds: float):
        self.conn, self.deadline, self.head = conn, time.monotonic() + seconds, b""

    def recv(self, nbytes: int) -> bytes:
        if len(self.head) == 8:
            keylen = int.from_bytes(self.head[4:], "little", signed=True)
            if keylen > MAX_KEY_BYTES:
                raise ValueError(f"a handshake key of {keylen:,} bytes is over "
                                 f"{MAX_KEY_BYTES:,}")
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("handshake not done in time")
        self.conn.settimeout(left)
        chunk = self.conn.recv(nbytes)
        self.head += chunk[:8 - len(self.head)]
        return chunk

    def __getattr__(self, name: str):
        return getattr(self.conn, name)


class _Listening:
    """The listening socket, whose accepted connections are :class:`_Connection`."""

    def __init__(self, sock: socket.socket, seconds: float):
        self.sock, self.seconds = sock, seconds

    def accept(self):
        conn, addr = self.sock.accept()
        return _Connection(conn, self.seconds), addr

    def __getattr__(self, name: str):
        return getattr(self.sock, name)


def bound_handshakes(seconds: float) -> None:
    """Bound every handshake TVM's listen loop reads in this process from now on (see the
    module doc). A session's socket is blocking again when its serving starts: TVM's C++
    session loop reads its fd expecting a blocking one."""
    import tvm.rpc.server as tvm_server

    listen, serving = tvm_server._listen_loop, tvm_server._serving

    def bounded_listen(sock, *args):
        while True:
            try:
                return listen(_Listening(sock, seconds), *args)
            except (IndexError, ValueError):  # a malformed key: listen again
                continue

    def blocking_serving(sock, addr, opts, load_library):
        conn = sock.conn if isinstance(sock, _Connection) else sock
        conn.settimeout(None)
        return serving(conn, addr, opts, load_library)

    socket.setdefaulttimeout(seconds)  # the tracker's connection, as before
    tvm_server._listen_loop, tvm_server._serving = bounded_listen, blocking_serving
