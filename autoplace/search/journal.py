"""Optuna's journal file, made safe against workers killed at any moment.

Optuna's file backend locks with a lock *file* (a symlink or an ``O_EXCL`` file): a process
killed while holding it leaves the lock behind, and every other worker then waits out a
30-second grace period before breaking it. Its appends go through a buffered file, so a kill
can also leave half a line; once another line follows it, every reader of the journal fails
("Invalid log format"). :class:`SafeJournalFile` keeps the format and fixes both:

- the lock is ``flock`` on ``PATH.flock``: the kernel releases it when its holder dies;
- an append is one ``write`` call on an ``O_APPEND`` descriptor (whole, or not at all, when
  the writer is killed), made after cutting a torn tail (a writer that died mid-line on a
  machine that lost power: that operation never happened, nobody was told it did).
"""

from __future__ import annotations

import fcntl
import json
import os
import warnings
from typing import Any

from optuna.storages.journal import JournalFileBackend

LOCK_SUFFIX = ".flock"


class FlockLock:
    """An exclusive ``flock`` on ``path + .flock``; released by the kernel if its holder
    dies. (Optuna's journal lock interface: ``acquire()`` and ``release()``.)"""

    def __init__(self, path: str):
        self.path = path + LOCK_SUFFIX
        self._fd: int | None = None

    def acquire(self) -> bool:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return True

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


class SafeJournalFile(JournalFileBackend):
    """Optuna's journal file format with a lock freed by the kernel and whole-line appends
    (see the module docstring); readable by Optuna's own :class:`JournalFileBackend`."""

    def __init__(self, file_path: str):
        super().__init__(file_path, lock_obj=FlockLock(file_path))  # type: ignore[arg-type]

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        data = "".join(json.dumps(log, separators=(",", ":")) + "\n" for log in logs).encode()
        self._lock.acquire()
        try:
            fd = os.open(self._file_path, os.O_RDWR | os.O_APPEND)
            try:
                _cut_torn_tail(fd, self._file_path)
                while data:
                    data = data[os.write(fd, data):]
                os.fsync(fd)
            finally:
                os.close(fd)
        finally:
            self._lock.release()


def _cut_torn_tail(fd: int, path: str) -> None:
    """Truncate a last line without its newline (under the lock: no writer is mid-line)."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    back = min(size, 1 << 20)
    while True:
        tail = os.pread(fd, back, size - back)
        cut = tail.rfind(b"\n")
        if cut >= 0 or back == size:
            keep = size - back + cut + 1
            break
        back = min(size, back * 2)
    warnings.warn(f"{path}: dropping a torn last line ({size - keep} bytes) of the journal",
                  stacklevel=3)
    os.ftruncate(fd, keep)
