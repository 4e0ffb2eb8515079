"""Folds before fusion: batch norms into convs and ONNX sums as adds compute what the
module did, on random weights; what cannot be folded is left as it is."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import relax

from autoplace.frontend.fold import fold, fold_batch_norms, sums_as_adds

RNG = np.random.default_rng(0)


def _const(*shape: int, low: float = -1.0, high: float = 1.0) -> relax.Expr:
    return relax.const(RNG.uniform(low, high, shape).astype("float32"))


def _run(mod: tvm.IRModule, *inputs: np.ndarray) -> np.ndarray:
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    return vm["main"](*[tvm.runtime.tensor(x) for x in inputs]).numpy()


def _calls(mod: tvm.IRModule, name: str) -> int:
    op, found = tvm.ir.Op.get(name), []
    relax.analysis.post_order_visit(mod["main"], lambda e: found.append(
        isinstance(e, relax.Call) and e.op.same_as(op)))
    return sum(found)


def _conv_norm(groups: int = 1, bias: bool = False, conv_read_twice: bool = False,
               training: bool = False) -> tvm.IRModule:
    """relu(batch_norm(conv2d(x, w) [+ b])) over an 8-channel 6x6 input."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 8, 6, 6), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.conv2d(x, _const(8, 8 // groups, 3, 3), padding=1,
                                           groups=groups))
            if bias:
                y = bb.emit(relax.op.add(y, _const(1, 8, 1, 1)))
            norm = bb.emit(relax.op.nn.batch_norm(
                y, _const(8, low=0.5, high=2.0), _const(8), _const(8),
                _const(8, low=0.1, high=2.0), axis=1, epsilon=1e-3, training=training))
            out = bb.emit(relax.op.nn.relu(bb.emit(relax.TupleGetItem(norm, 0))))
            if conv_read_twice:
                out = bb.emit(relax.op.add(out, y))
            out = bb.emit_output(out)
        bb.emit_func_output(out)
    return bb.finalize()


@pytest.mark.parametrize("groups, bias", [(1, False), (1, True), (8, False), (2, True)])
def test_a_folded_norm_computes_what_the_norm_did(groups: int, bias: bool) -> None:
    mod = _conv_norm(groups, bias)
    folded = fold_batch_norms(mod)
    assert (_calls(mod, "relax.nn.batch_norm"), _calls(folded, "relax.nn.batch_norm")) == (1, 0)
    assert _calls(folded, "relax.nn.conv2d") == 1
    x = RNG.uniform(-1, 1, (1, 8, 6, 6)).astype("float32")
    np.testing.assert_allclose(_run(folded, x), _run(mod, x), rtol=1e-4, atol=1e-5)


def test_a_norm_of_a_conv_read_elsewhere_is_left() -> None:
    # folding would leave the conv for its other reader and run a second one
    assert _calls(fold_batch_norms(_conv_norm(conv_read_twice=True)), "relax.nn.batch_norm") == 1


def test_a_norm_in_training_mode_is_left() -> None:
    # (it normalises by the batch's own statistics, not by the constants)
    assert _calls(fold_batch_norms(_conv_norm(training=True)), "relax.nn.batch_norm") == 1


def test_a_norm_of_a_parameter_is_left() -> None:
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 8, 6, 6), "float32"))
    g = relax.Var("g", relax.TensorType((8,), "float32"))
    with bb.function("main", [x, g]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.conv2d(x, _const(8, 8, 3, 3), padding=1))
            norm = bb.emit(relax.op.nn.batch_norm(y, g, _const(8), _const(8),
                                                  _const(8, low=0.1), axis=1, training=False))
            out = bb.emit_output(bb.emit(relax.TupleGetItem(norm, 0)))
        bb.emit_func_output(out)
    assert _calls(fold_batch_norms(bb.finalize()), "relax.nn.batch_norm") == 1


def _onnx_sum(first: tuple[int, ...]) -> tvm.IRModule:
    """relu(sum(stack(broadcast_to(a), broadcast_to(b)))) as ONNX's Sum imports, with a
    of shape ``first`` and b of (2, 3, 4)."""
    bb = relax.BlockBuilder()
    a = relax.Var("a", relax.TensorType(first, "float32"))
    b = relax.Var("b", relax.TensorType((2, 3, 4), "float32"))
    with bb.function("main", [a, b]):
        with bb.dataflow():
            terms = [bb.emit(relax.op.broadcast_to(t, (2, 3, 4))) for t in (a, b)]
            stacked = bb.emit(relax.op.stack(relax.Tuple(terms), axis=0))
            out = bb.emit(relax.op.nn.relu(bb.emit(relax.op.sum(stacked, axis=[0]))))
            out = bb.emit_output(out)
        bb.emit_func_output(out)
    return bb.finalize()


