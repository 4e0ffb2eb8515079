"""What the schedule overlaps, the runtime runs at once: observed, not timed.

Each test places a *meeting* kernel (tests/runtime/conftest.py) so that the run can only
finish if the other party is in flight at the same moment; the same placement made serial
fails, which shows the test can fail.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from runtime_factories import arm, inputs_of, meeting_copy, meeting_module, two_unit_profile

from autoplace.hardware.load import load_profile
from autoplace.runtime import RunError, Runtime
from autoplace.space import SearchSpace


@pytest.fixture(scope="module")
def branches():
    """Two independent meeting kernels on the input, then their sum."""
    return meeting_module([("meet", None), ("meet", None), ("add", (0, 1))])


def test_independent_kernels_of_two_units_are_in_flight_at_once(branches, kernel_cache, loop):
    mod, graph = branches
    profile = two_unit_profile()
    space = SearchSpace(graph, profile)
    with Runtime(mod, graph, profile, cache_dir=kernel_cache, space=space,
                 native=loop) as rt:
        assert (rt.executor.native is not None) == loop  # the loop asked for
        x = inputs_of(rt.program)
        apart = rt.assemble(space.from_user({"meet": "u0", "meet#1": "u1"}))
        arm()
        (out,) = rt.run(apart, x, timeout=60)
        np.testing.assert_allclose(out, 2 * x[0])
        together = rt.assemble(space.from_user({"meet": "u0", "meet#1": "u0"}))
        arm(timeout=0.5)
        with pytest.raises(RunError, match="op meet"):  # one unit: the first waits alone
            rt.run(together, x, timeout=60)


@pytest.fixture(scope="module")
def copy_beside_kernel():
    """plus_one (u0) -> copy to u1's SRAM -> plus_one (u1); a meeting kernel on u0 after
    the first plus_one, independent of the copy."""
    return meeting_module([("plus_one", None), ("meet", None), ("plus_one", 0)])


@pytest.mark.parametrize("mode", ["async", "sync"])
def test_an_async_copy_runs_beside_its_units_kernels(copy_beside_kernel, kernel_cache, mode,
                                                     loop):
    mod, graph = copy_beside_kernel
    profile = two_unit_profile(sram=True)
    space = SearchSpace(graph, profile)
    spec = {"ops": {"plus_one": "u0", "meet": "u0",
                    "plus_one#1": {"unit": "u1", "scope": "sram"}},
            "copies": {"plus_one->plus_one#1": mode}}
    placement = space.from_user(spec)
    with Runtime(mod, graph, profile, cache_dir=kernel_cache, space=space,
                 copy=meeting_copy, native=loop) as rt:
        a = rt.assemble(placement)
        assert [w.resource for w in a.schedule.work if w.kind == "copy"] == \
            ["dma0" if mode == "async" else "u0"]
        x = inputs_of(rt.program)
        if mode == "async":  # the copy, on dma0, meets the kernel u0 runs meanwhile
            arm()
            meet, plus_two = rt.run(a, x, timeout=60)
            np.testing.assert_allclose(meet, x[0])
            np.testing.assert_allclose(plus_two, x[0] + 2, rtol=1e-6)
        else:  # a sync copy holds u0: the kernel after it cannot meet it
            arm(timeout=0.5)
            with pytest.raises(RunError):
                rt.run(a, x, timeout=60)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="pins units to two CPUs")
def test_units_pinned_to_a_common_cpu_take_turns(branches, kernel_cache, loop):
    """On the host profile, core0 and core1 run at once; core0 and cpu (CPUs 0 and 1)
    share CPU 0, so the runtime runs their work one after the other, as the simulator
    does (the meeting kernels then cannot meet)."""
    mod, graph = branches
    profile = load_profile("host")
    space = SearchSpace(graph, profile)
    with Runtime(mod, graph, profile, cache_dir=kernel_cache, space=space,
                 native=loop) as rt:
        x = inputs_of(rt.program)
        arm()
        (out,) = rt.run(rt.assemble(space.from_user({"meet": "core0", "meet#1": "core1"})),
                        x, timeout=60)
        np.testing.assert_allclose(out, 2 * x[0])
        shared = rt.assemble(space.from_user({"meet": "core0", "meet#1": "cpu"}))
        assert shared.waits[shared.schedule.op_work[1]] == (shared.schedule.op_work[0],)
        arm(timeout=0.5)
        with pytest.raises(RunError, match="op meet"):
            rt.run(shared, x, timeout=60)
