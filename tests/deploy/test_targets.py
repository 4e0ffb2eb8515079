"""Targets of profile units: a host-architecture target this CPU cannot run is built for it."""

from __future__ import annotations

import warnings

import pytest
import tvm
from tvm.target import codegen

from autoplace.deploy.targets import missing_isa, runnable_here

AVX512 = {"kind": "llvm", "mcpu": "x86-64-v4", "num-cores": 2}
HAS_AVX512 = "avx512f" in codegen.llvm_get_cpu_features(
    tvm.target.Target({"kind": "llvm", "mcpu": codegen.llvm_get_system_cpu()}))


def test_an_avx512_target_is_kept_where_this_cpu_runs_it_else_built_for_this_cpu():
    target = tvm.target.Target(AVX512)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = runnable_here(target, "cpu")
    if HAS_AVX512:
        assert missing_isa(target) == [] and got.attrs["mcpu"] == "x86-64-v4" and not caught
    else:
        assert {"avx512f", "avx512bw"} <= set(missing_isa(target))
        assert got.attrs["mcpu"] == codegen.llvm_get_system_cpu()
        assert int(got.attrs["num-cores"]) == 2  # the rest of the target kept
        assert len(caught) == 1 and "avx512f" in str(caught[0].message)


@pytest.mark.parametrize("spec", [
    {"kind": "llvm"},  # no mcpu: the host's baseline
    {"kind": "llvm", "mcpu": "x86-64-v4", "mtriple": "x86_64-linux-gnu"},  # a board's build
    {"kind": "llvm", "mcpu": "cortex-a76", "mtriple": "aarch64-linux-gnu"},
])
def test_targets_without_mcpu_or_for_a_named_triple_are_never_changed(spec):
    target = tvm.target.Target(spec)
    assert missing_isa(target) == []
    assert runnable_here(target, "u") is target
