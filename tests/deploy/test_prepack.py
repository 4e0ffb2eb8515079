"""Weights packed once: the layout-free mark, the split, and what a kernel database sees."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
import tvm_ffi
from factories import legalized_kernel
from tvm import relax

from autoplace.deploy.cpu_rules import vector_bits
from autoplace.deploy.kernel_db import workload
from autoplace.deploy.prepack import free_params, layout_free, mark_weights, split_packs
from autoplace.deploy.schedule import default_schedule
from autoplace.frontend.relax import fuse

#: SSE2, one core: 4 float lanes, which a conv runs over its output channels (as NEON does)
SSE2 = tvm.target.Target({"kind": "llvm", "num-cores": 1})
#: this machine's CPU, one core (run)
THIS_CPU = tvm.target.Target({"kind": "llvm", "num-cores": 1,
                              "mcpu": tvm.target.codegen.llvm_get_system_cpu()})
#: AVX-512 (inspected, never run): a 55-wide conv runs over channels in vectors of 16
AVX512 = tvm.target.Target({"kind": "llvm", "num-cores": 2, "mcpu": "x86-64-v4"})


def conv_bias_relu(x_shape, w_shape) -> tvm.tirx.PrimFunc:
    """The fused conv + bias + relu kernel TVM legalizes, as a model's (data, weight,
    bias, output)."""
    bias = (1, w_shape[0], 1, 1)
    bb = relax.BlockBuilder()
    params = [relax.Var(n, relax.TensorType(s, "float32"))
              for n, s in (("x", x_shape), ("w", w_shape), ("b", bias))]
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(relax.op.nn.relu(relax.op.add(
                relax.op.nn.conv2d(params[0], params[1]), params[2])))
        bb.emit_func_output(out)
    mod = fuse(bb.finalize())
    (gv,) = [gv for gv in mod.functions if gv.name_hint != "main"]
    return mod[gv]


def test_a_marked_weight_is_split_off_in_the_packed_layout():
    """Output channels in vectors of 16 (AVX-512): the weight (64, 16, 3, 3) packed into
    (64 / 16, 16, 3, 3, 16), the compute taking it so; the bias is read as it is."""
    func = layout_free(conv_bias_relu((1, 16, 57, 57), (64, 16, 3, 3)), [1, 2])
    assert free_params(func) == {1, 2}
    compute, packs = split_packs(default_schedule(func, AVX512), n_outputs=1)
    assert [(p.param, p.shape, p.dtype) for p in packs] == [(1, (4, 16, 3, 3, 16), "float32")]
    assert [int(d) for d in compute.params[1].ty.shape] == [4, 16, 3, 3, 16]
    assert [int(d) for d in packs[0].func.params[0].ty.shape] == [64, 16, 3, 3]
    assert [int(d) for d in compute.params[2].ty.shape] == [1, 64, 1, 1]


def test_an_unmarked_weight_is_packed_per_call_inside_the_kernel():
    func = conv_bias_relu((1, 16, 57, 57), (64, 16, 3, 3))
    scheduled = default_schedule(func, AVX512)
    compute, packs = split_packs(scheduled, n_outputs=1)
    assert packs == () and compute.same_as(scheduled)
    assert [int(d) for d in compute.params[1].ty.shape] == [64, 16, 3, 3]


@pytest.mark.parametrize("shapes", [((1, 16, 30, 30), (32, 16, 3, 3)),
                                    ((1, 8, 9, 9), (12, 8, 1, 1))])
def test_the_packed_weight_and_the_compute_give_what_the_kernel_gives(shapes):
    """Pack once, then compute: the unscheduled kernel's output (SSE2, one core)."""
    func = conv_bias_relu(*shapes)
    compute, (pack,) = split_packs(default_schedule(layout_free(func, [1]), SSE2), 1)
    args, want, got = _reference(func)
    packed = tvm.runtime.empty(pack.shape, pack.dtype, tvm.cpu())
    _built(pack.func, SSE2)(tvm.runtime.tensor(args[1]), packed)
    _built(compute, SSE2)(tvm.runtime.tensor(args[0]), packed, tvm.runtime.tensor(args[2]),
                          got)
    lanes = pack.shape[-1]
    o = shapes[1][0]
    np.testing.assert_array_equal(packed.numpy(), args[1].reshape(
        o // lanes, lanes, *shapes[1][1:]).transpose(0, 2, 3, 4, 1))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


def test_the_weight_a_reduction_reads_is_marked_and_a_database_sees_the_mark():
    """Of a conv's constants, its weight is marked, its bias (read elementwise) is not; a
    kernel database tells the marked kernel from the unmarked one (a record of the kernel
    whose weight it packs is not one of a kernel given its weight per call)."""
    func = conv_bias_relu((1, 8, 9, 9), (12, 8, 1, 1))
    marked = mark_weights(func, [1, 2])
    assert free_params(marked) == {1} and free_params(mark_weights(func, [2])) == set()
    assert tvm_ffi.structural_hash(workload(marked)) != tvm_ffi.structural_hash(workload(func))
    assert layout_free(func, []).same_as(func) and mark_weights(func, [2]).same_as(func)


def _reference(func):
    """Random arguments of ``func`` (numpy), its output computed unscheduled, and a zeroed
    output tensor to compute it again into."""
    rng = np.random.default_rng(0)
    args = [rng.standard_normal([int(d) for d in p.ty.shape]).astype("float32")
            for p in func.params]
    want, got = (tvm.runtime.tensor(np.zeros_like(args[-1])) for _ in range(2))
    _built(func, tvm.target.Target({"kind": "llvm"}))(*map(tvm.runtime.tensor, args[:-1]),
                                                       want)
    return args, want, got


def _built(func, target):
    lib = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}),
                      target=target)
    return lib["main"]


