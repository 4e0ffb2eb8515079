"""Reference outputs for build tests: bundled models with random weights, run unplaced
(by ONNX Runtime where the model is ONNX).

The bundled "light" ONNX models have constant weights (every output is the uniform
softmax), so outputs are compared with seeded random weights put in their place, in the
ONNX file itself so that onnxruntime runs the same model.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import tvm
from onnx import numpy_helper

from autoplace.deploy import build, compile_unplaced, random_inputs
from autoplace.deploy.compiler import metadata
from autoplace.deploy.run import Loaded
from autoplace.models import BUNDLED, bundled_onnx_path, load_module


def randomized_onnx(name: str, path: Path, seed: int = 0) -> Path:
    """The bundled ONNX model with seeded random weights (uniform, scaled by fan-in).

    The light models build every weight with ``ConstantOfShape(0.02)`` of a shape
    initializer; each such node becomes an initializer of random values.
    """
    model = onnx.load(str(bundled_onnx_path(name)))
    inits = {i.name: i for i in model.graph.initializer}
    # BatchNormalization: variance (input 4) in [0.5, 1.5] so sqrt(var) exists, scale
    # (input 1) in [0.1, 0.5] so deep stacks do not saturate the softmax
    bn = [n for n in model.graph.node if n.op_type == "BatchNormalization"]
    ranges = {**{n.input[4]: (0.5, 1.5) for n in bn}, **{n.input[1]: (0.1, 0.5) for n in bn}}
    rng = np.random.default_rng(seed)
    keep = []
    for node in model.graph.node:
        if node.op_type == "ConstantOfShape" and node.input[0] in inits:
            shape = [int(d) for d in numpy_helper.to_array(inits[node.input[0]])]
            fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
            w = (rng.uniform(*ranges[node.output[0]], shape) if node.output[0] in ranges
                 else rng.uniform(-1.0, 1.0, shape) * np.sqrt(3.0 / max(1, fan_in)))
            model.graph.initializer.append(
                numpy_helper.from_array(w.astype(np.float32), node.output[0]))
            model.graph.input.append(  # opset 9 lists initializers as inputs too
                onnx.helper.make_tensor_value_info(node.output[0], onnx.TensorProto.FLOAT,
                                                   shape))
        else:
            keep.append(node)
    del model.graph.node[:]
    model.graph.node.extend(keep)
    used = {i for n in keep for i in n.input}
    for field in (model.graph.initializer, model.graph.input):
        unused = [x for x in field if x.name.endswith("__SHAPE") and x.name not in used]
        for x in unused:
            field.remove(x)
    onnx.save(model, str(path))
    return path


class Reference:
    """A model (ONNX ones with random weights) and its unplaced outputs on seeded inputs:
    ONNX Runtime's for an ONNX model, TVM's default build's otherwise.

    ONNX Runtime is an implementation independent of TVM and the importer, and quick: TVM's
    default build runs its kernels unscheduled (vgg19: 23 s an inference here, its build
    25 s for densenet121 at -O3), which was most of what these checks cost. A build is
    compared at ``rtol`` (1e-4 against ONNX Runtime, whose kernels sum in other orders;
    1e-5 against TVM's default build).
    """

    def __init__(self, name: str, workdir: Path, target: dict | None = None):
        onnx_path = None if BUNDLED[name] is None else randomized_onnx(
            name, workdir / f"{name}.onnx")
        self.mod, self.graph = load_module(onnx_path or name)
        meta = metadata(self.mod)
        self.input_names = [spec["name"] for spec in meta["inputs"]]
        self.inputs = random_inputs(meta, seed=3)
        if onnx_path is None:
            target = tvm.target.Target({"kind": "llvm", **(target or {})})
            self._unplaced, self._session, self.rtol = \
                Loaded(compile_unplaced(self.mod, target)), None, 1e-5
        else:
            self._unplaced, self._session, self.rtol = None, _session(onnx_path), 1e-4
        self.outputs = self.run(self.inputs)

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """The unplaced model's outputs on ``inputs``."""
        if self._session is not None:
            return self._session.run(None, dict(zip(self.input_names, inputs)))
        return self._unplaced.run(self._unplaced.inputs(inputs))

    def check(self, placement, profile) -> dict:
        return self.check_built(build(self.mod, placement, profile, graph=self.graph)).meta

    def check_built(self, built) -> Loaded:
        """Load ``built``, run it on the inputs, check its outputs equal the unplaced ones."""
        loaded = built.load()
        got = loaded.run(loaded.inputs(self.inputs))
        assert len(got) == len(self.outputs)
        for a, b in zip(got, self.outputs):
            np.testing.assert_allclose(a, b, rtol=self.rtol, atol=1e-6)
        return loaded


def _session(path: Path):
    """An ONNX Runtime session of the model at ``path`` on the CPU, errors only logged."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
