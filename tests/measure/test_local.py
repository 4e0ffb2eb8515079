"""LocalMeasurer: real builds in worker processes, real timed runs on this host."""

from __future__ import annotations

import dataclasses

import pytest
from factories import resident_and_streamed
from tvm import te

from autoplace.deploy.run import TimeSettings
from autoplace.frontend.te import from_te
from autoplace.measure.base import ErrorKind
from autoplace.measure.local import LocalMeasurer
from autoplace.profile_io import load_profile
from autoplace.space import Placement, SearchSpace

FAST = TimeSettings(number=1, repeat=3, warmup=1)


def heavy_te(n: int = 640):
    """One unscheduled n^3 matmul: about a second per run on this host."""
    a = te.placeholder((n, n), "float32", name="A")
    b = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="MM")
    d = te.compute((n, n), lambda i, j: c[i, j] + 1.0, name="ADD")
    return from_te([d], [a, b], "heavy")


def test_measures_real_builds_in_order(seed, soc):
    mod, graph = seed
    space = SearchSpace(graph, soc)
    crossing = space.from_user({"C": "cpu1", "D": "accelerator1",
                                "E": {"unit": "accelerator2", "scope": "sram2"}})
    bad = Placement(ops={**crossing.ops, "C": ("cpu1", "sram2")}, copies={})
    m = LocalMeasurer(mod, graph, soc, settings=FAST, timeout=60)
    try:
        results = m.measure([space.uniform("cpu1"), bad, crossing, space.uniform("cpu1")])
    finally:
        m.close()
    assert [r.error for r in results] == [None, ErrorKind.INVALID, None, None]
    assert "cannot write scope 'sram2'" in results[1].detail
    assert all(0 < r.latency_s < 0.1 for r in results if r.ok)
    assert results[0] is results[3]  # one build and one run for a repeated candidate
    assert m.measure([]) == []


def test_resident_weights_are_placed_when_the_runner_loads_the_library(weighted, soc):
    """The runner runs the library's load step (else ``main`` misses its weights)."""
    mod, graph = weighted
    space = SearchSpace(graph, soc)
    placement = resident_and_streamed(space)
    assert list(placement.weights.values()) == ["resident"]
    m = LocalMeasurer(mod, graph, soc, settings=FAST, timeout=60, build_workers=1)
    try:
        results = m.measure([placement, space.uniform("cpu1")])
    finally:
        m.close()
    assert [r.error for r in results] == [None, None], [r.detail for r in results]


def test_a_build_failure_is_a_failed_result(seed, soc):
    mod, graph = seed
    units = tuple(dataclasses.replace(u, target={"kind": "llvm", "num-cores": "two"})
                  if u.name == "accelerator1" else u for u in soc.units)
    broken = dataclasses.replace(soc, units=units)
    space = SearchSpace(graph, broken)
    m = LocalMeasurer(mod, graph, broken, settings=FAST)
    try:
        results = m.measure([space.from_user({"D": "accelerator1"}), space.uniform("cpu2")])
    finally:
        m.close()
    assert results[0].error is ErrorKind.BUILD and "num-cores" in results[0].detail
    assert results[1].ok


def test_a_run_over_the_timeout_fails_and_the_runner_recovers():
    mod, graph = heavy_te()
    host = load_profile("host")
    placement = SearchSpace(graph, host).uniform("cpu")
    m = LocalMeasurer(mod, graph, host, settings=TimeSettings(number=1, repeat=5, warmup=1),
                      timeout=0.5)
    try:
        (slow,) = m.measure([placement])
        m.timeout, m.settings = 120.0, TimeSettings(number=1, repeat=1, warmup=0)
        (done,) = m.measure([placement])
    finally:
        m.close()
    assert slow.error is ErrorKind.TIMEOUT and "0.5 s" in slow.detail
    assert done.ok and done.latency_s > 0.01


def test_a_run_failure_is_a_failed_result(seed, soc):
    """Profile scope names as memory scopes build, but a CPU cannot allocate them."""
    mod, graph = seed
    space = SearchSpace(graph, soc)
    m = LocalMeasurer(mod, graph, soc, settings=FAST, memory_scopes="profile")
    try:
        (res,) = m.measure([space.from_user({"E": {"unit": "accelerator2", "scope": "sram2"}})])
    finally:
        m.close()
    assert res.error is ErrorKind.RUN and "alloc" in res.detail


def test_over_capacity_is_refused_without_building(seed, soc):
    mod, graph = seed
    scopes = tuple(dataclasses.replace(s, capacity_bytes=1000) if s.name == "sram2" else s
                   for s in soc.scopes)
    small = dataclasses.replace(soc, scopes=scopes)
    m = LocalMeasurer(mod, graph, small, settings=FAST, build_workers=1)
    try:
        (res,) = m.measure([SearchSpace(graph, small).from_user(
            {"E": {"unit": "accelerator2", "scope": "sram2"}})])
    finally:
        m.close()
    assert res.error is ErrorKind.OUT_OF_MEMORY and "not built" in res.detail
    assert "sram2" in res.detail


def test_time_settings_are_validated():
    with pytest.raises(ValueError, match="repeat >= 1 must hold, got repeat=0"):
        TimeSettings(repeat=0)
