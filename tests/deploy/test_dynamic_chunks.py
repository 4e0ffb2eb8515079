"""A kernel's parallel loops in claimed chunks (``deploy/dynamic_chunks.py``,
``chunk_claim.c``): the claim order, a thread that finishes its own range taking chunks
of a slower thread's (observed: which thread ran each iteration), equal results, and the
claim functions cross-built into an aarch64 library."""

from __future__ import annotations

import ctypes
import math
import queue
import re
import subprocess
import threading

import numpy as np
import pytest
import tvm
from factories import NM, need_cross
from tvm.script import tirx as T
from tvm.support import cc

from autoplace.deploy.cpu_rules import cpu_schedule
from autoplace.deploy.dynamic_chunks import CHUNKS_PER_THREAD, CLAIM_SOURCE, dynamic_chunks
from autoplace.deploy.elf import AARCH64, elf_machine
from autoplace.deploy.toolchain import export_library
from autoplace.runtime.workers import Worker, pool_setup

HOST = tvm.target.Target({"kind": "llvm", "num-cores": 2})


@pytest.fixture(scope="module")
def claims(tmp_path_factory):
    """chunk_claim.c alone, as a shared library (ctypes)."""
    path = tmp_path_factory.mktemp("claim") / "claim.so"
    cc.create_shared(str(path), [str(CLAIM_SOURCE)])
    lib = ctypes.CDLL(str(path))
    lib.autoplace_split_chunks.restype = ctypes.c_void_p
    lib.autoplace_split_chunks.argtypes = [ctypes.c_int64, ctypes.c_int64]
    lib.autoplace_claim_chunk.restype = ctypes.c_int64
    lib.autoplace_claim_chunk.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
    return lib


def test_a_thread_takes_its_own_range_in_order_then_the_back_of_the_fullest(claims):
    ranges = claims.autoplace_split_chunks(3, 10)  # ranges [0, 3), [3, 6), [6, 10)
    taken = [claims.autoplace_claim_chunk(ranges, 1, 3) for _ in range(3)]
    assert taken == [3, 4, 5]
    # its own range empty: the back of the fullest (thread 2's, 4 left; then 3 and 3 left:
    # the first's, thread 0's)
    assert [claims.autoplace_claim_chunk(ranges, 1, 3) for _ in range(3)] == [9, 2, 8]
    assert claims.autoplace_claim_chunk(ranges, 0, 3) == 0  # thread 0 still has its front
    rest = [claims.autoplace_claim_chunk(ranges, 2, 3) for _ in range(4)]
    assert rest == [6, 7, 1, -1]
    assert claims.autoplace_claim_chunk(ranges, 0, 3) == -1


def test_every_chunk_is_claimed_once_by_threads_claiming_at_once(claims):
    ranges = claims.autoplace_split_chunks(4, 5000)
    got: queue.SimpleQueue = queue.SimpleQueue()

    def claim_all(me: int) -> None:
        while (chunk := claims.autoplace_claim_chunk(ranges, me, 4)) >= 0:
            got.put(chunk)

    threads = [threading.Thread(target=claim_all, args=(me,)) for me in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    chunks = [got.get() for _ in range(got.qsize())]
    assert sorted(chunks) == list(range(5000))


@T.prim_func(s_tir=True)
def skewed(who: T.Buffer((64,), "int64"), acc: T.Buffer((64,), "float32")):
    """Iterations 32-63 (the second thread's static share) are slow; each records the
    thread that ran it."""
    for i in T.parallel(64):
        who[i] = T.call_extern("int64", "pthread_self")
        acc[i] = T.float32(0)
        for _ in range(T.if_then_else(i >= 32, 2000000, 1)):
            acc[i] = acc[i] * T.float32(0.5) + T.float32(1)


def build(func, path, chunks: bool):
    func = dynamic_chunks(func, 2) if chunks else func
    lib = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}),
                      target=HOST)
    export_library(lib, path, None, "test", [CLAIM_SOURCE])
    return tvm.runtime.load_module(str(path))


def in_two_threads(call):
    """``call()`` in a thread whose TVM pool has two threads; its result."""
    worker, out = Worker("two", pool_setup(2)), queue.SimpleQueue()
    worker.submit(lambda: out.put(call()))
    try:
        return out.get(timeout=120)
    finally:
        worker.close()


def who_ran(lib) -> np.ndarray:
    who = tvm.runtime.tensor(np.zeros(64, "int64"))
    acc = tvm.runtime.tensor(np.zeros(64, "float32"))
    in_two_threads(lambda: lib["main"](who, acc))
    np.testing.assert_allclose(acc.numpy()[32:], 2.0, rtol=1e-6)
    return who.numpy()


