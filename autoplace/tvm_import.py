"""TVM imported without PyTorch, where autoplace never hands TVM a torch tensor.

``import tvm`` imports PyTorch whenever it is installed: ``tvm_ffi`` (TVM's FFI) to
register a DLPack fast path for torch tensors and to work around a symbol clash seen on
Windows, ``tvm.relax.base_py_module`` for its PyTorch interop. autoplace hands TVM numpy
arrays and TVM tensors only, so on a machine with the ``torch`` extra every command that
loads TVM (``compile``, ``run``, ``serve``, ``tune-kernels``, ``calibrate``) paid for a
PyTorch import it never used: ``import tvm`` takes 4.6 s here with it, 1.8 s without.

:func:`install` adds a finder that refuses ``torch`` while ``import tvm`` (or ``import
tvm_ffi``) runs and nothing else: PyTorch imported before TVM, or after it (the ``.pt2``
route, :mod:`autoplace.frontend.torch`; TVM's own PyTorch frontend), imports as usual, and
TVM treats the refusal as PyTorch not being installed (its own fallback: the interop works
without the fast path).
``autoplace`` installs it on import.
"""

from __future__ import annotations

import importlib.abc
import sys


class TorchDeferredForTvm(importlib.abc.MetaPathFinder):
    """Refuses ``torch`` while the ``tvm`` or ``tvm_ffi`` package is being imported (its
    submodules need it first)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname == "torch" and _tvm_initialising():
            raise ModuleNotFoundError(
                "torch is not imported while TVM itself imports (autoplace.tvm_import)",
                name=fullname)
        return None


def _tvm_initialising() -> bool:
    """Whether ``import tvm`` or ``import tvm_ffi`` itself is running (a module of TVM
    imported after them, ``tvm.relax.frontend.torch``, gets PyTorch)."""
    return any(getattr(getattr(sys.modules.get(name), "__spec__", None), "_initializing", False)
               for name in ("tvm", "tvm_ffi"))


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, TorchDeferredForTvm) for f in sys.meta_path):
        sys.meta_path.insert(0, TorchDeferredForTvm())
