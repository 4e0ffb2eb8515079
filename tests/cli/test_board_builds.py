"""Builds for a board from the command line: a unit of another architecture is linked by a
cross compiler (Debian's aarch64 toolchain here), refused in one line without one; what is
built for another machine is refused by ``run`` in one line; a unit whose device this TVM
lacks is refused by ``compile``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from factories import CROSS, NM, TRIPLE, board_toml, cli, need_cross, one_line_error

from autoplace.deploy.elf import AARCH64, elf_machine, host_machine
from autoplace.hardware.load import load_profile

HWPROFILES = Path(__file__).resolve().parents[2] / "hwprofiles"



@pytest.fixture(scope="module")
def cross() -> str:
    return need_cross()


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """The board profile, and seed_te tuned on it (simulated: nothing built)."""
    tmp = tmp_path_factory.mktemp("board")
    hw, log = tmp / "board.toml", tmp / "tune.jsonl"
    hw.write_text(board_toml())
    tuned = cli("tune", "seed_te", "--hw", hw, "--trials", 4, "--log", log, "--no-progress")
    assert tuned.returncode == 0, tuned.stderr
    return tmp, hw, log


def exported(path: Path) -> set[str]:
    out = subprocess.run([NM, "-D", "--defined-only", str(path)], capture_output=True,
                         text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def test_without_a_cross_compiler_compile_names_the_unit_and_what_to_set(board):
    tmp, hw, log = board
    proc = cli("compile", "seed_te", "--hw", hw, "--log", log, "-o", tmp / "none",
               "--cache-dir", tmp / "kernels")
    one_line_error(proc, "unit '", f"mtriple '{TRIPLE}'", f'cross_compiler = "{CROSS}"',
                   str(hw), "--cross-compiler", f"{log}: the best record (trial ")
    missing = cli("compile", "seed_te", "--hw", hw, "--log", log, "-o", tmp / "none",
                  "--cache-dir", tmp / "kernels", "--cross-compiler", "no-such-g++")
    one_line_error(missing, "cross compiler 'no-such-g++' not found on PATH")


def test_a_cross_build_is_an_aarch64_library_exporting_the_kernels(board, cross):
    tmp, hw, log = board
    out = tmp / "cross"
    built = cli("compile", "seed_te", "--hw", hw, "--log", log, "-o", out, "--cache-dir",
                tmp / "kernels", "--cross-compiler", cross)
    assert built.returncode == 0, built.stderr
    assert "kernels for aarch64 ->" in built.stdout
    m = json.loads((out / "manifest.json").read_text())
    funcs = {u: set() for u in m["libraries"]}
    for op, kernel in zip(m["placement"]["ops"].values(), m["program"]["kernels"]):
        funcs[op["unit"]].add(kernel["func"])
    for unit, entry in m["libraries"].items():
        lib = out / entry["file"]
        assert entry["arch"] == "aarch64" and elf_machine(lib) == AARCH64 != host_machine()
        assert {f"__tvm_ffi_{f}" for f in funcs[unit]} <= exported(lib), unit
    ran = cli("run", out)
    one_line_error(ran, "kernels-", "is built for aarch64", "this host is x86_64",
                   "run it on the board")


def test_the_profile_key_links_it_and_keeps_the_profile_hash(board, cross):
    tmp, hw, log = board
    keyed = tmp / "keyed.toml"
    keyed.write_text(board_toml(f'cross_compiler = "{cross}"\n'))
    assert load_profile(keyed).hash == load_profile(hw).hash  # the log's records still count
    assert load_profile(keyed).unit("npu").cross_compiler == cross
    out = tmp / "keyed"
    built = cli("compile", "seed_te", "--hw", keyed, "--log", log, "-o", out, "--cache-dir",
                tmp / "kernels")
    assert built.returncode == 0, built.stderr
    for entry in json.loads((out / "manifest.json").read_text())["libraries"].values():
        assert elf_machine(out / entry["file"]) == AARCH64


def test_a_pipeline_s_stage_libraries_are_cross_built(tmp_path, cross):
    mesh = (HWPROFILES / "mesh.toml").read_text()
    mesh = mesh.replace('num-cores = 1 }', f'num-cores = 1, mtriple = "{TRIPLE}" }}')
    mesh = mesh.replace('mcpu = "x86-64-v2"', f'mtriple = "{TRIPLE}"')
    hw = tmp_path / "mesh-arm.toml"
    hw.write_text(mesh)
    args = ("compile", "seed_te", "--hw", hw, "--objective", "throughput")
    one_line_error(cli(*args, "-o", tmp_path / "none"), "unit ", "--cross-compiler")
    built = cli(*args, "-o", tmp_path / "piped", "--cross-compiler", cross)
    assert built.returncode == 0, built.stderr
    stages = json.loads((tmp_path / "piped" / "manifest.json").read_text())["stages"]
    for stage in stages:
        lib = tmp_path / "piped" / stage["library"]["file"]
        assert elf_machine(lib) == AARCH64
        assert "__tvm_ffi__library_bin" in exported(lib)  # the stage's VM program
    one_line_error(cli("run", tmp_path / "piped"), "stages[0].library", "built for aarch64")


def test_a_unit_whose_device_this_tvm_lacks_is_refused_by_compile(tmp_path):
    hw, log = tmp_path / "ocl.toml", tmp_path / "tune.jsonl"
    hw.write_text(board_toml(target='kind = "opencl"'))  # every op on an OpenCL device
    tuned = cli("tune", "seed_te", "--hw", hw, "--trials", 2, "--log", log, "--no-progress")
    assert tuned.returncode == 0, tuned.stderr
    proc = cli("compile", "seed_te", "--hw", hw, "--log", log, "-o", tmp_path / "out",
               "--cache-dir", tmp_path / "kernels")
    one_line_error(proc, "target kind 'opencl'", "no such device here")
    assert not (tmp_path / "out" / "manifest.json").exists()
