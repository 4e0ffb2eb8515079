"""Tests for reading, validating and expanding hardware profiles (autoplace.hardware.load)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoplace.graph import OP_KINDS, Op, OpGraph
from autoplace.hardware.load import bundled_profiles, load_profile, profile_from_toml
from autoplace.hardware.profile import ProfileError
from autoplace.space import check_graph

MIB = 1 << 20

# A small valid profile; each error case below edits one spot of it.
BASE = """\
name = "t"
host = "cpu"
default_scope = "dram"

[units.cpu]
target = { kind = "llvm" }
accepts = ["*"]
gflops = { default = 1.0 }

[units.acc]
target = { kind = "llvm" }
accepts = ["conv2d"]
gflops = { conv2d = 100.0 }

[scopes.dram]
capacity_mib = 64
bandwidth_gbps = 10.0
access = ["*"]

[scopes.sram]
capacity_mib = 1
bandwidth_gbps = 50.0
access = ["acc"]

[[copies]]
src = "dram"
dst = "sram"
bandwidth_gbps = 5.0
"""

# A small valid mesh profile (2 x 3 PEs).
MESH = """\
host = "cpu"
default_scope = "dram"

[units.cpu]
target = { kind = "llvm" }
accepts = ["*"]
gflops = { default = 1.0 }

[scopes.dram]
capacity_mib = 64
bandwidth_gbps = 10.0
access = ["*"]

[mesh]
rows = 2
cols = 3

[mesh.units.arm]
target = { kind = "llvm" }
accepts = ["*"]
gflops = { default = 1.0 }

[mesh.scopes.mem]
capacity_mib = 1
bandwidth_gbps = 8.0
access = ["arm"]

[mesh.link]
bandwidth_gbps = 2.0

