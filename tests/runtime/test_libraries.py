"""Kernels compile once per unit target; a candidate is assembled, never rebuilt."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from runtime_factories import inputs_of

from autoplace.deploy.targets import BuildError
from autoplace.hardware.load import load_profile
from autoplace.models import load_module
from autoplace.runtime import Runtime
from autoplace.space import SearchSpace


@pytest.fixture(scope="module")
def seed_te():
    return load_module("seed_te")


def test_candidates_are_assembled_from_one_library_per_target(seed_te, tmp_path):
    mod, graph = seed_te
    soc = load_profile("soc")  # cpu1, cpu2: one target; accelerator1, 2: another
    space = SearchSpace(graph, soc)
    rng = np.random.default_rng(0)
    placements = space.decode_rows(*space.random_genomes(12, rng))
    with Runtime(mod, graph, soc, cache_dir=tmp_path, space=space) as rt:
        runs = [rt.run(rt.assemble(p), inputs_of(rt.program)) for p in placements]
        assert len(rt.libraries.compiled) == 2  # not one per candidate, nor per unit
    for out in runs[1:]:
        np.testing.assert_allclose(out[0], runs[0][0], rtol=1e-6)
    with Runtime(mod, graph, soc, cache_dir=tmp_path, space=space) as again:
        again.run(again.assemble(placements[0]), inputs_of(again.program))
        assert again.libraries.compiled == []  # the second job: all from the cache


def test_a_changed_kernel_is_not_taken_from_the_cache(seed_te, tmp_path):
    mod, graph = seed_te
    host = load_profile("host")
    with Runtime(mod, graph, host, cache_dir=tmp_path) as rt:
        rt.assemble(rt.space.uniform("core0"))
        first = rt.libraries.path("core0")
    changed = dataclasses.replace(host, units=tuple(
        dataclasses.replace(u, target={**u.target, "opt-level": 2}) if u.name == "core0" else u
        for u in host.units))
    with Runtime(mod, graph, changed, cache_dir=tmp_path) as rt:
        rt.assemble(rt.space.uniform("core0"))
        assert len(rt.libraries.compiled) == 1  # another target: compiled, not reused
        assert rt.libraries.compiled[0] != str(first)


def test_a_unit_whose_device_is_missing_is_refused_by_name(seed_te, tmp_path):
    mod, graph = seed_te
    soc = load_profile("soc")
    gpu = dataclasses.replace(soc, units=tuple(
        dataclasses.replace(u, target={"kind": "opencl"}) if u.name == "accelerator1" else u
        for u in soc.units))
    with Runtime(mod, graph, gpu, cache_dir=tmp_path) as rt:
        with pytest.raises(BuildError, match="unit 'accelerator1': target kind 'opencl'"):
            rt.assemble(rt.space.uniform("accelerator1"))
