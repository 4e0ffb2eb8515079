"""ONNX file -> Relax IRModule -> :class:`~autoplace.graph.OpGraph`.

Initializers are imported as Relax constants (TVM's default ``keep_params_in_input=False``),
and so are weights computed from them alone (the light model-zoo files build each weight
with ``ConstantOfShape``; :func:`~autoplace.frontend.relax.fuse` folds it), so an op's
``weight_bytes`` is the bytes of the (folded) initializer tensors it reads and the rest
of its ``external_bytes`` comes from the real graph inputs.
"""

from __future__ import annotations

from pathlib import Path

import onnx
import tvm
from google.protobuf.message import DecodeError
from tvm.relax.frontend.onnx import from_onnx as _relax_from_onnx

from autoplace.frontend.relax import from_relax
from autoplace.graph import GraphError, OpGraph


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _load_model(path: Path) -> onnx.ModelProto:
    """Parse ``path``; anything that is not a non-empty ONNX graph is a GraphError."""
    if not path.is_file():
        raise GraphError(f"{path}: no such ONNX file")
    try:
        model = onnx.load(str(path))
    except (DecodeError, OSError, ValueError, RuntimeError) as exc:
        raise GraphError(f"{path}: not an ONNX file ({_first_line(exc)})") from None
    if not model.HasField("graph") or not model.graph.node:
        raise GraphError(f"{path}: not an ONNX file (no graph nodes)")
    return model


def _real_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    # Old (opset <= 9) files also list every initializer as a graph input.
    inits = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def input_shapes(model: onnx.ModelProto) -> tuple[dict[str, list[int]], dict[str, str]]:
    """Shapes and dtypes of the real (non-initializer) inputs; symbolic dims become 1."""
    shapes, dtypes = {}, {}
    for inp in _real_inputs(model):
        ttype = inp.type.tensor_type
        shapes[inp.name] = [d.dim_value if d.dim_value > 0 else 1 for d in ttype.shape.dim]
        dtypes[inp.name] = str(onnx.helper.tensor_dtype_to_np_dtype(ttype.elem_type))
    return shapes, dtypes


def import_onnx(path: str | Path) -> tvm.IRModule:
    """Import the ONNX file at ``path`` as a Relax IRModule (weights kept as constants)."""
    path = Path(path)
    model = _load_model(path)
    shapes, dtypes = input_shapes(model)
    try:
        return _relax_from_onnx(model, shape_dict=shapes, dtype_dict=dtypes)
    except Exception as exc:  # the importer raises anything from KeyError to TVMError
        raise GraphError(f"{path}: ONNX import failed ({_first_line(exc)})") from None


def from_onnx(path: str | Path, name: str | None = None) -> tuple[tvm.IRModule, OpGraph]:
    """Import and fuse ``path``; return ``(fused module, OpGraph)``.

    The graph is called ``name``, by default the file's stem without a ``light_`` prefix.
    """
    path = Path(path)
    if name is None:
        name = path.stem.removeprefix("light_")
    return from_relax(import_onnx(path), name)