[mesh.uplink]
to = "dram"
bandwidth_gbps = 1.0
"""

def _edit(base: str, *pairs: str) -> str:
    """``base`` with each (old, new) pair replaced once; ``old`` must occur in it."""
    for old, new in zip(pairs[::2], pairs[1::2], strict=True):
        assert old in base, old
        base = base.replace(old, new, 1)
    return base


UNITS_BLOCK = BASE[BASE.index("[units.cpu]"):BASE.index("[scopes.dram]")]
CPU_TARGET = 'target = { kind = "llvm" }\naccepts = ["*"]'
DUP_COPY = '\n[[copies]]\nsrc = "dram"\ndst = "sram"\nbandwidth_gbps = 1.0\n'
REV_COPY = '\n[[copies]]\nsrc = "sram"\ndst = "dram"\nbandwidth_gbps = 1.0\n'
MESH_SCOPE = '[mesh.scopes.mem]\ncapacity_mib = 1\nbandwidth_gbps = 8.0\naccess = ["arm"]\n'
ARM_TAIL = 'gflops = { default = 1.0 }\n\n[mesh.scopes'
TOP_UNIT = ('[units."pe0.arm"]\ntarget = { kind = "llvm" }\naccepts = ["*"]\n'
            'gflops = { default = 1.0 }\n')

# (id, the bad file's text, key named in the message, what the message says)
ERRORS = [
    ("codegen-without-patterns", _edit(BASE, 'accepts = ["conv2d"]',
                                       'accepts = ["conv2d"]\ncodegen = "autoplace_ref"'),
     "units.acc.codegen", "needs a pattern table"),
    ("codegen-not-a-name", _edit(BASE, 'accepts = ["conv2d"]',
                                 'patterns = ["conv2d"]\ncodegen = "relax.ext.x"'),
     "units.acc.codegen", "must be a code generator's name"),
    ("patterns-unknown", _edit(BASE, 'accepts = ["conv2d"]', 'patterns = ["conv2d_relu6"]'),
     "units.acc.patterns", "unknown pattern 'conv2d_relu6'"),
    ("patterns-and-accepts", _edit(BASE, 'accepts = ["conv2d"]',
                                   'accepts = ["conv2d"]\npatterns = ["conv2d"]'),
     "units.acc.accepts", "give patterns or accepts, not both"),
    ("patterns-empty", _edit(BASE, 'accepts = ["conv2d"]', "patterns = []"),
     "units.acc.patterns", "must not be empty"),
    ("patterns-gflops-not-in-table", _edit(BASE, 'accepts = ["conv2d"]',
                                           'patterns = ["conv2d_bias_relu"]',
                                           "conv2d = 100.0", "attention = 4.0"),
     "units.acc.gflops.attention", "'attention' is not in the unit's patterns"),
    ("patterns-gflops-missing", _edit(BASE, 'accepts = ["conv2d"]',
                                      'patterns = ["conv2d_bias_relu", "matmul_bias"]',
                                      "conv2d = 100.0", "conv2d_bias_relu = 100.0"),
     "units.acc.gflops.default", "pattern 'matmul_bias' has no entry"),
    ("weights-unknown", _edit(BASE, 'accepts = ["conv2d"]',
                              'accepts = ["conv2d"]\nweights = ["cached"]'),
     "units.acc.weights[0]", "must be one of 'streamed', 'resident', got a string 'cached'"),
    ("weights-empty", _edit(BASE, 'accepts = ["conv2d"]', 'accepts = ["conv2d"]\nweights = []'),
     "units.acc.weights", "must not be empty"),
    ("syntax", _edit(BASE, 'host = "cpu"', 'host = "cpu'), "line 2", "TOML syntax error"),
    ("unknown-top", _edit(BASE, 'name = "t"', 'name = "t"\ncolour = 1'), "colour", "unknown key"),
    ("unknown-unit", _edit(BASE, 'accepts = ["*"]', 'accepts = ["*"]\nspeed = 1'),
     "units.cpu.speed", "unknown key"),
    ("unknown-scope", _edit(BASE, "capacity_mib = 64", "capacity_mib = 64\nsize = 1"),
     "scopes.dram.size", "unknown key"),
    ("unknown-copy", _edit(BASE, "bandwidth_gbps = 5.0", "bandwidth_gbps = 5.0\nspeed = 1"),
     "copies[0].speed", "unknown key"),
    ("missing-host", _edit(BASE, 'host = "cpu"\n', ""), "host", "missing required key"),
    ("missing-default-scope", _edit(BASE, 'default_scope = "dram"\n', ""), "default_scope",
     "missing required key"),
    ("missing-units", _edit(BASE, UNITS_BLOCK, ""), "units", "missing required key"),
    ("missing-scopes", _edit(BASE, BASE[BASE.index("[scopes.dram]"):BASE.index("[[copies]]")], ""),
     "scopes", "missing required key"),
    ("missing-target", _edit(BASE, 'target = { kind = "llvm" }\naccepts = ["conv2d"]',
                             'accepts = ["conv2d"]'), "units.acc.target", "missing required key"),
    ("missing-accepts", _edit(BASE, 'accepts = ["conv2d"]\n', ""), "units.acc.accepts",
     "missing required key"),
    ("missing-gflops", _edit(BASE, "gflops = { conv2d = 100.0 }\n", ""), "units.acc.gflops",
     "missing required key"),
    ("missing-capacity", _edit(BASE, "capacity_mib = 1\n", ""), "scopes.sram.capacity_mib",
     "missing required key"),
    ("missing-scope-bandwidth", _edit(BASE, "bandwidth_gbps = 50.0\n", ""),
     "scopes.sram.bandwidth_gbps", "missing required key"),
    ("missing-access", _edit(BASE, 'access = ["acc"]\n', ""), "scopes.sram.access",
     "missing required key"),
    ("missing-copy-src", _edit(BASE, 'src = "dram"\n', ""), "copies[0].src",
     "missing required key"),
    ("missing-copy-dst", _edit(BASE, 'dst = "sram"\n', ""), "copies[0].dst",
     "missing required key"),
    ("missing-copy-bandwidth", _edit(BASE, "bandwidth_gbps = 5.0\n", ""),
     "copies[0].bandwidth_gbps", "missing required key"),
    ("type-gflops", _edit(BASE, "{ default = 1.0 }", '{ default = "fast" }'),
     "units.cpu.gflops.default", "must be a number"),
    ("type-gflops-table", _edit(BASE, "{ default = 1.0 }", "1.0"), "units.cpu.gflops",
     "must be a table"),
    ("type-accepts", _edit(BASE, 'accepts = ["conv2d"]', 'accepts = "conv2d"'),
     "units.acc.accepts", "must be an array"),
    ("type-accepts-item", _edit(BASE, 'accepts = ["conv2d"]', 'accepts = ["conv2d", 3]'),
     "units.acc.accepts[1]", "must be one of '*', 'conv2d'"),
    ("type-capacity-bool", _edit(BASE, "capacity_mib = 64", "capacity_mib = true"),
     "scopes.dram.capacity_mib", "must be a number"),
    ("type-host", _edit(BASE, 'host = "cpu"', "host = 3"), "host", "must be a string"),
    ("type-rpc-key", _edit(BASE, 'accepts = ["*"]', 'accepts = ["*"]\nrpc_key = 7'),
     "units.cpu.rpc_key", "must be a string"),
    ("type-units", _edit(BASE, UNITS_BLOCK, "units = 1\n\n"), "units", "must be a table"),
    ("type-unit-entry", _edit(BASE, "[scopes.dram]", "[units]\ngpu = 1\n\n[scopes.dram]"),
     "units.gpu", "must be a table"),
    ("type-copies", _edit(BASE, "[[copies]]", "[copies]"), "copies", "must be an array"),
    ("type-copy-entry", _edit(BASE, 'name = "t"', 'name = "t"\ncopies = [1]', "[[copies]]",
                              "[x]"), "copies[0]", "must be a table"),
    ("type-bidirectional", _edit(BASE, "bandwidth_gbps = 5.0",
                                 'bandwidth_gbps = 5.0\nbidirectional = "y"'),
     "copies[0].bidirectional", "must be a boolean"),
    ("type-dma", _edit(BASE, "bandwidth_gbps = 5.0", "bandwidth_gbps = 5.0\ndma = 0"),
     "copies[0].dma", "must be a string"),
    ("undefined-access-unit", _edit(BASE, 'access = ["acc"]', 'access = ["acc", "gpu"]'),
     "scopes.sram.access", "unit 'gpu' is not defined"),
    ("undefined-host", _edit(BASE, 'host = "cpu"', 'host = "gpu"'), "host",
     "unit 'gpu' is not defined"),
    ("undefined-default-scope", _edit(BASE, 'default_scope = "dram"', 'default_scope = "l2"'),
     "default_scope", "scope 'l2' is not defined"),
    ("undefined-copy-src", _edit(BASE, 'src = "dram"', 'src = "l2"'), "copies[0].src",
     "scope 'l2' is not defined"),
    ("undefined-copy-dst", _edit(BASE, 'dst = "sram"', 'dst = "l2"'), "copies[0].dst",
     "scope 'l2' is not defined"),
    ("zero-copy-bandwidth", _edit(BASE, "bandwidth_gbps = 5.0", "bandwidth_gbps = 0"),
     "copies[0].bandwidth_gbps", "must be > 0"),
    ("negative-scope-bandwidth", _edit(BASE, "bandwidth_gbps = 50.0", "bandwidth_gbps = -1.0"),
     "scopes.sram.bandwidth_gbps", "must be > 0"),
    ("zero-capacity", _edit(BASE, "capacity_mib = 1", "capacity_mib = 0"),
     "scopes.sram.capacity_mib", "must be > 0"),
    ("zero-gflops", _edit(BASE, "{ conv2d = 100.0 }", "{ conv2d = 0.0 }"),
     "units.acc.gflops.conv2d", "must be > 0"),
    ("bad-kernel-key", _edit(BASE, "{ default = 1.0 }",
                             '{ default = 1.0 }\nkernel_us = { "conv:1e6:100" = 3.0 }'),
     "units.cpu.kernel_us.conv:1e6:100", "expected a kernel key 'kind:flops:bytes'"),
    ("kernel-key-not-numbers", _edit(BASE, "{ default = 1.0 }",
                                     '{ default = 1.0 }\nkernel_us = { "pool:x:100" = 3.0 }'),
     "units.cpu.kernel_us.pool:x:100", "got 'pool:x:100'"),
    ("zero-kernel-time", _edit(BASE, "{ default = 1.0 }",
                               '{ default = 1.0 }\nkernel_us = { "pool:1e6:100" = 0 }'),
     "units.cpu.kernel_us.pool:1e6:100", "must be > 0"),
    ("negative-gflops", _edit(BASE, "{ default = 1.0 }", "{ default = -5 }"),
     "units.cpu.gflops.default", "must be > 0"),
    ("negative-latency", _edit(BASE, "bandwidth_gbps = 5.0",
                               "bandwidth_gbps = 5.0\nlatency_us = -1"),
     "copies[0].latency_us", "must be >= 0"),
    ("negative-overhead", _edit(BASE, 'accepts = ["*"]',
                                'accepts = ["*"]\nlaunch_overhead_us = -2'),
     "units.cpu.launch_overhead_us", "must be >= 0"),
    ("misspelt-key", _edit(BASE, "capacity_mib = 1", "capacity_mb = 1"),
     "scopes.sram.capacity_mb", "unknown key (misspelt 'capacity_mib'?)"),
    ("negative-handover", _edit(BASE, 'accepts = ["*"]', 'accepts = ["*"]\nhandover_us = -1'),
     "units.cpu.handover_us", "must be >= 0"),
    ("nan-handover", _edit(BASE, 'accepts = ["*"]', 'accepts = ["*"]\nhandover_us = nan'),
     "units.cpu.handover_us", "must be a finite number"),
    ("stream-unit-beside-blocks", _edit(BASE, 'accepts = ["conv2d"]',
                                        'accepts = ["conv2d"]\nexecution = "block"'),
     "units.cpu.execution", "must be 'parallel' or 'block'"),
    ("handover-in-block-model", _edit(BASE, 'accepts = ["conv2d"]',
                                      'accepts = ["conv2d"]\nexecution = "block"\n'
                                      'handover_us = 5', 'accepts = ["*"]',
                                      'accepts = ["*"]\nexecution = "parallel"'),
     "units.acc.handover_us", "the block model has no hand-over"),
    ("negative-power", _edit(BASE, 'accepts = ["*"]', 'accepts = ["*"]\npower_w = -0.5'),
     "units.cpu.power_w", "must be >= 0"),
    ("unknown-kind-accepts", _edit(BASE, 'accepts = ["conv2d"]', 'accepts = ["conv3d"]'),
     "units.acc.accepts[0]", "must be one of '*', 'conv2d'"),
    ("default-in-accepts", _edit(BASE, 'accepts = ["conv2d"]', 'accepts = ["default"]'),
     "units.acc.accepts[0]", "got a string 'default'"),
    ("unknown-kind-gflops", _edit(BASE, "{ conv2d = 100.0 }", "{ conv2d = 100.0, conv3d = 1.0 }"),
     "units.acc.gflops.conv3d", "unknown op kind 'conv3d'"),
    ("unknown-mode", _edit(BASE, "bandwidth_gbps = 5.0", 'bandwidth_gbps = 5.0\nmodes = ["rdma"]'),
     "copies[0].modes[0]", "must be one of 'sync', 'async', got a string 'rdma'"),
    ("empty-modes", _edit(BASE, "bandwidth_gbps = 5.0", "bandwidth_gbps = 5.0\nmodes = []"),
     "copies[0].modes", "must not be empty"),
    ("empty-accepts", _edit(BASE, 'accepts = ["conv2d"]', "accepts = []"), "units.acc.accepts",
     "must not be empty"),
    ("unit-reaches-nothing", _edit(BASE, 'access = ["*"]', 'access = ["cpu"]', 'access = ["acc"]',
                                   'access = ["cpu"]'), "units.acc",
     "unit 'acc' can access no scope"),
    ("unit-misses-default", _edit(BASE, 'access = ["*"]', 'access = ["cpu"]'), "units.acc",
     "unit 'acc' cannot access default_scope 'dram'"),
    ("gflops-no-default-star", _edit(BASE, "{ default = 1.0 }", "{ conv2d = 1.0 }"),
     "units.cpu.gflops.default", "required when accepts is '*'"),
    ("gflops-no-default-kind", _edit(BASE, 'accepts = ["conv2d"]', 'accepts = ["conv2d", "pool"]'),
     "units.acc.gflops.default", "accepts 'pool' has no entry"),
    ("target-string", _edit(BASE, CPU_TARGET, 'target = "llvm"\naccepts = ["*"]'),
     "units.cpu.target", "must be a table, got a string 'llvm'"),
    ("target-no-kind", _edit(BASE, CPU_TARGET, 'target = { mcpu = "a53" }\naccepts = ["*"]'),
     "units.cpu.target", "must be a table with a string 'kind'"),
    ("target-kind-int", _edit(BASE, CPU_TARGET, 'target = { kind = 3 }\naccepts = ["*"]'),
     "units.cpu.target", "must be a table with a string 'kind'"),
    ("duplicate-copy", _edit(BASE, "bandwidth_gbps = 5.0\n", "bandwidth_gbps = 5.0\n" + DUP_COPY),
     "copies[1]", "duplicate copy path dram->sram (also copies[0])"),
    ("duplicate-reverse-copy", _edit(BASE, "bandwidth_gbps = 5.0\n",
                                     "bandwidth_gbps = 5.0\nbidirectional = true\n" + REV_COPY),
     "copies[1]", "duplicate copy path sram->dram (also copies[0])"),
    ("copy-to-itself", _edit(BASE, 'dst = "sram"', 'dst = "dram"'), "copies[0].dst", "to itself"),
    ("cores-not-parallel", _edit(BASE, 'accepts = ["conv2d"]', 'accepts = ["conv2d"]\ncores = 2'),
     "units.acc.cores", "only a unit with execution"),
    ("cores-fraction", _edit(BASE, 'accepts = ["conv2d"]',
                             'accepts = ["conv2d"]\nexecution = "parallel"\ncores = 1.5'),
     "units.acc.cores", "must be an integer >= 0, got a float 1.5"),
    ("cpus-negative", _edit(BASE, 'accepts = ["conv2d"]', 'accepts = ["conv2d"]\ncpus = [-1]'),
     "units.acc.cpus[0]", "must be an integer >= 0, got -1"),
    ("cpus-string", _edit(BASE, 'accepts = ["conv2d"]', 'accepts = ["conv2d"]\ncpus = ["0"]'),
     "units.acc.cpus[0]", "must be an integer >= 0, got a string '0'"),
    ("cpus-repeated", _edit(BASE, 'accepts = ["conv2d"]', 'accepts = ["conv2d"]\ncpus = [1, 1]'),
     "units.acc.cpus", "must not repeat a CPU"),
    ("cpus-not-cores", _edit(BASE, CPU_TARGET, 'target = { kind = "llvm", num-cores = 2 }\n'
                             'accepts = ["*"]\ncpus = [0]'),
     "units.cpu.cpus", "names 1 CPUs, but the target has num-cores = 2"),
    ("mesh-rows-zero", _edit(MESH, "rows = 2", "rows = 0"), "mesh.rows", "integer >= 1"),
    ("mesh-rows-negative", _edit(MESH, "rows = 2", "rows = -3"), "mesh.rows", "integer >= 1"),
    ("mesh-cols-string", _edit(MESH, "cols = 3", 'cols = "3"'), "mesh.cols", "integer >= 1"),
    ("mesh-cols-float", _edit(MESH, "cols = 3", "cols = 3.0"), "mesh.cols", "integer >= 1"),
    ("mesh-rows-bool", _edit(MESH, "rows = 2", "rows = true"), "mesh.rows", "integer >= 1"),
    ("mesh-rows-missing", _edit(MESH, "rows = 2\n", ""), "mesh.rows", "missing required key"),
    ("mesh-type", _edit(MESH.replace("[mesh", "[m"), 'host = "cpu"', 'mesh = 4\nhost = "cpu"'),
     "mesh",
     "must be a table"),
    ("mesh-unknown-key", _edit(MESH, "cols = 3", "cols = 3\nlayers = 2"), "mesh.layers",
     "unknown key"),
    ("mesh-units-missing", _edit(MESH, "[mesh.units.arm]", "[x.arm]", 'access = ["arm"]',
                                 'access = ["*"]'), "mesh.units", "missing required key"),
    ("mesh-unit-unknown-key", _edit(MESH, "[mesh.scopes.mem]", "speed = 1\n[mesh.scopes.mem]"),
     "mesh.units.arm.speed", "unknown key"),
    ("mesh-unit-missing-target", _edit(MESH, 'target = { kind = "llvm" }\naccepts = ["*"]\n'
                                       + ARM_TAIL, 'accepts = ["*"]\n' + ARM_TAIL),
     "mesh.units.arm.target", "missing required key"),
    ("mesh-unit-bad-gflops", _edit(MESH, ARM_TAIL, "gflops = { default = 0 }\n\n[mesh.scopes"),
     "mesh.units.arm.gflops.default", "must be > 0"),
    ("mesh-scope-access", _edit(MESH, 'access = ["arm"]', 'access = ["arm", "npu"]'),
     "mesh.scopes.mem.access", "mesh unit 'npu' is not defined"),
    ("mesh-scope-capacity", _edit(MESH, "capacity_mib = 1", "capacity_mib = -1"),
     "mesh.scopes.mem.capacity_mib", "must be > 0"),
    ("mesh-link-scope", _edit(MESH, "bandwidth_gbps = 2.0", 'bandwidth_gbps = 2.0\nscope = "l1"'),
     "mesh.link.scope", "mesh scope 'l1' is not defined"),
    ("mesh-link-mode", _edit(MESH, "bandwidth_gbps = 2.0", 'bandwidth_gbps = 2.0\nmodes = ["x"]'),
     "mesh.link.modes[0]", "must be one of 'sync', 'async', got a string 'x'"),
    ("mesh-link-bandwidth", _edit(MESH, "bandwidth_gbps = 2.0", "bandwidth_gbps = 0.0"),
     "mesh.link.bandwidth_gbps", "must be > 0"),
    ("mesh-link-unknown-key", _edit(MESH, "bandwidth_gbps = 2.0", "bandwidth_gbps = 2.0\nhops = 1"),
     "mesh.link.hops", "unknown key"),
    ("mesh-link-no-scopes", _edit(MESH, MESH_SCOPE, ""), "mesh.link",
     "needs at least one [mesh.scopes.*]"),
    ("mesh-uplink-to", _edit(MESH, 'to = "dram"', 'to = "hbm"'), "mesh.uplink.to",
     "'hbm' is not a defined top-level scope"),
    ("mesh-uplink-missing-to", _edit(MESH, 'to = "dram"\n', ""), "mesh.uplink.to",
     "missing required key"),
    ("mesh-uplink-latency", _edit(MESH, "bandwidth_gbps = 1.0",
                                  "bandwidth_gbps = 1.0\nlatency_us = -1"),
     "mesh.uplink.latency_us", "must be >= 0"),
    ("mesh-unit-clash", _edit(MESH, "[scopes.dram]", TOP_UNIT + "[scopes.dram]"),
     "mesh.units.arm", "generated unit 'pe0.arm' clashes with units.pe0.arm"),
    ("mesh-unit-misses-default", _edit(MESH, 'access = ["*"]', 'access = ["cpu"]'),
     "mesh.units.arm", "unit 'pe0.arm' cannot access default_scope 'dram'"),
    ("mesh-unit-reaches-nothing", _edit(MESH, 'access = ["*"]', 'access = ["cpu"]',
                                        MESH_SCOPE, "", MESH[MESH.index("[mesh.link]"):], ""),
     "mesh.units.arm", "unit 'pe0.arm' can access no scope"),
    ("mesh-duplicate-copy", _edit(MESH, "[mesh]", '[[copies]]\nsrc = "pe0.mem"\ndst = "dram"\n'
                                  "bandwidth_gbps = 1.0\n[mesh]"),
     "copies[0]", "duplicate copy path pe0.mem->dram (also mesh.uplink)"),
]


def _write(tmp_path: Path, text: str, name: str = "bad.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("base", [BASE, MESH], ids=["base", "mesh"])
def test_error_table_bases_are_valid(tmp_path: Path, base: str) -> None:
    load_profile(_write(tmp_path, base))


@pytest.mark.parametrize(("text", "key", "what"), [e[1:] for e in ERRORS],
                         ids=[e[0] for e in ERRORS])
def test_validation_error_names_file_and_key(tmp_path: Path, text: str, key: str,
                                              what: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    assert key in message and what in message, message


def test_the_documented_error_lines_are_the_loaders() -> None:
    """docs/profile.md's two examples, word for word: msgspec's errors reworded, the key an
    entry of a table (not msgspec's ``[...]``), a near key named for an unknown one."""
    npu = _edit(BASE, "{ conv2d = 100.0 }", '{ conv2d = "fast" }', "[units.acc]", "[units.npu]",
                'access = ["acc"]', 'access = ["npu"]')
    misspelt = _edit(BASE, "capacity_mib = 1", "capacity_mb = 1")
    doc = (Path(__file__).resolve().parents[2] / "docs" / "profile.md").read_text()
    for text in (npu, misspelt):
        with pytest.raises(ProfileError) as info:
            profile_from_toml(text, "hw.toml")
        assert f"`{info.value}`" in doc


def test_unknown_profile_name() -> None:
    with pytest.raises(ProfileError, match="no-such-chip: no such profile.*bundled: .*soc"):
        load_profile("no-such-chip")


# -- bundled profiles -----------------------------------------------------------------------------
def test_bundled_profiles_listed() -> None:
    assert {"host", "soc", "biglittle", "mesh"} <= set(bundled_profiles())


@pytest.mark.parametrize("name", sorted(bundled_profiles()))
def test_bundled_profile_accepts_every_op_kind(name: str) -> None:
    profile = load_profile(name)
    ops = tuple(Op(name=f"op_{k}", kind=k, flops=1.0, bytes_read=4, output_bytes=4)
                for k in OP_KINDS)
    check_graph(profile, OpGraph(name="all_kinds", ops=ops, edges=()))
    assert profile.source == str(bundled_profiles()[name])
    assert all(profile.home_scope(u.name) == profile.default_scope for u in profile.units)


def test_host_profile() -> None:
    p = load_profile("host")
    assert [u.name for u in p.units] == ["cpu", "core0", "core1"]
    assert [s.name for s in p.scopes] == ["dram"]
    assert dict(p.unit("cpu").target) == {"kind": "llvm", "mcpu": "x86-64-v4", "num-cores": 2}
    assert dict(p.unit("core0").target) == {"kind": "llvm", "mcpu": "x86-64-v4", "num-cores": 1}
    assert [p.unit(u).cpus for u in ("cpu", "core0", "core1")] == [(0, 1), (0,), (1,)]
    assert p.copies == () and p.host == "cpu"


def test_soc_profile() -> None:
    p = load_profile("soc")
    assert [u.name for u in p.units] == ["cpu1", "cpu2", "accelerator1", "accelerator2"]
    assert [s.name for s in p.scopes] == ["dram", "sram1", "sram2"]
    assert (p.host, p.default_scope) == ("cpu1", "dram")
    assert p.scope("dram").bandwidth_bps == pytest.approx(12.8e9)
    assert p.scope("sram1").capacity_bytes == 4 * MIB == 4194304
    assert p.scope("sram1").access == {"accelerator1", "cpu1"}
    for acc in ("accelerator1", "accelerator2"):
        unit, cpu = p.unit(acc), p.unit("cpu1")
        assert not unit.accepts_kind("softmax") and not unit.accepts_kind("other")
        assert unit.flops_per_s("conv2d") > 10 * cpu.flops_per_s("conv2d")
        assert unit.launch_overhead_s > cpu.launch_overhead_s
    assert p.unit("cpu1").launch_overhead_s == pytest.approx(2e-6)
    paths = {(c.src, c.dst): c for c in p.copies}
    assert len(p.copies) == 6
    assert paths["dram", "sram1"].engine == paths["sram1", "dram"].engine == "dma0"
    assert paths["sram2", "dram"].engine == "dma1"
    assert paths["dram", "sram1"].modes == ("sync", "async")
    assert paths["sram1", "sram2"].modes == paths["sram2", "sram1"].modes == ("sync",)
    assert paths["sram2", "sram1"].engine == "dma:sram1->sram2"
    assert paths["dram", "sram1"].latency_s == pytest.approx(2e-6)


def test_biglittle_profile() -> None:
    p = load_profile("biglittle")
    big, little = p.unit("big"), p.unit("little")
    assert 3 <= big.flops_per_s("conv2d") / little.flops_per_s("conv2d") <= 4
    assert big.power_w > little.power_w and p.host == "big"
    assert {s.name for s in p.scopes} == {"dram", "l2_big", "l2_little"}
    assert p.scope("l2_little").capacity_bytes == MIB // 2
    assert len(p.copies) == 6


def _neighbour_paths(rows: int, cols: int) -> int:
    return 2 * (rows * (cols - 1) + (rows - 1) * cols)


def test_mesh_profile() -> None:
    p = load_profile("mesh")
    assert len(p.units) == 1 + 16 * 2 and len(p.scopes) == 1 + 16
    assert p.unit("pe5.arm").accepts_kind("softmax") and not p.unit("pe5.npu").accepts_kind("norm")
    assert p.scope("pe5.mem").access == {"pe5.arm", "pe5.npu"}
    assert p.scope("pe5.mem").capacity_bytes == 2 * MIB
    links = [c for c in p.copies if c.dst != "dram" and c.src != "dram"]
    assert len(links) == 48 == _neighbour_paths(4, 4)
    assert {c.dst for c in links if c.src == "pe5.mem"} == {f"pe{k}.mem" for k in (1, 4, 6, 9)}
    assert {c.engine for c in links if c.src == "pe5.mem"} == {"pe5.dma"}
    uplinks = [c for c in p.copies if "dram" in (c.src, c.dst)]
    assert len(uplinks) == 32
    assert {c.engine for c in uplinks if "pe7.mem" in (c.src, c.dst)} == {"pe7.dma"}
    assert set(p.scopes_of("pe3.npu")) == {"dram", "pe3.mem"}


@pytest.mark.parametrize(("rows", "cols"), [(1, 1), (1, 5), (3, 5), (8, 2)])
def test_mesh_size_follows_rows_and_cols(tmp_path: Path, rows: int, cols: int) -> None:
    text = bundled_profiles()["mesh"].read_text()
    text = text.replace("rows = 4", f"rows = {rows}", 1).replace("cols = 4", f"cols = {cols}", 1)
    p = load_profile(_write(tmp_path, text, "mesh_copy.toml"))
    n = rows * cols
    assert len(p.units) == 1 + 2 * n and len(p.scopes) == 1 + n
    assert f"pe{n - 1}.npu" in {u.name for u in p.units}
    assert len(p.copies) == _neighbour_paths(rows, cols) + 2 * n


def test_mesh_template_extras(tmp_path: Path) -> None:
    text = MESH.replace('access = ["arm"]', 'access = ["*"]').replace(
        'gflops = { default = 1.0 }\n\n[mesh.scopes', 'gflops = { default = 1.0 }\n'
        'rpc_key = "board-{pe}"\n\n[mesh.scopes')
    p = load_profile(_write(tmp_path, text))
    assert p.scope("pe4.mem").access == {"pe4.arm"}
    assert p.unit("pe4.arm").rpc_key == "board-4" and p.unit("cpu").rpc_key is None


# -- hashing --------------------------------------------------------------------------------------
def test_hash_stable_across_loads() -> None:
    for name in bundled_profiles():
        assert load_profile(name).hash == load_profile(name).hash
        assert load_profile(name) == load_profile(bundled_profiles()[name])


def test_hash_changes_with_numbers_not_formatting(tmp_path: Path) -> None:
    text = bundled_profiles()["soc"].read_text()
    original = load_profile("soc").hash
    assert load_profile(_write(tmp_path, "# a comment\n" + text, "a.toml")).hash == original
    changed = text.replace("bandwidth_gbps = 12.8", "bandwidth_gbps = 12.9", 1)
    assert changed != text
    assert load_profile(_write(tmp_path, changed, "b.toml")).hash != original


# -- check_graph ----------------------------------------------------------------------------------
def test_check_graph_names_the_op(tmp_path: Path) -> None:
    text = BASE.replace('accepts = ["*"]', 'accepts = ["conv2d", "pool"]')
    path = _write(tmp_path, text, "narrow.toml")
    profile = load_profile(path)
    ops = (Op(name="pool0", kind="pool", flops=1.0, bytes_read=4, output_bytes=4),
           Op(name="fused_softmax", kind="softmax", flops=1.0, bytes_read=4, output_bytes=4))
    graph = OpGraph(name="squeezenet", ops=ops, edges=())
    with pytest.raises(ProfileError) as info:
        check_graph(profile, graph)
    assert str(info.value) == (f"{path}: no unit accepts op 'fused_softmax' of kind 'softmax' "
                               "(graph squeezenet)")
    check_graph(profile, OpGraph(name="ok", ops=ops[:1], edges=()))
