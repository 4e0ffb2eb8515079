"""A profile written as TOML reads back equal: every bundled profile, a mesh with what only
its ``[mesh]`` table says, unit keys beyond the usual; a mesh whose PEs differ is refused."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from autoplace.hardware.load import bundled_profiles, load_profile, profile_from_toml
from autoplace.hardware.write import to_toml


def round_trip(profile, tmp_path: Path, header: str = ""):
    path = tmp_path / "p.toml"
    path.write_text(to_toml(profile, header))
    return load_profile(path), path.read_text()


@pytest.mark.parametrize("name", sorted(bundled_profiles()))
def test_every_bundled_profile_round_trips(name, tmp_path):
    profile = load_profile(name)
    back, _ = round_trip(profile, tmp_path)
    assert back.to_dict() == profile.to_dict() and back.hash == profile.hash
    assert back.mesh == profile.mesh


MESH = """
name = "m"
host = "ctrl"
default_scope = "dram"
[units.ctrl]
target = { kind = "llvm" }
accepts = ["*"]
[units.ctrl.gflops]
default = 2.0
[scopes.dram]
capacity_mib = 1024
bandwidth_gbps = 4.0
access = ["*"]
[mesh]
rows = 3
cols = 5
units_overlap = true
[mesh.units.arm]
target = { kind = "llvm" }
accepts = ["*"]
rpc_key = "board-{pe}-arm"
[mesh.units.arm.gflops]
default = 0.5
[mesh.units.cim]
target = { kind = "llvm" }
accepts = ["matmul"]
weights = ["resident"]
class = "analog"
execution = "parallel"
cores = 4
[mesh.units.cim.gflops]
matmul = 30.0
[mesh.scopes.mem]
capacity_mib = 2
bandwidth_gbps = 16.0
access = ["arm", "cim"]
[mesh.scopes.spad]
capacity_mib = 0.25
bandwidth_gbps = 32.0
access = ["arm"]
[mesh.link]
bandwidth_gbps = 4.0
latency_us = 0.5
modes = ["sync", "async"]
scope = "mem"
[mesh.uplink]
to = "dram"
bandwidth_gbps = 2.0
latency_us = 2.0
dma = "edge"
scope = "spad"
total_gbps = 12.8
[[copies]]
src = "pe0.spad"
dst = "pe14.spad"
bandwidth_gbps = 0.5
dma = "bus"
"""


def test_a_mesh_is_written_as_its_templates_with_what_only_its_table_says(tmp_path):
    (tmp_path / "m.toml").write_text(MESH)
    mesh = load_profile(tmp_path / "m.toml")
    assert mesh.unit("pe11.arm").rpc_key == "board-11-arm"
    back, text = round_trip(mesh, tmp_path, "line one\nline two")
    assert back.to_dict() == mesh.to_dict() and back.mesh == mesh.mesh
    assert back.mesh.units_overlap and back.mesh.uplink_total_bps == 12.8e9
    assert text.startswith("# line one\n# line two\n")
    assert "pe7" not in text and 'rpc_key = "board-{pe}-arm"' in text
    assert back.unit("pe3.cim").execution == "parallel" and back.unit("pe3.cim").cores == 4


def test_a_mesh_whose_pes_differ_is_refused(tmp_path):
    (tmp_path / "m.toml").write_text(MESH)
    mesh = load_profile(tmp_path / "m.toml")
    units = tuple(dataclasses.replace(u, power_w=9.0) if u.name == "pe4.arm" else u
                  for u in mesh.units)
    with pytest.raises(ValueError, match="profile 'm': its PEs differ"):
        to_toml(dataclasses.replace(mesh, units=units))


def test_every_number_reads_back_as_itself_in_its_fewest_digits(tmp_path):
    """Numbers the loader scales (us, GB/s) come back bit for bit, with no digits to spare:
    2 us is written ``2``, not ``1.9999999999999998``; a 17-digit one keeps its 17."""
    host = load_profile("host")
    cpu = host.units[0]
    odd = 1.2345678901234567
    units = (dataclasses.replace(cpu, launch_overhead_s=2e-6, power_w=odd,
                                 gflops={**cpu.gflops, "default": odd / 3}),
             *host.units[1:])
    scopes = (dataclasses.replace(host.scopes[0], bandwidth_bps=odd * 1e10),
              *host.scopes[1:])
    profile = dataclasses.replace(host, units=units, scopes=scopes)
    back, text = round_trip(profile, tmp_path)
    assert back.to_dict() == profile.to_dict()
    assert "launch_overhead_us = 2\n" in text and f"power_w = {odd!r}\n" in text


QUOTED = r'''
name = "odd \"name\" \\ with ünïcode"
description = "two lines\nand a tab\t"
host = "cpu 0.a"
default_scope = "dram#1"
[units."cpu 0.a"]
target = { kind = "llvm", mcpu = "x86-64", "num-cores" = 1 }
accepts = ["*"]
rpc_key = "board \"7\""
[units."cpu 0.a".gflops]
default = 2.0
[units."cpu 0.a".kernel_us]
"conv2d:1.2e+08:460800" = 3.5
[scopes."dram#1"]
capacity_mib = 1024
bandwidth_gbps = 4.0
access = ["cpu 0.a"]
'''


def test_names_that_need_quoting_read_back_and_the_writer_is_stable(tmp_path):
    """Names with quotes, spaces, dots, ``#`` and non-ASCII, a string with a newline, and
    kernel keys with ``:`` and ``+``: the TOML library quotes and escapes them; writing what
    was read back gives the same text."""
    (tmp_path / "q.toml").write_text(QUOTED)
    profile = load_profile(tmp_path / "q.toml")
    back, text = round_trip(profile, tmp_path, 'a "quoted" header\n\nafter a blank line')
    assert back.to_dict() == profile.to_dict() and back.hash == profile.hash
    assert back.name == 'odd "name" \\ with ünïcode' and back.unit("cpu 0.a").rpc_key == 'board "7"'
    assert text.startswith('# a "quoted" header\n#\n# after a blank line\n')
    assert to_toml(back, 'a "quoted" header\n\nafter a blank line') == text


@pytest.mark.parametrize("name", sorted(bundled_profiles()))
def test_a_written_profile_reads_like_the_bundled_ones(name):
    """Plain keys are bare, a unit's target an inline table, every number a TOML number."""
    text = to_toml(load_profile(name))
    assert '."' not in text and "\ntarget = {" in text
    assert load_profile(name).hash == profile_from_toml(to_toml(
        profile_from_toml(text, "again.toml")), "again.toml").hash