def test_a_kernel_packing_two_arguments_in_one_block_stays_whole():
    """MetaSchedule's RewriteLayout packs a weight and a bias in one function, which the
    runtime does not call: such a kernel is not split, and computes what it did (packing
    on every call)."""
    from tvm import s_tir

    from autoplace.deploy.prepack import PREPROC

    func = conv_bias_relu((1, 8, 9, 9), (12, 8, 1, 1))
    sch = s_tir.Schedule(default_schedule(layout_free(func, [1]), SSE2))
    bias = sch.mod["main"].params[2]
    names = []
    tvm_ffi.structural_walk(sch.mod["main"].body, (s_tir.SBlock, lambda b: names.append(
        b.name_hint) if any(r.source.same_as(bias) for r in b.reads) else None))
    reader = sch.get_sblock(names[0])
    index = next(i for i, r in enumerate(sch.get(reader).reads) if r.source.same_as(bias))
    sch.annotate(sch.cache_read(reader, index, "global"), PREPROC, True)
    compute, packs = split_packs(sch.mod["main"], 1)
    assert packs == () and compute.same_as(sch.mod["main"])
    args, want, got = _reference(func)
    _built(compute, SSE2)(*map(tvm.runtime.tensor, args[:-1]), got)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


def matvec(k: int, n: int) -> tvm.tirx.PrimFunc:
    """A classifier's kernel: a row of ``k`` times a (k, n) weight (x, weight, output)."""
    return matmul(1, k, n)


def matmul(m: int, k: int, n: int) -> tvm.tirx.PrimFunc:
    """An (m, k) input times a (k, n) weight (x, weight, output)."""
    return legalized_kernel(relax.op.matmul, (m, k), (k, n))


def test_a_matrix_vector_product_reads_its_weight_packed_by_vectors_of_outputs():
    """A vector of outputs reads a row of the weight per step: packed (n / lanes, k, lanes),
    each thread's slab is read in order, where the (k, n) weight gives a vector of 4 floats
    from each of k rows (SSE2: 4 lanes; 36 outputs, which 8, two registers' lanes, do not
    divide)."""
    func = layout_free(matvec(64, 36), [1])
    compute, (pack,) = split_packs(default_schedule(func, SSE2), 1)
    assert (pack.param, pack.shape) == (1, (9, 64, 4))
    args, want, got = _reference(func)
    packed = tvm.runtime.empty(pack.shape, pack.dtype, tvm.cpu())
    _built(pack.func, SSE2)(tvm.runtime.tensor(args[1]), packed)
    _built(compute, SSE2)(tvm.runtime.tensor(args[0]), packed, got)
    np.testing.assert_array_equal(packed.numpy(), args[1].reshape(64, 9, 4).transpose(1, 0, 2))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


def test_a_constant_read_by_a_vector_over_columns_is_packed_by_vectors_of_columns():
    """A matmul's (k, n) weight read by a vector of columns: packed (n / tile, k, tile), the
    slab a vector reads lies in one run of memory, not one row of n floats apart from the
    next (this CPU: a tile of two registers' lanes, which divide 96 columns from SSE to
    AVX-512); a (k, n) input that is not constant is read as it is (a pack per call would
    cost more than it saves)."""
    tile = 2 * vector_bits(THIS_CPU) // 32
    func = layout_free(matmul(8, 16, 96), [1])
    compute, (pack,) = split_packs(default_schedule(func, THIS_CPU), 1)
    assert (pack.param, pack.shape) == (1, (96 // tile, 16, tile))
    args, want, got = _reference(func)
    packed = tvm.runtime.empty(pack.shape, pack.dtype, tvm.cpu())
    _built(pack.func, THIS_CPU)(tvm.runtime.tensor(args[1]), packed)
    _built(compute, THIS_CPU)(tvm.runtime.tensor(args[0]), packed, got)
    np.testing.assert_array_equal(packed.numpy(),
                                  args[1].reshape(16, 96 // tile, tile).transpose(1, 0, 2))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    unmarked = default_schedule(matmul(8, 16, 96), THIS_CPU)
    assert split_packs(unmarked, 1)[1] == () and "_global" not in unmarked.script()
