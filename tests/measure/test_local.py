"""LocalMeasurer: kernels compiled once per unit target, candidates run by the runtime here."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import tvm
from factories import resident_and_streamed
from tvm import te

from autoplace.deploy.run import TimeSettings
from autoplace.frontend.te import from_te
from autoplace.hardware.load import load_profile
from autoplace.measure.base import ErrorKind
from autoplace.measure.local import LocalMeasurer
from autoplace.space import Placement, SearchSpace

FAST = TimeSettings(number=1, repeat=3, warmup=1)


def heavy_te(n: int = 640):
    """The n^3 products of a matmul summed into one number: a kernel whose loops all reduce,
    so that no schedule runs it in parallel or vectorises it (the default schedule leaves it
    as it is); about a quarter of a second per run on this host."""
    a = te.placeholder((n, n), "float32", name="A")
    b = te.placeholder((n, n), "float32", name="B")
    i, k, j = (te.reduce_axis((0, n), name=v) for v in "ikj")
    c = te.compute((1,), lambda _: te.sum(a[i, k] * b[k, j], axis=[i, k, j]), name="MM")
    d = te.compute((1,), lambda z: c[z] + 1.0, name="ADD")
    return from_te([d], [a, b], "heavy")


def test_measures_in_order_and_never_rebuilds(seed, soc, tmp_path):
    mod, graph = seed
    space = SearchSpace(graph, soc)
    crossing = space.from_user({"C": "cpu1", "D": "accelerator1",
                                "E": {"unit": "accelerator2", "scope": "sram2"}})
    bad = Placement(ops={**crossing.ops, "C": ("cpu1", "sram2")}, copies={})
    m = LocalMeasurer(mod, graph, soc, settings=FAST, timeout=60, cache_dir=tmp_path)
    try:
        compiled = m.compiled
        results = m.measure([space.uniform("cpu1"), bad, crossing, space.uniform("cpu1")])
        more = m.measure(space.decode_rows(*space.random_genomes(8, np.random.default_rng(0))))
        assert m.compiled == compiled == 2  # one library per target (cpus, accelerators)
    finally:
        m.close()
    assert [r.error for r in results] == [None, ErrorKind.INVALID, None, None]
    assert "cannot write scope 'sram2'" in results[1].detail
    assert all(0 < r.latency_s < 0.1 for r in results if r.ok)
    assert set(results[2].unit_busy_s) == {"cpu1", "accelerator1", "accelerator2"}
    assert results[0] is results[3]  # one run for a repeated candidate
    assert any(r.ok for r in more)
    assert m.measure([]) == []


def test_resident_weights_are_placed_when_a_candidate_is_assembled(weighted, soc, tmp_path):
    """The runtime copies resident weights into their scope (else the kernel misses them)."""
    mod, graph = weighted
    space = SearchSpace(graph, soc)
    placement = resident_and_streamed(space)
    assert list(placement.weights.values()) == ["resident"]
    m = LocalMeasurer(mod, graph, soc, settings=FAST, timeout=60, cache_dir=tmp_path)
    try:
        results = m.measure([placement, space.uniform("cpu1")])
    finally:
        m.close()
    assert [r.error for r in results] == [None, None], [r.detail for r in results]


def test_a_build_failure_is_a_failed_result(seed, soc, tmp_path):
    """A unit whose library cannot be built here (another architecture, no cross compiler):
    its placements fail, the others run. (A target TVM refuses is the profile's error,
    refused before any run: tests/cli/test_bad_inputs.py.)"""
    mod, graph = seed
    aarch64 = {"kind": "llvm", "mtriple": "aarch64-linux-gnu", "num-cores": 1}
    units = tuple(dataclasses.replace(u, target=aarch64, cross_compiler=None)
                  if u.name == "accelerator1" else u for u in soc.units)
    broken = dataclasses.replace(soc, units=units)
    space = SearchSpace(graph, broken)
    m = LocalMeasurer(mod, graph, broken, settings=FAST, cache_dir=tmp_path)
    try:
        results = m.measure([space.from_user({"D": "accelerator1"}), space.uniform("cpu2")])
    finally:
        m.close()
    assert results[0].error is ErrorKind.BUILD and "mtriple" in results[0].detail
    assert results[1].ok


def test_a_run_over_the_timeout_fails_and_the_runner_recovers(tmp_path):
    mod, graph = heavy_te()
    host = load_profile("host")
    placement = SearchSpace(graph, host).uniform("cpu")
    m = LocalMeasurer(mod, graph, host, settings=TimeSettings(number=1, repeat=5, warmup=1),
                      timeout=0.5, cache_dir=tmp_path)
    try:
        (slow,) = m.measure([placement])
        m.timeout, m.settings = 120.0, TimeSettings(number=1, repeat=1, warmup=0)
        (done,) = m.measure([placement])
    finally:
        m.close()
    assert slow.error is ErrorKind.TIMEOUT and "0.5 s" in slow.detail
    assert done.ok and done.latency_s > 0.01


def missing_function_te():
    """A kernel that calls a packed function nobody registered: it fails when it runs."""
    from tvm import relax

    from autoplace.frontend.relax import from_relax

    def extern(a):
        return te.extern(a.shape, [a], lambda ins, outs: tvm.tirx.call_packed(
            "autoplace_test.nobody_registered_this", ins[0], outs[0]), name="B",
            dtype="float32")

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((16,), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(bb.emit_te(extern, x, primfunc_name_hint="B"))
        bb.emit_func_output(out)
    return from_relax(bb.finalize(), "missing")


def test_a_run_failure_is_a_failed_result(tmp_path):
    mod, graph = missing_function_te()
    host = load_profile("host")
    m = LocalMeasurer(mod, graph, host, settings=FAST, cache_dir=tmp_path)
    try:
        (res,) = m.measure([SearchSpace(graph, host).uniform("core0")])
    finally:
        m.close()
    assert res.error is ErrorKind.RUN
    assert "op B on core0" in res.detail and "nobody_registered_this" in res.detail


def test_over_capacity_is_refused_without_running(seed, soc, tmp_path):
    mod, graph = seed
    scopes = tuple(dataclasses.replace(s, capacity_bytes=1000) if s.name == "sram2" else s
                   for s in soc.scopes)
    small = dataclasses.replace(soc, scopes=scopes)
    m = LocalMeasurer(mod, graph, small, settings=FAST, cache_dir=tmp_path)
    try:
        (res,) = m.measure([SearchSpace(graph, small).from_user(
            {"E": {"unit": "accelerator2", "scope": "sram2"}})])
    finally:
        m.close()
    assert res.error is ErrorKind.OUT_OF_MEMORY and "not run" in res.detail
    assert "sram2" in res.detail


def test_time_settings_are_validated():
    with pytest.raises(ValueError, match="repeat >= 1 must hold, got repeat=0"):
        TimeSettings(repeat=0)
