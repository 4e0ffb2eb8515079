"""MetaSchedule's builder with its workers kept for a job (autoplace.deploy.builder_pool):
batches share one pool of worker processes, a candidate that fails is reported as
LocalBuilder reports it and the others build, and a pool is replaced after its batches."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import te
from tvm.s_tir.meta_schedule.builder import BuilderInput

from autoplace.deploy import builder_pool
from autoplace.deploy.builder_pool import PooledBuilder
from autoplace.deploy.candidate_build import build_candidate

TARGET = tvm.target.Target({"kind": "llvm"})


def doubling(n: int) -> tvm.IRModule:
    a = te.placeholder((n,), name="A")
    b = te.compute((n,), lambda i: a[i] * 2.0, name="B")
    return tvm.IRModule({"main": te.create_prim_func([a, b])})


def check_doubles(path: str, n: int) -> None:
    """The library at ``path`` (a tar of objects, as the runner receives it) doubles."""
    lib = tvm.runtime.load_module(path)
    a = tvm.runtime.tensor(np.arange(n, dtype="float32"))
    b = tvm.runtime.tensor(np.zeros(n, dtype="float32"))
    lib["main"](a, b)
    np.testing.assert_array_equal(b.numpy(), 2 * a.numpy())


@pytest.fixture
def builder():
    b = PooledBuilder(max_workers=2, timeout_sec=120, f_build=build_candidate)
    yield b
    b.close()


def test_batches_share_one_pool_and_build_what_they_are_given(builder):
    first = builder.build([BuilderInput(doubling(n), TARGET) for n in (16, 32)])
    second = builder.build([BuilderInput(doubling(64), TARGET)])
    assert builder.pools_started == 1
    for result, n in zip([*first, *second], (16, 32, 64)):
        assert result.error_msg is None, result.error_msg
        check_doubles(result.artifact_path, n)


def test_a_failed_candidate_is_reported_and_the_others_build(builder):
    bad = BuilderInput(doubling(8), TARGET, params={"w": tvm.runtime.tensor(np.ones(2))})
    failed, built = builder.build([bad, BuilderInput(doubling(8), TARGET)])
    assert failed.artifact_path is None
    assert failed.error_msg.startswith("LocalBuilder: An exception occurred")
    assert "without bound parameters" in failed.error_msg
    assert built.error_msg is None
    check_doubles(built.artifact_path, 8)


def test_a_pool_is_replaced_after_its_batches(builder, monkeypatch):
    monkeypatch.setattr(builder_pool, "BATCHES_PER_POOL", 2)
    for _ in range(3):
        (result,) = builder.build([BuilderInput(doubling(4), TARGET)])
        assert result.error_msg is None, result.error_msg
    assert builder.pools_started == 2