def test_a_sum_of_two_tensors_of_its_shape_is_an_add() -> None:
    mod = _onnx_sum((2, 3, 4))
    added = sums_as_adds(mod)
    assert [_calls(added, n) for n in ("relax.sum", "relax.stack", "relax.add")] == [0, 0, 1]
    a, b = (RNG.uniform(-1, 1, (2, 3, 4)).astype("float32") for _ in range(2))
    np.testing.assert_allclose(_run(added, a, b), np.maximum(a + b, 0), rtol=1e-6)


def test_a_sum_of_computed_terms_reads_them_and_computes_nothing_again() -> None:
    """sum(stack(exp(a), relu(b))) * exp(a): an add of the two results, each computed
    once (exp(a) read by the product too)."""
    bb = relax.BlockBuilder()
    a, b = (relax.Var(n, relax.TensorType((2, 3, 4), "float32")) for n in "ab")
    with bb.function("main", [a, b]):
        with bb.dataflow():
            terms = [bb.emit(relax.op.exp(a)), bb.emit(relax.op.nn.relu(b))]
            stacked = bb.emit(relax.op.stack(relax.Tuple(terms), axis=0))
            total = bb.emit(relax.op.sum(stacked, axis=[0]))
            out = bb.emit_output(bb.emit(relax.op.multiply(total, terms[0])))
        bb.emit_func_output(out)
    added = sums_as_adds(bb.finalize())
    assert [_calls(added, n) for n in ("relax.exp", "relax.nn.relu", "relax.add",
                                       "relax.sum")] == [1, 1, 1, 0]
    x, y = (RNG.uniform(-1, 1, (2, 3, 4)).astype("float32") for _ in range(2))
    np.testing.assert_allclose(_run(added, x, y), (np.exp(x) + np.maximum(y, 0)) * np.exp(x),
                               rtol=1e-6)


def test_a_norm_after_a_bias_over_another_axis_is_left() -> None:
    """conv (1, 6, 6, 6) + a constant of shape (6,) (it broadcasts over the width, not the
    channels, though there are 6 of each) then a norm: not folded."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 4, 6, 6), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.conv2d(x, _const(6, 4, 1, 1)))
            y = bb.emit(relax.op.add(y, _const(6)))
            norm = bb.emit(relax.op.nn.batch_norm(y, *(_const(6, low=0.1) for _ in range(4)),
                                                  axis=1, training=False))
            out = bb.emit_output(bb.emit(relax.TupleGetItem(norm, 0)))
        bb.emit_func_output(out)
    assert _calls(fold_batch_norms(bb.finalize()), "relax.nn.batch_norm") == 1


def test_a_sum_that_broadcasts_is_left() -> None:
    assert _calls(sums_as_adds(_onnx_sum((3, 4))), "relax.sum") == 1


def test_fold_merges_no_equal_convs() -> None:
    """Two convs of one input with equal constant weights (as the light model-zoo files'
    are) stay two: TVM's rewrite_call would merge them (it eliminates common
    subexpressions)."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 4, 5, 5), "float32"))
    w = np.full((4, 4, 1, 1), 0.5, "float32")
    with bb.function("main", [x]):
        with bb.dataflow():
            outs = []
            for _ in range(2):
                y = bb.emit(relax.op.nn.conv2d(x, relax.const(w)))
                norm = bb.emit(relax.op.nn.batch_norm(y, *(relax.const(np.ones(4, "float32"))
                                                           for _ in range(4)), axis=1,
                                                      training=False))
                outs.append(bb.emit(relax.TupleGetItem(norm, 0)))
            out = bb.emit_output(bb.emit(relax.op.concat(outs, axis=1)))
        bb.emit_func_output(out)
    folded = fold(bb.finalize())
    assert (_calls(folded, "relax.nn.conv2d"), _calls(folded, "relax.nn.batch_norm")) == (2, 0)
