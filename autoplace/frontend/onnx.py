"""ONNX file -> Relax IRModule -> :class:`~autoplace.graph.OpGraph`.

Initializers are imported as Relax constants (TVM's default ``keep_params_in_input=False``),
and so are weights computed from them alone (the light model-zoo files build each weight
with ``ConstantOfShape``; :func:`~autoplace.frontend.relax.fuse` folds it), so an op's
``weight_bytes`` is the bytes of the (folded) initializer tensors it reads and the rest
of its ``external_bytes`` comes from the real graph inputs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import onnx
import tvm
from google.protobuf.message import DecodeError
from tvm.relax.frontend.onnx import from_onnx as _relax_from_onnx

from autoplace.frontend.relax import from_relax
from autoplace.graph import GraphError, OpGraph, first_line


def _load_model(path: Path) -> onnx.ModelProto:
    """Parse ``path``; anything that is not a non-empty ONNX graph is a GraphError."""
    if not path.is_file():
        raise GraphError(f"{path}: no such ONNX file")
    try:
        model = onnx.load(str(path))
    except (DecodeError, OSError, ValueError, RuntimeError) as exc:
        raise GraphError(f"{path}: not an ONNX file ({first_line(exc)})") from None
    if not model.HasField("graph") or not model.graph.node:
        raise GraphError(f"{path}: not an ONNX file (no graph nodes)")
    return model


def _real_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    # Old (opset <= 9) files also list every initializer as a graph input.
    inits = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def input_shapes(model: onnx.ModelProto, given: Mapping[str, Sequence[int]] | None = None,
                 source: str = "") -> tuple[dict[str, list[int]], dict[str, str]]:
    """Shapes and dtypes of the real (non-initializer) inputs: the file's, with ``given``
    (input name -> shape, ``--input-shapes``) in place of its own. A symbolic dimension
    not given, or a name that is no input, is a GraphError naming ``source``."""
    inputs = _real_inputs(model)
    given = dict(given or {})
    names = [i.name for i in inputs]
    for name in given:
        if name not in names:
            raise GraphError(f"{source}: --input-shapes: {name!r} is not an input of the "
                             f"model (its inputs: {', '.join(names)})")
    shapes, dtypes = {}, {}
    for inp in inputs:
        ttype = inp.type.tensor_type
        shapes[inp.name] = _shape(inp.name, list(ttype.shape.dim), given.get(inp.name), source)
        dtypes[inp.name] = str(onnx.helper.tensor_dtype_to_np_dtype(ttype.elem_type))
    return shapes, dtypes


def _shape(name: str, dims: list, given: Sequence[int] | None, source: str) -> list[int]:
    """One input's shape: ``given`` if any (of the file's rank), else the file's, whose
    every dimension must then be a number."""
    if given is not None:
        if len(given) != len(dims):
            raise GraphError(f"{source}: --input-shapes: {name!r} has {len(dims)} dimensions, "
                             f"{list(given)} gives {len(given)}")
        return list(given)
    for k, d in enumerate(dims):
        if d.dim_value <= 0:
            what = f"{d.dim_param!r}" if d.dim_param else "unknown"
            raise GraphError(f"{source}: input {name!r} dimension {k} is symbolic ({what}): "
                             f"give its shape, e.g. --input-shapes \"{name}:"
                             f"[{','.join(str(x.dim_value or 1) for x in dims)}]\"")
    return [d.dim_value for d in dims]


def import_onnx(path: str | Path,
                shapes: Mapping[str, Sequence[int]] | None = None) -> tvm.IRModule:
    """Import the ONNX file at ``path`` as a Relax IRModule (weights kept as constants);
    ``shapes``: input name -> shape, for symbolic dimensions (tvmc's --input-shapes)."""
    path = Path(path)
    model = _load_model(path)
    full, dtypes = input_shapes(model, shapes, str(path))
    try:
        return _relax_from_onnx(model, shape_dict=full, dtype_dict=dtypes)
    except Exception as exc:  # the importer raises anything from KeyError to TVMError
        raise GraphError(f"{path}: ONNX import failed ({first_line(exc)})") from None


def from_onnx(path: str | Path, name: str | None = None,
              shapes: Mapping[str, Sequence[int]] | None = None,
              patterns: tuple[str, ...] = ()) -> tuple[tvm.IRModule, OpGraph]:
    """Import (``shapes``: see :func:`import_onnx`) and fuse ``path``; return ``(fused
    module, OpGraph)`` (``patterns``: entry points matched beside the table's).

    The graph is called ``name``, by default the file's stem without a ``light_`` prefix.
    """
    path = Path(path)
    if name is None:
        name = path.stem.removeprefix("light_")
    return from_relax(import_onnx(path, shapes), name, patterns)
