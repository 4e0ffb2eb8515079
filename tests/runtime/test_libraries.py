"""Kernels compile once per unit target; a candidate is assembled, never rebuilt."""

from __future__ import annotations

import ast
import dataclasses
import types
from pathlib import Path

import numpy as np
import pytest
from runtime_factories import inputs_of

from autoplace.deploy.targets import BuildError
from autoplace.hardware.load import load_profile
from autoplace.models import load_module
from autoplace.runtime import Runtime, libraries
from autoplace.runtime.packed_weights import read_table, table_path
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


def _on_core0(seed_te, profile, cache) -> tuple[list[str], Path]:
    """A job assembling seed_te all on ``core0``: the libraries it compiled, core0's."""
    mod, graph = seed_te
    with Runtime(mod, graph, profile, cache_dir=cache) as rt:
        rt.assemble(rt.space.uniform("core0"))
        return rt.libraries.compiled, rt.libraries.path("core0")


def test_a_changed_kernel_is_not_taken_from_the_cache(seed_te, tmp_path):
    host = load_profile("host")
    _, first = _on_core0(seed_te, host, tmp_path)
    changed = dataclasses.replace(host, units=tuple(
        dataclasses.replace(u, target={**u.target, "opt-level": 2}) if u.name == "core0" else u
        for u in host.units))
    compiled, _ = _on_core0(seed_te, changed, tmp_path)
    assert len(compiled) == 1  # another target: compiled, not reused
    assert compiled[0] != str(first)


def test_a_library_made_by_other_schedule_rules_is_compiled_again(seed_te, tmp_path,
                                                                   monkeypatch):
    """The rules' source is part of the cache key: a change to it (a copy of cpu_rules
    with a line added stands for one) compiles the library again; the same rules reuse it."""
    host = load_profile("host")
    _, first = _on_core0(seed_te, host, tmp_path)
    assert _on_core0(seed_te, host, tmp_path)[0] == []
    edited = tmp_path / "cpu_rules.py"
    edited.write_text(Path(libraries.cpu_rules.__file__).read_text() + "# edited\n")
    monkeypatch.setattr(libraries, "SCHEDULE_RULES", (
        types.SimpleNamespace(__file__=str(edited)), *libraries.SCHEDULE_RULES[1:]))
    libraries.rules_digest.cache_clear()
    try:
        compiled, path = _on_core0(seed_te, host, tmp_path)
    finally:
        libraries.rules_digest.cache_clear()
    assert compiled == [str(path)] and path != first


def test_a_unit_whose_device_is_missing_is_refused_by_name(seed_te, tmp_path):
    mod, graph = seed_te
    soc = load_profile("soc")
    gpu = dataclasses.replace(soc, units=tuple(
        dataclasses.replace(u, target={"kind": "opencl"}) if u.name == "accelerator1" else u
        for u in soc.units))
    with Runtime(mod, graph, gpu, cache_dir=tmp_path) as rt:
        with pytest.raises(BuildError, match="unit 'accelerator1': target kind 'opencl'"):
            rt.assemble(rt.space.uniform("accelerator1"))


def test_a_convs_weight_is_read_packed_and_packed_once_per_library(kernel_cache):
    """squeezenet on the host's ``cpu``: the library's table names conv kernels whose
    weight is packed (output channels innermost, in vectors), the call of such a kernel
    reads the packed copy, made once."""
    mod, graph = load_module("squeezenet")
    with Runtime(mod, graph, load_profile("host"), cache_dir=kernel_cache) as rt:
        assembled = rt.assemble(rt.space.uniform("cpu"))
        packs = rt.libraries.packs("cpu")
        assert packs and all("conv2d" in f for f in packs)
        k, kernel = next((k, kn) for k, kn in enumerate(rt.program.kernels) if kn.func in packs)
        (spec,) = packs[kernel.func]
        assert spec.param == 1 and kernel.args[1][0] == "weight"
        packed = rt.libraries.packed("cpu", kernel.func, spec, kernel.args[1][1])
        assert rt.libraries.packed("cpu", kernel.func, spec, kernel.args[1][1]) is packed
        weight = rt.program.weight_values[kernel.args[1][1]].numpy()
        lanes = spec.shape[-1]
        np.testing.assert_array_equal(packed.numpy(), weight.reshape(
            weight.shape[0] // lanes, lanes, *weight.shape[1:]).transpose(0, 2, 3, 4, 1))
        item = next(i for i, w in enumerate(assembled.schedule.work)
                    if w.kind == "op" and w.op == k)
        assert assembled.calls[item][0][1][1] is packed


@pytest.mark.parametrize("text, said", [
    ('{"format": "autoplace-packs", "packs": {"f": [{"param": 1, "shape": [4, 0], '
     '"dtype": "float32"}]}}', "shape [4, 0]"),
    ('{"format": "other", "packs": {}}', "format 'other'"),
    ('{"format": "autoplace-packs", "packs": {"f": [{"shape": [4]}]}}', "'param'"),
    ("{", "Expecting")])
def test_a_pack_table_that_is_not_one_is_refused_by_its_file(tmp_path, text, said):
    library = tmp_path / "kernels-0.so"
    table_path(library).write_text(text)
    with pytest.raises(BuildError) as err:
        read_table(library)
    assert str(table_path(library)) in str(err.value) and said in str(err.value)
    assert "\n" not in str(err.value)


def test_a_cached_library_without_its_pack_table_is_compiled_again(seed_te, tmp_path):
    host = load_profile("host")
    _, path = _on_core0(seed_te, host, tmp_path)
    table_path(path).unlink()
    compiled, _ = _on_core0(seed_te, host, tmp_path)
    assert compiled == [str(path)] and table_path(path).is_file()
    assert _on_core0(seed_te, host, tmp_path)[0] == []


def test_every_deploy_module_the_schedule_rules_import_is_part_of_the_cache_key():
    """A rule that moves into a module of its own (channel_pairs, tir_facts) still keys the
    cache: each module of ``autoplace.deploy`` (where the rules live) that a rules module
    imports is one of the rules."""
    keyed = {m.__name__ for m in libraries.SCHEDULE_RULES}
    for module in libraries.SCHEDULE_RULES:
        tree = ast.parse(Path(module.__file__).read_text())
        imported = {node.module for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and node.module
                    and node.module.startswith("autoplace.deploy.")}
        imported |= {f"{node.module}.{a.name}" for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom) and node.module == "autoplace.deploy"
                     for a in node.names}
        assert imported <= keyed, (module.__name__, imported - keyed)
