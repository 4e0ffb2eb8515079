"""Kernels of multi-core units: outer loops parallel, results unchanged."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import s_tir, te, tirx

from autoplace.deploy.schedule import MIN_PARALLEL, parallel_outer, threads_for
from autoplace.hardware.load import load_profile


def _loops(func: tirx.PrimFunc) -> list[tirx.For]:
    """Every loop of ``func``, outer before inner."""
    found, todo = [], [func.body]
    while todo:
        stmt = todo.pop()
        if isinstance(stmt, tirx.For):
            found.append(stmt)
        if isinstance(stmt, tirx.SeqStmt):
            todo += list(stmt.seq)
        elif isinstance(stmt, s_tir.SBlockRealize):
            todo.append(stmt.block)
        elif hasattr(stmt, "body"):
            todo.append(stmt.body)
    return found


def _conv_like():
    """A 1x16x12x12 output, reducing over 8 channels and a 3x3 window (plus a padding nest)."""
    x = te.placeholder((1, 8, 14, 14), name="x")
    w = te.placeholder((16, 8, 3, 3), name="w")
    pad = te.compute((1, 8, 16, 16), lambda n, c, h, v: tvm.tirx.if_then_else(
        tvm.tirx.all(h >= 1, h < 15, v >= 1, v < 15), x[n, c, h - 1, v - 1], 0.0), name="pad")
    rc, ry, rx = te.reduce_axis((0, 8)), te.reduce_axis((0, 3)), te.reduce_axis((0, 3))
    y = te.compute((1, 16, 12, 12), lambda n, k, h, v: te.sum(
        pad[n, rc, h + ry, v + rx] * w[k, rc, ry, rx], axis=[rc, ry, rx]), name="y")
    return te.create_prim_func([x, w, y]), [(1, 8, 14, 14), (16, 8, 3, 3), (1, 16, 12, 12)]


def _total():
    """A full reduction: nothing to run in parallel."""
    x = te.placeholder((64, 64), name="x")
    i, j = te.reduce_axis((0, 64)), te.reduce_axis((0, 64))
    s = te.compute((1,), lambda _: te.sum(x[i, j], axis=[i, j]), name="s")
    return te.create_prim_func([x, s]), [(64, 64), (1,)]


def _run(func, shapes, seed=0):
    lib = tvm.compile(tvm.IRModule({"main": func}), target="llvm")
    rng = np.random.default_rng(seed)
    args = [tvm.runtime.tensor(rng.random(s).astype("float32")) for s in shapes]
    lib["main"](*args)
    return args[-1].numpy()


def test_the_outer_spatial_loops_of_each_nest_run_in_parallel():
    func, shapes = _conv_like()
    par = parallel_outer(func)
    parallel = [f for f in _loops(par) if f.kind == tirx.ForKind.PARALLEL]
    # one per nest (pad, conv), each fusing the fewest outer loops with enough iterations:
    # n*c*h = 128 (pad), n*k*h = 192 (conv); the innermost spatial loop stays serial
    assert sorted(int(f.extent) for f in parallel) == [128, 192]
    assert all(int(f.extent) >= MIN_PARALLEL for f in parallel)
    serial_inner = [f for f in _loops(par) if f.kind == tirx.ForKind.SERIAL]
    assert sorted(int(f.extent) for f in serial_inner) == [3, 3, 8, 12, 16]
    np.testing.assert_array_equal(_run(par, shapes), _run(func, shapes))


def test_a_full_reduction_stays_serial():
    func, shapes = _total()
    par = parallel_outer(func)
    assert not [f for f in _loops(par) if f.kind == tirx.ForKind.PARALLEL]
    np.testing.assert_allclose(_run(par, shapes), _run(func, shapes), rtol=1e-6)


@pytest.mark.parametrize("name, threads", [("host", 2), ("soc", 1), ("biglittle", 2)])
def test_the_runtime_pool_has_as_many_threads_as_the_widest_unit(name, threads, monkeypatch):
    monkeypatch.setattr("os.sched_getaffinity", lambda _: {0, 1})  # a 2-CPU machine
    assert threads_for(load_profile(name)) == threads  # biglittle's 4 cores: capped at 2
