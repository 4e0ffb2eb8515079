"""The workers' loop in C (autoplace.runtime.native): compiled once, entered once per
worker and left when the runtime closes, stopped on time, and replaced by the Python loop,
with a warning, where no C compiler is found."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest
from runtime_factories import arm, inputs_of, meeting_module, two_unit_profile

from autoplace.runtime import RunError, Runtime, RunTimeout
from autoplace.runtime.native import native_library
from autoplace.runtime.workers import Worker
from autoplace.space import SearchSpace


@pytest.fixture(scope="module")
def chain():
    """plus_one -> meet -> plus_one: the meeting kernel waits for a second party."""
    return meeting_module([("plus_one", None), ("meet", 0), ("plus_one", 1)])


def test_the_loop_compiles_once_per_cache(tmp_path):
    first = native_library(tmp_path)
    assert first is not None and native_library(tmp_path) is first
    assert len(list(tmp_path.glob("native-worker-*.so"))) == 1


def test_a_library_that_does_not_load_is_a_warning_not_a_crash(tmp_path):
    """A cached loop built for another machine (a cache shared over NFS), or truncated."""
    from autoplace.runtime import native

    broken = tmp_path / "native-worker-0000.so"
    broken.write_bytes(b"\x7fELF not really")
    with pytest.warns(UserWarning, match="did not compile or load"):
        assert native._load(broken, "cc") is None


def test_workers_stay_in_the_c_loop_between_runs(chain, kernel_cache, monkeypatch):
    """Each worker is handed one job, its loop, in the runtime's life: runs reach it in C
    (with the Python loop, every run hands each worker a job); closing ends the loops."""
    handed = []
    submit = Worker.submit
    monkeypatch.setattr(Worker, "submit", lambda w, job: (handed.append(w.name), submit(w, job)))
    mod, graph = chain
    profile = two_unit_profile()
    space = SearchSpace(graph, profile)
    with Runtime(mod, graph, profile, cache_dir=kernel_cache, space=space) as rt:
        x = inputs_of(rt.program)
        for spec in ({"meet": "u1"}, {"plus_one": "u1", "meet": "u0"}, {"meet": "u1"}):
            a = rt.assemble(space.from_user(spec))
            for _ in range(3):
                arm(parties=1)
                (out,) = rt.run(a, x, timeout=60)
                np.testing.assert_allclose(out, x[0] + 2, rtol=1e-6)
        workers = list(rt.executor.workers.values())
    assert sorted(handed) == ["u0", "u1"]
    for w in workers:
        w.join(timeout=30)
    names = {f"autoplace-{w.name}" for w in workers}
    assert not [t for t in threading.enumerate() if t.name in names]


def test_a_unit_pinned_to_a_cpu_not_ours_is_a_run_error(chain, kernel_cache, loop):
    mod, graph = chain
    elsewhere = max(os.sched_getaffinity(0)) + 1
    profile = two_unit_profile(u1_cpus=(elsewhere,))
    space = SearchSpace(graph, profile)
    with Runtime(mod, graph, profile, cache_dir=kernel_cache, space=space,
                 native=loop) as rt:
        x = inputs_of(rt.program)
        arm(parties=1)
        with pytest.raises(RunError, match=rf"worker 'u1' could not start: cpus \[{elsewhere}\]"):
            rt.run(rt.assemble(space.from_user({"meet": "u1"})), x, timeout=60)
        arm(parties=1)
        (out,) = rt.run(rt.assemble(space.uniform("u0")), x, timeout=60)  # u0 still runs
        np.testing.assert_allclose(out, x[0] + 2, rtol=1e-6)


def test_without_a_compiler_the_python_loop_runs_an_artefact(chain, kernel_cache, tmp_path,
                                                             monkeypatch):
    """A board with the kernel libraries of an artefact but no C compiler."""
    mod, graph = chain
    profile = two_unit_profile()
    space = SearchSpace(graph, profile)
    with Runtime(mod, graph, profile, cache_dir=kernel_cache, space=space) as built:
        files = {u: built.libraries.path(u) for u in ("u0", "u1") if built.libraries.build(u)}
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    with pytest.warns(UserWarning, match="did not compile .*run their kernels from Python"):
        rt = Runtime(mod, graph, profile, cache_dir=tmp_path / "cache", space=space, files=files)
    with rt:
        assert rt.executor.native is None
        x = inputs_of(rt.program)
        arm(parties=1)
        (out,) = rt.run(rt.assemble(space.from_user({"meet": "u1"})), x, timeout=60)
        np.testing.assert_allclose(out, x[0] + 2, rtol=1e-6)


def test_a_run_past_its_timeout_is_stopped_and_the_runtime_refuses_more(chain, kernel_cache):
    mod, graph = chain
    profile = two_unit_profile()
    space = SearchSpace(graph, profile)
    with Runtime(mod, graph, profile, cache_dir=kernel_cache, space=space) as rt:
        assert rt.executor.native is not None
        a = rt.assemble(space.from_user({"meet": "u1"}))
        x = inputs_of(rt.program)
        barrier = arm(timeout=30)  # the meeting kernel waits for a party that never comes
        with pytest.raises(RunTimeout, match="exceeded its 0.5 s timeout"):
            rt.run(a, x, timeout=0.5)
        barrier.abort()  # the stuck kernel fails; its worker ends the run there
        with pytest.raises(RunTimeout):
            rt.run(a, x, timeout=60)


def test_a_failing_kernel_names_its_op_and_stops_the_other_units(chain, kernel_cache):
    mod, graph = chain
    profile = two_unit_profile()
    space = SearchSpace(graph, profile)
    with Runtime(mod, graph, profile, cache_dir=kernel_cache, space=space) as rt:
        a = rt.assemble(space.from_user({"plus_one": "u0", "meet": "u1", "plus_one#1": "u0"}))
        x = inputs_of(rt.program)
        arm().abort()  # the meeting kernel raises
        with pytest.raises(RunError, match=r"^op meet on u1: \w+Error"):
            rt.run(a, x, timeout=60)
        arm(parties=1)  # the next run is whole again: u0's worker did not wait for ever
        (out,) = rt.run(a, x, timeout=60)
        np.testing.assert_allclose(out, x[0] + 2, rtol=1e-6)
        trace = rt.last_trace if rt.last_trace is not None else rt.trace(a, timeout=60)
        work = a.schedule.op_work
        assert all(trace.start[i] < trace.end[i] for i in work)
        assert trace.end[work[0]] <= trace.start[work[1]] <= trace.end[work[2]] <= trace.wall_ns
