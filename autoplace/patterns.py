"""The composite patterns a unit may declare it runs (a profile unit's ``patterns``).

The names are those of TVM's pattern tables (``tvm.relax.backend.patterns``, as the
CUTLASS and cuBLAS backends name their entries); :mod:`autoplace.frontend.patterns` builds
each as a ``tvm.relax.dpl`` pattern and finds where it matches a model. A unit may also
name its own pattern by a Python entry point, ``package.module:function`` (a function that
returns a ``tvm.relax.dpl`` pattern, or TVM's ``(pattern, annotations)`` pair). Pure data:
no TVM.
"""

from __future__ import annotations

import re

_ENTRY_POINT = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")


def is_entry_point(name: str) -> bool:
    """Whether ``name`` is a ``package.module:function`` entry point."""
    return bool(_ENTRY_POINT.fullmatch(name))


def known(name: str) -> bool:
    """Whether a unit may name ``name`` in its pattern table: one of :data:`PATTERNS`, or
    an entry point."""
    return name in PATTERNS or is_entry_point(name)

_ACTIVATIONS = {"": "", "_relu": " then relu", "_gelu": " then gelu",
                "_gelu_tanh": " then gelu (tanh approximation)"}


def _variants(op: str, what: str, activations: tuple[str, ...]) -> dict[str, str]:
    """``op``, ``op_bias``, ``op_<act>``, ``op_bias_<act>``: what each matches."""
    out = {}
    for bias in ("", "_bias"):
        for act in activations:
            out[f"{op}{bias}{act}"] = (what + (" plus a bias" if bias else "")
                                       + _ACTIVATIONS[act])
    return out


#: pattern name -> what it matches (in Relax ops, before legalization)
PATTERNS: dict[str, str] = {
    **_variants("conv2d", "relax.nn.conv2d", ("", "_relu")),
    **_variants("matmul", "relax.matmul", ("", "_relu", "_gelu", "_gelu_tanh")),
    **_variants("matmul_transposed", "relax.matmul by a permute_dims of its right operand",
                ("", "_relu", "_gelu", "_gelu_tanh")),
    **{f"{op}_bias_residual{act}": f"{op} plus a bias, plus a residual (relax.add){tail}"
       for op in ("conv2d", "matmul", "matmul_transposed")
       for act, tail in (("", ""), ("_relu", " then relu"))},
    "layer_norm": "relax.nn.layer_norm",
    "rms_norm": "relax.nn.rms_norm",
    "attention": "softmax(q @ k [* or / scale] [+ mask]) @ v, as ONNX models write "
                 "attention (relax.matmul, relax.nn.softmax, relax.matmul)",
}
