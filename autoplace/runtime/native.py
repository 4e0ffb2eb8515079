"""The workers' loop in C (``native_worker.c``): a run without Python between kernels.

A worker running its items in Python takes Python's GIL back after every kernel; while
another unit's worker does the same, each wakes the other. In C, a worker runs its items
back to back and waits only where the schedule says: for an item of another resource,
briefly spinning (:data:`SPINS`), then on a futex. On this host a chain of empty kernels
alternating between two units costs 8 us per op instead of 20, and random placements of
shufflenet over ``host``'s units run 6% faster (``experiments/results/bench_runtime.md``).

Between runs too the worker stays in C (:class:`Station`: its thread calls
``autoplace_serve`` once, ctypes releasing the GIL, and sleeps on a futex until a run hands
it a job): a run wakes its workers and waits for them with a call each
(:meth:`NativeRun.launch`, :meth:`NativeRun.wait`), and no Python thread wakes in between.

The library is compiled from the source beside this module the first time a machine needs
it, with the C compiler (``$CC``, else ``cc``) against TVM FFI's C API, into the kernel
cache; a machine without a compiler (a board running an artefact) runs the loop in Python
(:func:`native_library` warns once).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import subprocess
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tvm_ffi
import tvm_ffi.libinfo

SOURCE = Path(__file__).with_name("native_worker.c")
#: the most tensors one call passes (the C side's stack array)
MAX_ARGS = 64
#: bytes of the first failure's message
MESSAGE_BYTES = 2048
#: checks of a flag before a waiting worker sleeps on it: a short spin catches work that
#: ends at once; a long one takes the CPU from the work it waits for where units share
#: CPUs (2,000: random placements of shufflenet on ``host`` 1.15x slower than the Python
#: loop; 64: 0.94x)
SPINS = 64

#: the longest a run's waiter sleeps in C at a time (then Python sees a signal: Ctrl-C)
WAIT_SLICE_NS = 100_000_000

_LOADED: dict[Path, ctypes.CDLL | None] = {}

_P = ctypes.c_void_p
_SIGNATURES = (
    ("autoplace_serve", None, [_P]),
    ("autoplace_launch", None, [ctypes.c_int32, _P, _P]),
    ("autoplace_wait_run", ctypes.c_int32, [_P, ctypes.c_int64]),
    ("autoplace_close_station", None, [_P]),
    ("autoplace_stop_run", None, [ctypes.c_int32, _P, _P]),
)


def native_library(cache_dir: Path) -> ctypes.CDLL | None:
    """The compiled worker loop (compiled into ``cache_dir`` once per source, TVM FFI
    version, compiler and machine); None, with a warning, where it cannot be compiled or
    loaded."""
    cc = os.environ.get("CC", "cc")
    text = SOURCE.read_bytes() + f"{tvm_ffi.__version__} {cc} {platform.machine()}".encode()
    path = Path(cache_dir) / f"native-worker-{hashlib.sha256(text).hexdigest()[:16]}.so"
    if path not in _LOADED:
        _LOADED[path] = _load(path, cc)
    return _LOADED[path]


def _load(path: Path, cc: str) -> ctypes.CDLL | None:
    try:
        if not path.exists():
            _compile(path, cc)
        lib = ctypes.CDLL(str(path))
    except (OSError, subprocess.SubprocessError) as exc:
        detail = (getattr(exc, "stderr", "") or str(exc)).strip()
        warnings.warn(f"the runtime's C worker loop did not compile or load ({cc}: "
                      f"{detail.splitlines()[-1] if detail else type(exc).__name__}); "
                      "workers run their kernels from Python", stacklevel=3)
        return None
    for name, restype, argtypes in _SIGNATURES:
        getattr(lib, name).restype = restype
        getattr(lib, name).argtypes = argtypes
    return lib


def _compile(path: Path, cc: str) -> None:
    """Compile the source into ``path`` (atomically: another process may do it too)."""
    lib_dir = str(Path(tvm_ffi.libinfo.find_libtvm_ffi()).parent)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=path.parent)
    os.close(fd)
    try:
        subprocess.run([cc, "-O2", "-std=c11", "-shared", "-fPIC",
                        f"-I{tvm_ffi.libinfo.find_include_path()}", "-o", tmp, str(SOURCE),
                        f"-L{lib_dir}", "-ltvm_ffi", f"-Wl,-rpath,{lib_dir}"],
                       check=True, capture_output=True, text=True, timeout=120)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


@dataclass(frozen=True)
class NativePlan:
    """An assembled placement as the C loop reads it: per item its calls (CSR arrays of
    function and tensor handles) and the items of other resources it waits for; per
    resource, its items in order. The Python objects behind the handles are kept alive by
    the assembled placement this plan was made from."""

    call_ptr: np.ndarray
    funcs: np.ndarray
    arg_ptr: np.ndarray
    args: np.ndarray
    wait_ptr: np.ndarray
    waits: np.ndarray
    order: dict[str, np.ndarray]

    @classmethod
    def of(cls, calls, waits, order) -> NativePlan:
        """From an assembled placement's ``calls`` (per item: (function, tensors) pairs),
        ``waits`` and its schedule's ``order``."""
        call_ptr, funcs, arg_ptr, args = [0], [], [0], []
        for item in calls:
            for func, tensors in item:
                if len(tensors) > MAX_ARGS:
                    raise ValueError(f"a call of {len(tensors)} tensors (at most {MAX_ARGS})")
                funcs.append(func.__chandle__())
                args += [t.__chandle__() for t in tensors]
                arg_ptr.append(len(args))
            call_ptr.append(len(funcs))
        wait_ptr = np.cumsum([0, *(len(w) for w in waits)])
        flat = [d for w in waits for d in w]

        def ints(values, dtype=np.int32):
            return np.ascontiguousarray(values, dtype=dtype)

        return cls(call_ptr=ints(call_ptr), funcs=ints(funcs, np.uintp),
                   arg_ptr=ints(arg_ptr), args=ints(args, np.uintp), wait_ptr=ints(wait_ptr),
                   waits=ints(flat), order={r: ints(items) for r, items in order.items()})


