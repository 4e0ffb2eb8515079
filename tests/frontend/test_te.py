"""TE compute graph -> one unfused kernel per TE op."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import relax, te

from autoplace.frontend.te import from_te, seed_example
from autoplace.graph import GraphError, OpGraph
from autoplace.models import GRAPH_DIR

M, N = 64, 32
TENSOR = M * N * 4  # one 64x32 float32 tensor


@pytest.fixture(scope="module")
def seed():
    return from_te(*seed_example(M, N), "seed_te")


def test_seed_graph_structure(seed) -> None:
    _, g = seed
    assert [op.name for op in g.ops] == ["C", "D", "E", "F"]
    assert [op.func for op in g.ops] == ["C", "D", "E", "F"]
    assert {op.kind for op in g.ops} == {"elementwise"}
    assert [(g.ops[e.src].name, g.ops[e.dst].name, e.nbytes) for e in g.edges] == [
        ("C", "D", TENSOR), ("C", "E", TENSOR), ("D", "F", TENSOR), ("E", "F", TENSOR)
    ]


def test_seed_costs(seed) -> None:
    _, g = seed
    c, d, e, f = g.ops
    assert c.flops == M * N  # one multiply per element
    assert d.flops == f.flops == M * N
    assert e.flops == 0  # estimate_tir_flops does not count exp
    assert c.bytes_read == c.external_bytes == 2 * TENSOR  # A and B
    assert f.bytes_read == 2 * TENSOR and f.external_bytes == 0
    assert all(op.weight_bytes == 0 for op in g.ops)  # no placeholder marked as a weight
    assert c.input_bytes == 2 * TENSOR
    assert all(op.output_bytes == TENSOR for op in g.ops)


def test_seed_matches_shipped_json(seed) -> None:
    _, g = seed
    assert g.fingerprint == OpGraph.load(GRAPH_DIR / "seed_te.json").fingerprint


def test_seed_module_is_unfused_and_computes_the_graph(seed) -> None:
    mod, _ = seed
    prims = sorted(gv.name_hint for gv, f in mod.functions_items()
                   if isinstance(f, tvm.tirx.PrimFunc))
    assert prims == ["C", "D", "E", "F"]
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    rng = np.random.default_rng(0)
    a, b = (rng.random((M, N), dtype=np.float32) for _ in range(2))
    c = a * b
    np.testing.assert_allclose(vm["main"](a, b).numpy(), c + 1 + np.exp(c), rtol=1e-5)


def test_small_seed_scales_edge_bytes() -> None:
    _, g = from_te(*seed_example(8, 4), "small")
    assert {e.nbytes for e in g.edges} == {8 * 4 * 4}


def test_reduction_op_is_reduce_and_placeholder_must_be_an_input() -> None:
    (f,), (a, b) = seed_example(M, N)
    r = te.reduce_axis((0, N), name="r")
    g_op = te.compute((M,), lambda i: te.sum(f[i, r] * a[i, r], axis=r), name="G")
    _, g = from_te([g_op], [a, b], "red")
    assert g.ops[-1].name == "G" and g.ops[-1].kind == "reduce"
    assert g.ops[-1].flops == 2 * M * N
    assert g.edge_name(len(g.edges) - 1) == "F->G"
    with pytest.raises(GraphError, match="placeholder 'B' is not among the inputs"):
        from_te([g_op], [a], "missing")


def test_placeholders_marked_as_weights() -> None:
    (f,), (a, b) = seed_example(M, N)
    w = te.placeholder((N,), "float32", name="W")
    g_op = te.compute((M, N), lambda i, j: f[i, j] * w[j] + b[i, j], name="G")
    mod, g = from_te([g_op], [a], "weights", weights=[b, w])
    main = mod["main"]
    assert [p.name for p in main.params] == ["A", "B", "W"]
    assert int(main.attrs["num_input"]) == 1
    by_name = {op.name: op for op in g.ops}
    # C reads A (input) and B (weight); G reads F over an edge, then W and B (weights)
    assert (by_name["C"].input_bytes, by_name["C"].weight_bytes) == (TENSOR, TENSOR)
    assert (by_name["G"].input_bytes, by_name["G"].weight_bytes) == (0, N * 4 + TENSOR)
    assert by_name["D"].weight_bytes == by_name["F"].weight_bytes == 0
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    rng = np.random.default_rng(1)
    av, bv = (rng.random((M, N), dtype=np.float32) for _ in range(2))
    wv = rng.random(N, dtype=np.float32)
    c = av * bv
    np.testing.assert_allclose(vm["main"](av, bv, wv).numpy(), (c + 1 + np.exp(c)) * wv + bv,
                               rtol=1e-5)


def test_placeholder_both_input_and_weight_is_a_graph_error() -> None:
    (f,), (a, b) = seed_example(M, N)
    with pytest.raises(GraphError, match="passed twice"):
        from_te([f], [a, b], "dup", weights=[b])
    with pytest.raises(GraphError, match="placeholder 'B' is not among the inputs nor the"):
        from_te([f], [a], "missing")
