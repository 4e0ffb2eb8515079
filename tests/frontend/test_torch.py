"""The torch.export route: a model saved by ``torch.export.save`` (.pt2) is a model like an
ONNX file: its graph, a simulated tune, compile and run --check through the CLI, and TVM's
build of it computes what torch computes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import tvm
from factories import cli, one_line_error
from tvm import relax

from autoplace.models import load_graph, load_module

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


class Net(torch.nn.Module):
    """conv (bias) + relu, a residual add, then a dense layer."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 3, 3, padding=1)
        self.fc = torch.nn.Linear(3 * 8 * 8, 10)

    def forward(self, x):
        return self.fc((torch.relu(self.conv(x)) + x).flatten(1))


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    torch.manual_seed(0)
    net, x = Net().eval(), torch.randn(1, 3, 8, 8)
    path = tmp_path_factory.mktemp("pt2") / "net.pt2"
    torch.export.save(torch.export.export(net, (x,)), str(path))
    with torch.no_grad():
        return path, x.numpy(), net(x).numpy()


def test_its_graph_holds_the_models_kernels(exported):
    path, _, _ = exported
    g = load_graph(path)
    assert g.name == "net"
    kinds = [op.kind for op in g.ops]
    assert kinds.count("conv2d") == 1 and kinds.count("matmul") == 1
    assert sum(op.weight_bytes for op in g.ops) == 4 * (3 * 3 * 3 * 3 + 3 + 192 * 10 + 10)


def test_tvms_build_computes_what_torch_computes(exported):
    path, x, want = exported
    mod, _ = load_module(path)
    vm = relax.VirtualMachine(tvm.compile(mod, target=tvm.target.Target({"kind": "llvm"})),
                              tvm.cpu())
    np.testing.assert_allclose(vm["main"](x).numpy(), want, rtol=1e-5, atol=1e-6)


def test_tune_compile_and_run_check_take_it(exported, tmp_path):
    path, _, _ = exported
    log, out = tmp_path / "t.jsonl", tmp_path / "placed"
    tuned = cli("tune", path, "--hw", "soc", "--trials", "6", "--log", log, "--no-progress")
    assert tuned.returncode == 0, tuned.stderr
    built = cli("compile", path, "--hw", "soc", "--log", log, "-o", out,
                "--cache-dir", tmp_path / "kernels")
    assert built.returncode == 0, built.stderr
    ran = cli("run", out, "--repeat", "1", "--check")
    assert ran.returncode == 0 and "check: all 1 outputs equal" in ran.stdout, ran.stderr


def test_a_file_that_is_no_export_is_one_line_naming_it(tmp_path):
    bad = tmp_path / "bad.pt2"
    bad.write_text("not a zip\n")
    one_line_error(cli("graph", bad), f"{bad}: not a torch.export file")
    one_line_error(cli("graph", bad, "--input-shapes", "x:[1,3,8,8]"),
                   "a torch.export file has the shapes it was exported with")
    import zipfile

    other = tmp_path / "other.pt2"  # a zip, but no exported program in it
    with zipfile.ZipFile(other, "w") as z:
        z.writestr("readme.txt", "hello")
    one_line_error(cli("graph", other), f"{other}: not a torch.export file (")
