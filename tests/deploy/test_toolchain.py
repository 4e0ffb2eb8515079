"""Which compiler links a unit's kernels: the host's for its own architecture, a cross
compiler for another (the profile key, else the command's option), refused without one."""

from __future__ import annotations

import dataclasses

import pytest

from autoplace.deploy.targets import BuildError
from autoplace.deploy.toolchain import compiler_for, host_arch, llvm_for, target_arch
from autoplace.hardware.load import load_profile, profile_from_toml
from autoplace.hardware.profile import Unit
from autoplace.hardware.write import to_toml

ARM = {"kind": "llvm", "mtriple": "aarch64-linux-gnu"}
OTHER = "riscv64" if host_arch() != "riscv64" else "aarch64"  # not this host's


def unit(target: dict, cross: str = "") -> Unit:
    return Unit(name="u", target=target, accepts=frozenset({"*"}), gflops={"default": 1.0},
                cross_compiler=cross)


def test_the_architecture_is_the_mtriple_s_else_the_host_s():
    assert target_arch({"kind": "llvm"}) == host_arch()
    assert target_arch(ARM) == "aarch64"
    assert target_arch({"kind": "llvm", "mtriple": "arm64-apple-macos"}) == "aarch64"
    assert target_arch({"kind": "llvm", "mtriple": "x86_64-pc-linux-gnu"}) == "x86_64"


def test_a_unit_of_this_architecture_is_linked_by_the_host_compiler():
    soc = load_profile("soc")
    here = {"kind": "llvm", "mtriple": f"{host_arch()}-linux-gnu"}
    # even with a key: a board's profile builds on the board itself with its own compiler
    assert compiler_for(unit(here, cross="no-such-g++"), here, soc, "no-such-g++") is None


def test_another_architecture_needs_a_cross_compiler_that_exists():
    soc = load_profile("soc")
    other = {"kind": "llvm", "mtriple": f"{OTHER}-linux-gnu"}
    with pytest.raises(BuildError, match=rf"unit 'u': its target's mtriple '{OTHER}-linux-gnu'"
                                         rf".*cross_compiler = \"{OTHER}-linux-gnu-g\+\+\""):
        compiler_for(unit(other), other, soc)
    with pytest.raises(BuildError, match="cross compiler 'no-such-g\\+\\+' not found on PATH"):
        compiler_for(unit(other), other, soc, "no-such-g++")
    # the unit's key wins over the option (which is only a default)
    with pytest.raises(BuildError, match="'its-own-g\\+\\+' not found"):
        compiler_for(unit(other, cross="its-own-g++"), other, soc, "no-such-g++")


def test_one_stage_library_serves_units_of_one_architecture():
    soc = load_profile("soc")
    assert llvm_for([unit({"kind": "llvm"})], soc) == ({"kind": "llvm"}, None)
    with pytest.raises(BuildError, match="stage 3: its ops run on units of 2 architectures"):
        llvm_for([unit({"kind": "llvm"}), unit({"kind": "llvm", "mtriple": f"{OTHER}-x"})],
                 soc, where="stage 3")


def test_the_profile_key_is_read_written_and_not_hashed():
    soc = load_profile("soc")
    cpu1 = dataclasses.replace(soc.unit("cpu1"), cross_compiler="aarch64-linux-gnu-g++")
    keyed = dataclasses.replace(soc, units=(cpu1, *soc.units[1:]))
    assert keyed.hash == soc.hash
    back = profile_from_toml(to_toml(keyed), "keyed.toml")
    assert back.unit("cpu1").cross_compiler == "aarch64-linux-gnu-g++"
    assert back.unit("cpu2").cross_compiler == ""
    text = to_toml(soc).replace('[units.cpu2]\n', '[units.cpu2]\ncross_compiler = ""\n')
    assert 'cross_compiler = ""' in text
    with pytest.raises(ValueError, match='x.toml: units.cpu2.cross_compiler: must name a C'):
        profile_from_toml(text, "x.toml")
