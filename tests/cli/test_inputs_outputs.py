"""Inputs and outputs as tvmc users expect, from the command line: ``--input-shapes`` for a
model with a symbolic dimension, ``run --inputs/--outputs/--print-top/--check`` of a placed
build, one-line refusals of bad shapes and bad ``.npz`` files, host stand-ins named."""

from __future__ import annotations

import argparse
import json
import subprocess

import factories
import numpy as np
import pytest
from factories import board_toml, cli, conv_onnx, conv_reference

from autoplace.cli.options import input_shapes

SHAPES = "data:[2,3,8,8]"


def one_line_error(proc: subprocess.CompletedProcess, *words: str) -> None:
    factories.one_line_error(proc, *words, start="autoplace")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The symbolic model tuned on soc with --input-shapes (simulated) and compiled."""
    tmp = tmp_path_factory.mktemp("io")
    model, log, out = tmp / "sym.onnx", tmp / "tune.jsonl", tmp / "build"
    conv_onnx(model)
    tuned = cli("tune", model, "--input-shapes", SHAPES, "--hw", "soc", "--trials", 2,
                "--log", log, "--no-progress")
    assert tuned.returncode == 0, tuned.stderr
    assert f'--log {log} --input-shapes "{SHAPES}" -o placed' in tuned.stdout  # next: compile
    proc = cli("compile", model, "--input-shapes", SHAPES, "--hw", "soc", "--log", log,
               "-o", out, "--cache-dir", tmp / "kernels")
    assert proc.returncode == 0, proc.stderr
    return tmp, model, log, out


def test_input_shapes_are_spelled_as_tvmc_spells_them():
    assert input_shapes("data:[1,3,224,224]") == {"data": (1, 3, 224, 224)}
    assert input_shapes("a:[1, 2]  gpu_0/data_0:[3] input:0:[4,5]") == {
        "a": (1, 2), "gpu_0/data_0": (3,), "input:0": (4, 5)}
    for bad, why in (("data", "expected NAME:[D1,D2,...]"), ("data:[1,-1]", "> 0"),
                     ("data:[1,x]", "> 0"), ("a:[1] a:[2]", "a: given twice")):
        with pytest.raises(argparse.ArgumentTypeError, match=why.replace("[", r"\[")):
            input_shapes(bad)


def test_a_symbolic_dimension_must_be_given(built, tmp_path):
    tmp, model, log, _ = built
    one_line_error(cli("graph", model), "input 'data' dimension 0 is symbolic ('N')",
                   "--input-shapes \"data:[1,3,8,8]\"")
    one_line_error(cli("compile", model, "--hw", "soc", "--log", log, "-o", tmp_path / "x"),
                   "symbolic ('N')")
    one_line_error(cli("graph", model, "--input-shapes", "image:[1,3,8,8]"),
                   "'image' is not an input of the model (its inputs: data)")
    one_line_error(cli("graph", model, "--input-shapes", "data:[2,3]"),
                   "'data' has 4 dimensions, [2, 3] gives 2")
    one_line_error(cli("graph", model, "--input-shapes", "data:[0,3,8,8]"),
                   "argument --input-shapes: data: every dimension must be an integer > 0")
    one_line_error(cli("graph", "seed_te", "--input-shapes", "A:[1]"), "fixed shapes")
    two = cli("graph", model, "--input-shapes", SHAPES)
    assert two.returncode == 0, two.stderr
    one = cli("graph", model, "--input-shapes", "data:[1,3,8,8]")
    flops = [float(p.stdout.splitlines()[0].split(", ")[2].split()[0]) for p in (one, two)]
    assert flops[1] == pytest.approx(2 * flops[0])  # the batch of two is in the graph


def test_run_reads_inputs_writes_outputs_prints_the_top_and_checks(built, tmp_path):
    _, _, _, out = built
    x = np.random.default_rng(1).normal(size=(2, 3, 8, 8)).astype(np.float32)
    np.savez(tmp_path / "in.npz", data=x)
    ran = cli("run", out, "--inputs", tmp_path / "in.npz", "--outputs", tmp_path / "out.npz",
              "--print-top", 3, "--check", "--repeat", 1)
    assert ran.returncode == 0, ran.stderr
    got = np.load(tmp_path / "out.npz")
    assert got.files == ["output_0"] and got["output_0"].shape == (2, 10)
    want = conv_reference(x)
    np.testing.assert_allclose(got["output_0"], want, rtol=1e-4, atol=1e-6)
    for row in range(2):
        best = np.argsort(-want[row])[:3]
        line = f"output_0[{row}] top 3: " + ", ".join(f"{i} ({got['output_0'][row, i]:.6g})"
                                                      for i in best)
        assert line in ran.stdout
    assert "check: all 1 outputs equal the unplaced" in ran.stdout
    assert json.loads((out / "manifest.json").read_text())["graph"]["input_shapes"] == {
        "data": [2, 3, 8, 8]}


def test_a_bad_npz_is_one_line_naming_the_file_and_key(built, tmp_path):
    _, _, _, out = built
    x = np.zeros((2, 3, 8, 8), np.float32)
    nan = x.copy()
    nan[0, 0, 0, :3] = np.nan
    cases = {"missing": ({"image": x}, "'image' is not an input of the model (its inputs: "
                                      "data)"),
             "empty": ({}, "no array 'data' (the model's inputs: data; the file has: nothing"),
             "shape": ({"data": x[:1]}, "data: (1, 3, 8, 8) float32, the model takes "
                                        "(2, 3, 8, 8) float32"),
             "dtype": ({"data": x.astype(np.float64)}, "data: (2, 3, 8, 8) float64"),
             "nan": ({"data": nan}, "data: 3 of 384 values are NaN or infinite")}
    for name, (arrays, why) in cases.items():
        np.savez(tmp_path / f"{name}.npz", **arrays)
        one_line_error(cli("run", out, "--inputs", tmp_path / f"{name}.npz"),
                       f"{tmp_path / name}.npz: {why}")
    (tmp_path / "text.npz").write_text("not a zip")
    one_line_error(cli("run", out, "--inputs", tmp_path / "text.npz"), "text.npz: not an .npz")
    one_line_error(cli("run", out, "--input-shapes", SHAPES), "has its shapes already")


def test_run_names_the_units_that_ran_as_host_stand_ins(tmp_path):
    hw, log = tmp_path / "npu.toml", tmp_path / "tune.jsonl"
    hw.write_text(board_toml(target='kind = "vulkan"'))  # no code generator in this TVM
    tuned = cli("tune", "seed_te", "--hw", hw, "--trials", 2, "--log", log, "--no-progress")
    assert tuned.returncode == 0, tuned.stderr
    proc = cli("compile", "seed_te", "--hw", hw, "--log", log, "-o", tmp_path / "out",
               "--cache-dir", tmp_path / "kernels")
    assert proc.returncode == 0, proc.stderr
    units = json.loads((tmp_path / "out" / "manifest.json").read_text())["libraries"]
    ran = cli("run", tmp_path / "out", "--repeat", 1)
    assert ran.returncode == 0, ran.stderr
    named = ", ".join(f"{u} (vulkan)" for u in sorted(units))
    assert f"note: {named} ran as host stand-ins" in ran.stdout
