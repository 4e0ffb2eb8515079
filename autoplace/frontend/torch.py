"""A PyTorch model saved by ``torch.export.save`` (a ``.pt2`` file) -> Relax IRModule.

The torch.export route, as TVM takes it: ``torch.export.load`` gives the
``ExportedProgram``, TVM's ``from_exported_program`` its Relax module (weights as
constants, a single output unwrapped from its tuple, as the ONNX route gives it); then
:func:`autoplace.frontend.relax.from_relax` fuses it and makes its op graph. Shapes are the
export's (``torch.export`` fixes them). Needs torch (``pip install autoplace[torch]``).
"""

from __future__ import annotations

import contextlib
import logging
import zipfile
from pathlib import Path

import tvm

from autoplace.graph import GraphError, first_line


@contextlib.contextmanager
def _quiet(logger: str):
    """``logger``'s warnings held back while the block runs."""
    log = logging.getLogger(logger)
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def import_pt2(path: str | Path) -> tvm.IRModule:
    """The Relax module of the ``torch.export.save`` file at ``path``; a GraphError (one
    line, naming the file) if torch is missing or the file is not an exported program, or
    TVM cannot import it."""
    path = Path(path)
    try:
        import torch
    except ImportError:
        raise GraphError(f"{path}: reading a torch.export file needs torch "
                         "(pip install autoplace[torch])") from None
    from tvm.relax.frontend.torch import from_exported_program

    if not zipfile.is_zipfile(path):
        raise GraphError(f"{path}: not a torch.export file (not a zip archive)")
    try:
        with _quiet("torch.export"):  # (it logs a traceback before raising)
            program = torch.export.load(str(path))
    except Exception as exc:  # a zip that is no exported program, a newer format, ...
        raise GraphError(f"{path}: not a torch.export file ({first_line(exc)})") from None
    try:
        return from_exported_program(program, unwrap_unit_return_tuple=True)
    except Exception as exc:  # an operator TVM's importer lacks, ...
        raise GraphError(f"{path}: TVM's torch.export import failed "
                         f"({first_line(exc)})") from None