def test_a_thread_done_with_its_share_runs_chunks_of_the_slower_one(tmp_path):
    static = who_ran(build(skewed, tmp_path / "static.so", chunks=False))
    assert len(set(static)) == 2  # two threads ran it ...
    assert static[0] not in set(static[32:])  # ... each its own half
    claimed = who_ran(build(skewed, tmp_path / "claimed.so", chunks=True))
    assert len(set(claimed)) == 2
    first = claimed[0]  # the thread of the fast half took the last chunk of the slow half
    assert claimed[63] == first and set(claimed[:32]) == {first}


def conv_func():
    """A conv with a padding and a relu."""
    from tvm import te, topi

    data = te.placeholder((1, 16, 30, 30), name="data")
    weight = te.placeholder((32, 16, 3, 3), name="weight")
    out = topi.nn.relu(topi.nn.conv2d_nchw(data, weight, 1, 1, 1))
    return te.create_prim_func([data, weight, out])


def conv_kernel():
    """:func:`conv_func` scheduled by the default rules: two parallel loops (its padding's
    and its own)."""
    return cpu_schedule(conv_func(), HOST, True)


def test_a_conv_in_claimed_chunks_computes_what_it_did(tmp_path):
    func = conv_kernel()
    loops = len(re.findall(r"T\.parallel\(", func.script()))
    assert loops == 2
    claimed = dynamic_chunks(func, 2)
    text = claimed.script()
    assert text.count("autoplace_claim_chunk") == loops
    assert text.count("autoplace_split_chunks") == loops
    assert len(re.findall(r"T\.parallel\((?:T\.int64\()?2\)?\)", text)) == loops  # a task a thread
    rng = np.random.default_rng(0)
    args = [rng.random((1, 16, 30, 30), "float32"), rng.random((32, 16, 3, 3), "float32")]
    outs = []
    for name, chunks in (("static", False), ("claimed", True)):
        lib = build(func, tmp_path / f"{name}.so", chunks)
        tensors = [tvm.runtime.tensor(a) for a in args] + [
            tvm.runtime.tensor(np.zeros((1, 32, 30, 30), "float32"))]
        in_two_threads(lambda: lib["main"](*tensors))  # noqa: B023 - called at once
        outs.append(tensors[-1].numpy())
    np.testing.assert_array_equal(outs[0], outs[1])
    assert outs[1].max() > 0


def test_one_thread_or_no_parallel_loop_leaves_the_kernel_as_it_was():
    func = conv_kernel()
    assert dynamic_chunks(func, 1).same_as(func)
    serial = cpu_schedule(conv_func(), HOST, False)
    assert "T.parallel" not in serial.script()
    assert dynamic_chunks(serial, 2).same_as(serial)


def test_a_loop_is_cut_in_chunks_per_thread_of_whole_iterations():
    func = conv_kernel()
    extents = [int(n) for n in re.findall(r"T\.parallel\((?:T\.int64\()?(\d+)", func.script())]
    text = dynamic_chunks(func, 2).script()
    chunks = [int(n) for n in re.findall(r'"autoplace_split_chunks", T\.int64\(2\), '
                                         r'T\.int64\((\d+)\)', text)]
    sizes = [math.ceil(e / (2 * CHUNKS_PER_THREAD)) for e in extents]
    assert chunks == [math.ceil(e / s) for e, s in zip(extents, sizes)]
    assert all(c <= 2 * CHUNKS_PER_THREAD for c in chunks) and max(sizes) > 1


def test_the_claim_functions_are_cross_built_into_an_aarch64_library(tmp_path):
    cross = need_cross()
    target = tvm.target.Target({"kind": "llvm", "mtriple": "aarch64-linux-gnu",
                                "num-cores": 4})
    func = dynamic_chunks(cpu_schedule(conv_func(), target, True), 4)
    lib = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}),
                      target=target)
    path = tmp_path / "board.so"
    export_library(lib, path, cross, "test", [CLAIM_SOURCE])
    assert elf_machine(path) == AARCH64
    out = subprocess.run([NM, "-D", "--defined-only", str(path)], capture_output=True,
                         text=True, check=True).stdout
    assert {"autoplace_claim_chunk", "autoplace_split_chunks", "__tvm_ffi_main"} <= {
        line.split()[-1] for line in out.splitlines() if line.strip()}

