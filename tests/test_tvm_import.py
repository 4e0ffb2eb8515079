"""TVM loads without PyTorch under autoplace; PyTorch imported later works with TVM (in
processes that see the real torch: tests/conftest.py blocks it in the others)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from factories import with_torch

PROBE = """
import sys
import autoplace
import tvm
from tvm import relax
print("torch" in sys.modules)
import torch
import tvm_ffi
print(tvm_ffi.from_dlpack(torch.arange(3, dtype=torch.int32)).numpy().tolist())
"""

#: TVM's PyTorch frontend, imported after TVM without PyTorch: it imports PyTorch itself
FRONTEND = """
import sys
import autoplace
import tvm
from tvm.relax.frontend.torch import from_exported_program
print("torch" in sys.modules)
"""


def run(code: str) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env=with_torch())
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split("\n")


@pytest.fixture(autouse=True, scope="module")
def _torch_installed():
    if subprocess.run([sys.executable, "-c", "import torch"], env=with_torch(),
                      capture_output=True).returncode:
        pytest.skip("torch is not installed (the test extra installs it)")


def test_tvm_is_imported_without_torch_and_torch_after_it_works():
    loaded_with_tvm, through_dlpack, _ = run(PROBE)
    assert loaded_with_tvm == "False"
    assert through_dlpack == "[0, 1, 2]"


def test_tvms_torch_frontend_imports_torch_after_tvm():
    [loaded, _] = run(FRONTEND)
    assert loaded == "True"


def test_without_autoplace_tvm_imports_torch():
    """The finder is what keeps it out (if TVM stops importing PyTorch, drop it)."""
    [loaded, _] = run("import sys, tvm; print('torch' in sys.modules)")
    assert loaded == "True"
