"""Transformer layers as ONNX nodes: a :class:`Builder` that names nodes and draws weights.

Weights are drawn in construction order from one ``numpy.random.default_rng(seed)``:
normal with standard deviation 0.02 (BERT's and GPT-2's initializer range), so attention
scores and GELU inputs are of order one rather than saturated or constant. Layer norms get
scale ``1 + 0.02 N(0, 1)`` and shift ``0.02 N(0, 1)``.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

#: ONNX opset of the generated models: LayerNormalization needs 17, the Gelu op 20.
OPSET = 20
#: Standard deviation of the random weights.
SCALE = 0.02


class Builder:
    """Collects the nodes and initializers of one ONNX graph."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0
        self.shapes: dict[tuple[int, ...], str] = {}

    def const(self, name: str, value: np.ndarray) -> str:
        """An initializer holding ``value``; returns its name."""
        self.inits.append(numpy_helper.from_array(np.array(value, order="C"), name))
        return name

    def weight(self, name: str, shape: tuple[int, ...], mean: float = 0.0) -> str:
        """A float32 initializer drawn from ``N(mean, SCALE**2)``."""
        value = mean + SCALE * self.rng.standard_normal(shape)
        return self.const(name, value.astype(np.float32))

    def ints(self, dims: list[int]) -> str:
        """An int64 initializer (a Reshape shape, Split sizes), one per distinct value."""
        key = tuple(dims)
        if key not in self.shapes:
            name = "ints_" + "x".join(str(d) for d in dims)
            self.shapes[key] = self.const(name, np.array(dims, dtype=np.int64))
        return self.shapes[key]

    def node(self, op: str, inputs: list[str], outputs: int = 1, **attrs) -> str | list[str]:
        """Append node ``op``; returns its output name (a list if ``outputs > 1``)."""
        self.count += 1
        names = [f"{op.lower()}_{self.count}" + (f"_{i}" if outputs > 1 else "")
                 for i in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, names, name=f"{op}_{self.count}",
                                           **attrs))
        return names if outputs > 1 else names[0]

    def model(self, name: str, inputs: list[onnx.ValueInfoProto],
              outputs: list[onnx.ValueInfoProto]) -> onnx.ModelProto:
        """The finished ModelProto (checked by ``onnx.checker``)."""
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        model = helper.make_model(graph, producer_name="autoplace.zoo",
                                  opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = 9
        onnx.checker.check_model(model)
        return model


def tensor(name: str, shape: list[int]) -> onnx.ValueInfoProto:
    """A float32 graph input or output of a static shape."""
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def linear(b: Builder, x: str, n_in: int, n_out: int, prefix: str) -> str:
    """``x @ W + bias`` over the last axis (MatMul then Add, as exporters write it)."""
    y = b.node("MatMul", [x, b.weight(f"{prefix}.weight", (n_in, n_out))])
    return b.node("Add", [y, b.weight(f"{prefix}.bias", (n_out,))])


def layer_norm(b: Builder, x: str, width: int, eps: float, prefix: str) -> str:
    """LayerNormalization (opset 17) over the last axis with learned scale and shift."""
    scale = b.weight(f"{prefix}.weight", (width,), mean=1.0)
    shift = b.weight(f"{prefix}.bias", (width,))
    return b.node("LayerNormalization", [x, scale, shift], axis=-1, epsilon=eps)


def gelu(b: Builder, x: str, approximate: str = "none") -> str:
    """GELU as the opset-20 ``Gelu`` op (``approximate="tanh"``: GPT-2's form)."""
    return b.node("Gelu", [x], approximate=approximate)


def mlp(b: Builder, x: str, width: int, inner: int, prefix: str,
        approximate: str = "none") -> str:
    """The feed-forward block: linear, GELU, linear."""
    h = gelu(b, linear(b, x, width, inner, f"{prefix}.fc1"), approximate)
    return linear(b, h, inner, width, f"{prefix}.fc2")