class Station(ctypes.Structure):
    """Where one worker thread waits in C for its next job (``autoplace_station``)."""

    _fields_ = [("generation", ctypes.c_int32), ("closing", ctypes.c_int32),
                ("job", ctypes.c_void_p)]

    def serve(self, lib: ctypes.CDLL) -> None:
        """The worker thread's loop, in C, until :meth:`close` (blocks; GIL released)."""
        lib.autoplace_serve(ctypes.addressof(self))

    def close(self, lib: ctypes.CDLL) -> None:
        lib.autoplace_close_station(ctypes.addressof(self))


class _Job(ctypes.Structure):
    """One resource's share of one run (``autoplace_job``)."""

    _fields_ = [("n_items", ctypes.c_int32), *[(f, _P) for f in (
                    "items", "call_ptr", "funcs", "arg_ptr", "args", "wait_ptr", "waits")],
                ("n_total", ctypes.c_int32), *[(f, _P) for f in (
                    "done", "failed", "start", "end", "message")],
                ("capacity", ctypes.c_int32), ("spins", ctypes.c_int32), ("remaining", _P)]


class NativeRun:
    """A plan's runs on given stations: each item's done flag, the first failure, the
    times, the count of workers at work; made once and reset before each run."""

    def __init__(self, lib: ctypes.CDLL, plan: NativePlan, stations: list[Station]):
        n = len(plan.call_ptr) - 1
        self.lib, self.plan, self.stations, self.n = lib, plan, stations, n
        self.done = np.zeros(max(n, 1), dtype=np.int32)
        self.failed = np.full(1, -1, dtype=np.int32)
        self.remaining = np.zeros(1, dtype=np.int32)
        self.start = np.zeros(max(n, 1), dtype=np.int64)
        self.end = np.zeros(max(n, 1), dtype=np.int64)
        self.message = ctypes.create_string_buffer(MESSAGE_BYTES)
        self._remaining = self.remaining.ctypes.data
        self._jobs = (_Job * len(stations))(*(self._job(items) for items in plan.order.values()))
        self._stations = (_P * len(stations))(*(ctypes.addressof(st) for st in stations))

    def _job(self, items: np.ndarray) -> _Job:
        p = self.plan
        return _Job(len(items), items.ctypes.data, p.call_ptr.ctypes.data, p.funcs.ctypes.data,
                    p.arg_ptr.ctypes.data, p.args.ctypes.data, p.wait_ptr.ctypes.data,
                    p.waits.ctypes.data, self.n, self.done.ctypes.data,
                    self.failed.ctypes.data, self.start.ctypes.data, self.end.ctypes.data,
                    ctypes.addressof(self.message), MESSAGE_BYTES, SPINS, self._remaining)

    def launch(self) -> None:
        """Start a run: every station gets its resource's job (the plan's order)."""
        self.done[:] = 0
        self.failed[0] = -1
        self.remaining[0] = len(self.stations)
        self.lib.autoplace_launch(len(self.stations), self._stations, self._jobs)

    def wait(self, slice_ns: int = WAIT_SLICE_NS) -> bool:
        """Wait up to ``slice_ns`` for the run's workers; whether they are all done."""
        return self.lib.autoplace_wait_run(self._remaining, slice_ns) == 0

    def stop(self) -> None:
        """End the run early (a timeout): every worker stops at its next item."""
        self.lib.autoplace_stop_run(self.n, self.done.ctypes.data, self.failed.ctypes.data)

    @property
    def failure(self) -> tuple[int, str] | None:
        """The failed item and its message (item -2: stopped), if any."""
        item = int(self.failed[0])
        return None if item == -1 else (item, self.message.value.decode(errors="replace"))
