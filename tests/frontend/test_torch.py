"""The torch.export route: a model saved by ``torch.export.save`` (.pt2) is a model like an
ONNX file: its graph, a simulated tune, compile and run through the CLI, and the placed
build computes what torch computes. Torch runs only in these tests' subprocesses (the
export, the CLI), with the real torch (tests/conftest.py keeps it out of the others)."""

from __future__ import annotations

import subprocess
import sys

import factories
import numpy as np
import pytest
from factories import one_line_error, with_torch

EXPORT = """
import sys, numpy as np, torch
class Net(torch.nn.Module):  # conv (bias) + relu, a residual add, then a dense layer
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 3, 3, padding=1)
        self.fc = torch.nn.Linear(3 * 8 * 8, 10)
    def forward(self, x):
        return self.fc((torch.relu(self.conv(x)) + x).flatten(1))
torch.manual_seed(0)
net, x = Net().eval(), torch.randn(1, 3, 8, 8)
torch.export.save(torch.export.export(net, (x,)), sys.argv[1])
with torch.no_grad():
    np.savez(sys.argv[2], x=x.numpy(), want=net(x).numpy())
"""


def cli(*args) -> subprocess.CompletedProcess:
    """``autoplace ARGS`` in a new process that sees the real torch."""
    return factories.cli(*args, env=with_torch())


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(the .pt2 file, its input, torch's output)."""
    where = tmp_path_factory.mktemp("pt2")
    path, arrays = where / "net.pt2", where / "arrays.npz"
    subprocess.run([sys.executable, "-c", EXPORT, str(path), str(arrays)], check=True,
                   timeout=300, env=with_torch())
    with np.load(arrays) as npz:
        return path, npz["x"], npz["want"]


def test_its_graph_holds_the_models_kernels(exported):
    path, _, _ = exported
    shown = cli("graph", path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("net: ")
    kinds = [line.split()[1] for line in shown.stdout.splitlines()[2:]]
    assert kinds.count("conv2d") == 1 and kinds.count("matmul") == 1


def test_the_placed_build_computes_what_torch_computes(exported, tmp_path):
    path, x, want = exported
    log, out = tmp_path / "t.jsonl", tmp_path / "placed"
    tuned = cli("tune", path, "--hw", "soc", "--trials", "6", "--log", log, "--no-progress")
    assert tuned.returncode == 0, tuned.stderr
    built = cli("compile", path, "--hw", "soc", "--log", log, "-o", out,
                "--cache-dir", tmp_path / "kernels")
    assert built.returncode == 0, built.stderr
    np.savez(tmp_path / "in.npz", x=x)
    ran = cli("run", out, "--repeat", "1", "--check", "--inputs", tmp_path / "in.npz",
              "--outputs", tmp_path / "out.npz")
    assert ran.returncode == 0 and "check: all 1 outputs equal" in ran.stdout, ran.stderr
    with np.load(tmp_path / "out.npz") as got:
        np.testing.assert_allclose(got["output_0"], want, rtol=1e-5, atol=1e-6)


def test_a_file_that_is_no_export_is_one_line_naming_it(tmp_path):
    import zipfile

    bad = tmp_path / "bad.pt2"
    bad.write_text("not a zip\n")
    one_line_error(cli("graph", bad), f"{bad}: not a torch.export file")
    one_line_error(cli("graph", bad, "--input-shapes", "x:[1,3,8,8]"),
                   "a torch.export file has the shapes it was exported with")
    other = tmp_path / "other.pt2"  # a zip, but no exported program in it
    with zipfile.ZipFile(other, "w") as z:
        z.writestr("readme.txt", "hello")
    one_line_error(cli("graph", other), f"{other}: not a torch.export file (")
