"""Fixtures shared by the real measurers' tests (TVM is imported only when they are used)."""

import pytest


@pytest.fixture(scope="module")
def soc():
    from autoplace.hardware.load import load_profile

    return load_profile("soc")


@pytest.fixture(scope="module")
def seed():
    """The first seed thread's TE graph as (Relax module, op graph)."""
    from autoplace.frontend.te import from_te, seed_example

    return from_te(*seed_example(), "seed_te")


@pytest.fixture(scope="module")
def weighted():
    """Two dense layers with constant weights, as (fused Relax module, op graph)."""
    import numpy as np
    from tvm import relax

    from autoplace.frontend.relax import from_relax

    rng = np.random.default_rng(0)
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((4, 32), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            h = x
            for _ in range(2):
                w = relax.const(rng.uniform(-0.2, 0.2, (32, 32)).astype("float32"))
                h = bb.emit(relax.op.nn.relu(relax.op.matmul(h, w)))
            out = bb.emit_output(h)
        bb.emit_func_output(out)
    return from_relax(bb.finalize(), "weighted")
