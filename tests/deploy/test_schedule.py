"""Default kernel schedules: results unchanged, the structure the docstrings claim."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
import tvm_ffi
from factories import block_nests, legalized_kernel
from tvm import relax, s_tir, te, tirx

from autoplace.deploy.cpu_rules import vector_bits
from autoplace.deploy.nest_rules import MIN_PARALLEL, parallel_outer
from autoplace.deploy.schedule import default_schedule, threads_for
from autoplace.deploy.tile_plan import (
    REREAD_BYTES,
    Tiles,
    channels_outermost,
    plan_block_tiles,
    plan_channel_tiles,
    plan_reduction_tiles,
    plan_tiles,
)
from autoplace.hardware.load import load_profile
from autoplace.models import load_module
from autoplace.runtime.layout import runtime_program
from autoplace.runtime.libraries import kernel_func

#: a unit of this machine's CPU on two cores (the host profile's ``cpu``: AVX-512 here), and
#: one of the baseline x86-64 CPU (SSE2) on one core
TWO_CORES = tvm.target.Target({"kind": "llvm", "num-cores": 2,
                               "mcpu": tvm.target.codegen.llvm_get_system_cpu()})
ONE_CORE = tvm.target.Target({"kind": "llvm", "num-cores": 1})
#: for schedules only inspected, never run: 16 float32 lanes on any machine
AVX512 = tvm.target.Target({"kind": "llvm", "num-cores": 2, "mcpu": "x86-64-v4"})
CUDA = tvm.target.Target({"kind": "cuda", "arch": "sm_80"}, host={"kind": "llvm"})


def _loops(func: tirx.PrimFunc) -> list[tirx.For]:
    """Every loop of ``func`` (TVM's own walk, independent of :func:`block_nests`)."""
    found = []
    tvm_ffi.structural_walk(func.body, (tirx.For, found.append))
    return found


def _kinds(func: tirx.PrimFunc) -> set:
    return {loop.kind for loop in _loops(func)}


def _uses(expr, loop: tirx.For) -> bool:
    found = []
    tvm_ffi.structural_walk(expr, (tirx.Var, lambda v: found.append(v.same_as(loop.loop_var))))
    return any(found)


def _conv_like():
    """A 1x16x12x12 output, reducing over 8 channels and a 3x3 window (plus a padding nest)."""
    x = te.placeholder((1, 8, 14, 14), name="x")
    w = te.placeholder((16, 8, 3, 3), name="w")
    pad = te.compute((1, 8, 16, 16), lambda n, c, h, v: tvm.tirx.if_then_else(
        tvm.tirx.all(h >= 1, h < 15, v >= 1, v < 15), x[n, c, h - 1, v - 1], 0.0), name="pad")
    rc, ry, rx = te.reduce_axis((0, 8)), te.reduce_axis((0, 3)), te.reduce_axis((0, 3))
    y = te.compute((1, 16, 12, 12), lambda n, k, h, v: te.sum(
        pad[n, rc, h + ry, v + rx] * w[k, rc, ry, rx], axis=[rc, ry, rx]), name="y")
    return te.create_prim_func([x, w, y])


def _total():
    """A full reduction: nothing to run in parallel, nor to vectorise."""
    x = te.placeholder((64, 64), name="x")
    i, j = te.reduce_axis((0, 64)), te.reduce_axis((0, 64))
    s = te.compute((1,), lambda _: te.sum(x[i, j], axis=[i, j]), name="s")
    return te.create_prim_func([x, s])


KERNELS = {  # name -> a legalized operator, as in a model
    "conv2d": lambda: legalized_kernel(lambda x, w: relax.op.nn.conv2d(x, w, padding=1),
                                 (1, 32, 28, 28), (64, 32, 3, 3)),
    "conv2d_bias_relu": lambda: legalized_kernel(
        lambda x, w, b: relax.op.nn.relu(relax.op.add(relax.op.nn.conv2d(x, w), b)),
        (1, 16, 30, 30), (32, 16, 3, 3), (1, 32, 1, 1)),
    "conv2d_stride2": lambda: legalized_kernel(lambda x, w: relax.op.nn.conv2d(x, w, strides=2),
                                         (1, 32, 56, 56), (64, 32, 1, 1)),
    "grouped_conv2d": lambda: legalized_kernel(  # (shufflenet's last: 4 groups of 136)
        lambda x, w: relax.op.nn.conv2d(x, w, groups=4), (1, 544, 7, 7), (544, 136, 1, 1)),
    "depthwise_conv2d": lambda: legalized_kernel(
        lambda x, w: relax.op.nn.conv2d(x, w, padding=1, groups=32),
        (1, 32, 28, 28), (32, 1, 3, 3)),
    "matmul": lambda: legalized_kernel(relax.op.matmul, (4, 256), (256, 1000)),
    "batch_matmul": lambda: legalized_kernel(  # (attention: 6 heads of 32 x 48 times 48 x 64)
        relax.op.matmul, (6, 32, 48), (6, 48, 64)),
    "max_pool2d": lambda: legalized_kernel(lambda x: relax.op.nn.max_pool2d(x, 3, 2),
                                     (1, 64, 55, 55)),
    "max_pool2d_nchw16c": lambda: legalized_kernel(  # (resnet50's, as the runtime holds it)
        lambda x: relax.op.nn.max_pool2d(x, 3, 2, padding=1, layout="NCHW16c"),
        (1, 4, 28, 28, 16)),
    "max_pool2d_padded": lambda: legalized_kernel(
        lambda x: relax.op.nn.max_pool2d(x, 3, 2, padding=1), (1, 8, 28, 28)),
    "elementwise": lambda: legalized_kernel(lambda x, y: relax.op.nn.relu(relax.op.add(x, y)),
                                      (1, 64, 56, 56), (1, 64, 56, 56)),
    "concat": lambda: legalized_kernel(lambda x, y: relax.op.concat([x, y], axis=1),
                                 (1, 64, 27, 27), (1, 64, 27, 27)),
    "conv_like": _conv_like,
    "total": _total,
}


def _run(func: tirx.PrimFunc, target=ONE_CORE, seed: int = 0) -> np.ndarray:
    target = tvm.target.Target({"kind": "llvm"}) if "gpu" in target.keys else target
    lib = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}),
                      target=target)
    rng = np.random.default_rng(seed)
    args = [tvm.runtime.tensor(rng.standard_normal([int(d) for d in p.ty.shape])
                               .astype(str(p.ty.dtype))) for p in func.params]
    lib["main"](*args)
    return args[-1].numpy()


@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize("target", [TWO_CORES, ONE_CORE], ids=["this-cpu-x2", "sse2-x1"])
def test_the_default_schedule_computes_what_the_operator_does(name, target):
    func = KERNELS[name]()
    np.testing.assert_allclose(_run(default_schedule(func, target), target), _run(func),
                               rtol=1e-5, atol=1e-5)


def test_every_kernel_of_a_model_computes_what_it_did():
    mod, graph = load_module("squeezenet")
    names = sorted({op.func or op.name for op in graph.ops})
    for name in names:
        np.testing.assert_allclose(_run(default_schedule(mod[name], TWO_CORES), TWO_CORES),
                                   _run(mod[name]), rtol=1e-4, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("name", ["conv2d", "conv2d_bias_relu", "depthwise_conv2d", "matmul"])
def test_a_reduction_accumulates_a_vector_inside_its_reduction_loops(name):
    func = default_schedule(KERNELS[name](), TWO_CORES)
    reductions = [(b, v, a) for b, v, a in block_nests(func.body)
                  if any(iv.iter_type == tirx.IterVar.CommReduce for iv in b.iter_vars)]
    assert reductions, "the reduction block is gone"
    for block, values, around in reductions:
        assert around[-1].kind == tirx.ForKind.VECTORIZED  # the innermost loop, spatial
        for iv, value in zip(block.iter_vars, values):
            if iv.iter_type == tirx.IterVar.CommReduce:  # bound only by outer loops
                assert not _uses(value, around[-1])
                assert any(_uses(value, loop) for loop in around[:-1])
    init = [a for b, _, a in block_nests(func.body) if b.name_hint.endswith("_init")]
    assert init and all(a[-1].kind == tirx.ForKind.VECTORIZED for a in init)


def test_a_batched_matmul_tiles_its_rows_in_registers_not_its_batch():
    """Each accumulator of the register tile reuses the vector of the second matrix's
    columns: rows of one matrix, not matrices of the batch (heads), whose every one is
    another matrix to load."""
    func = default_schedule(KERNELS["batch_matmul"](), AVX512)
    (update,) = [(b, v, a) for b, v, a in block_nests(func.body) if b.name_hint == "matmul_update"]
    block, values, around = update
    unrolled = [loop for loop in around if loop.kind == tirx.ForKind.UNROLLED]
    assert len(unrolled) == 1 and int(unrolled[0].extent) == 8
    uses = [_uses(value, unrolled[0]) for value in values]  # (heads, rows, columns, k)
    assert uses == [False, True, False, False]


@pytest.mark.parametrize("name", ["conv2d_bias_relu", "elementwise", "max_pool2d"])
def test_outer_loops_run_in_parallel_only_on_several_cores(name):
    assert tirx.ForKind.PARALLEL in _kinds(default_schedule(KERNELS[name](), TWO_CORES))
    assert tirx.ForKind.PARALLEL not in _kinds(default_schedule(KERNELS[name](), ONE_CORE))


def test_an_epilogue_is_computed_in_the_write_back_of_the_accumulator():
    func = default_schedule(KERNELS["conv2d_bias_relu"](), TWO_CORES)
    names = [b.name_hint for b, _, _ in block_nests(func.body)]
    assert names == ["root", "conv2d_nchw_init", "conv2d_nchw_update",
                     "conv2d_nchw_intermediate_local"]  # no separate add or relu nest


def test_an_elementwise_nest_is_vectorised():
    func = default_schedule(KERNELS["elementwise"](), ONE_CORE)
    vectors = [f for f in _loops(func) if f.kind == tirx.ForKind.VECTORIZED]
    assert [int(f.extent) for f in vectors] == [4]  # SSE2: 4 float32 lanes; 56 = 14 * 4


def test_a_concatenation_is_vectorised_and_a_padding_is_not():
    concat = default_schedule(KERNELS["concat"](), AVX512)
    assert [int(f.extent) for f in _loops(concat) if f.kind == tirx.ForKind.VECTORIZED] == [9]
    conv = default_schedule(KERNELS["conv2d"](), AVX512)
    (pad,) = [a for b, _, a in block_nests(conv.body) if b.name_hint == "pad_temp"]
    assert tirx.ForKind.VECTORIZED not in {loop.kind for loop in pad}


def test_a_pooling_of_channel_blocks_reads_its_input_unpadded_in_vectors_of_the_block():
    func = default_schedule(KERNELS["max_pool2d_nchw16c"](), AVX512)
    nests = {b.name_hint: (v, a) for b, v, a in block_nests(func.body)}
    assert "pad_temp" not in nests  # inlined: the pooling reads the input itself
    for name in ("pool_max_init", "pool_max_update"):
        values, around = nests[name]
        assert around[-1].kind == tirx.ForKind.VECTORIZED and int(around[-1].extent) == 16
    (block,) = [b for b, _, _ in block_nests(func.body) if b.name_hint == "pool_max_update"]
    values, around = nests["pool_max_update"]
    kinds = [iv.iter_type for iv in block.iter_vars]
    spatial = [v for k, v in zip(kinds, values) if k == tirx.IterVar.DataPar]
    (lanes,) = [v for v in values if _uses(v, around[-1])]
    assert lanes.same_as(spatial[-1])  # the vector runs over the block's channels only
    window = [v for k, v in zip(kinds, values) if k == tirx.IterVar.CommReduce]
    assert len(window) == 2 and all(any(_uses(v, loop) for loop in around[1:-1])
                                    for v in window)  # inside the outer (parallel) loop
    assert around[0].kind == tirx.ForKind.PARALLEL


def test_a_pooling_over_a_strided_width_is_not_vectorised_but_reads_its_input_unpadded():
    func = default_schedule(KERNELS["max_pool2d_padded"](), AVX512)
    assert "pad_temp" not in {b.name_hint for b, _, _ in block_nests(func.body)}
    assert tirx.ForKind.VECTORIZED not in _kinds(func)  # a vector would gather every other


def test_a_kernel_the_rules_cannot_tile_keeps_its_loops():
    func = default_schedule(_total(), TWO_CORES)
    assert _kinds(func) == {tirx.ForKind.SERIAL}
    np.testing.assert_allclose(_run(func), _run(_total()), rtol=1e-5)


@pytest.mark.parametrize("mcpu, bits", [(None, 128), ("x86-64-v3", 256), ("x86-64-v4", 512)])
def test_the_vector_width_is_the_targets(mcpu, bits):
    spec = {"kind": "llvm"} | ({"mcpu": mcpu} if mcpu else {})
    assert vector_bits(tvm.target.Target(spec)) == bits


@pytest.mark.parametrize("extents, lanes, tiles", [
    ([64, 56, 56], 16, Tiles(vector=2, vector_tile=14, register=0, register_tile=8)),
    ([64, 55, 55], 16, Tiles(vector=2, vector_tile=11, register=0, register_tile=8)),
    ([128, 27, 27], 16, Tiles(vector=2, vector_tile=9, register=0, register_tile=8)),
    # 13 > 8 lanes: 8 + 4 + 1, three registers per vector, so 4 of them
    ([16, 13, 13], 8, Tiles(vector=2, vector_tile=13, register=0, register_tile=4)),
    ([1000], 16, Tiles(vector=0, vector_tile=10)),
    ([64, 111, 111], 16, None),  # 3 and 37: no vector tile of 4 to 32
    # two registers' lanes divide 768: 8 rows of 2 vectors (AVX2: at most 6 rows, and
    # 128's divisor up to 6 is 4)
    ([128, 768], 16, Tiles(vector=1, vector_tile=32, register=0, register_tile=8)),
    ([128, 768], 8, Tiles(vector=1, vector_tile=16, register=0, register_tile=4)),
])
def test_tiles_fill_the_vector_registers(extents, lanes, tiles):
    assert plan_tiles(extents, lanes, 32 if lanes == 16 else 16) == tiles


def test_a_register_tile_takes_an_axis_its_vectors_are_reused_along():
    # a batched matmul (12 heads x 128 rows x 128 columns): not over heads, each of
    # whose matrices is another, but over rows, whose vector of columns is the same
    tiles = plan_tiles([12, 128, 128], 16, 32, reused=frozenset({1}))
    assert (tiles.register, tiles.register_tile) == (1, 8)
    # none reused (a depthwise conv): still a tile, of independent accumulators
    assert plan_tiles([12, 128, 128], 16, 32, reused=frozenset()).register == 0


@pytest.mark.parametrize("extents, tiles", [
    ([1000, 13, 13], Tiles(vector=0, vector_tile=4)),  # 13 is prime: no register tile
    ([64, 56, 56], Tiles(vector=0, vector_tile=4, register=2, register_tile=8)),
    ([128, 27, 27], Tiles(vector=0, vector_tile=4, register=2, register_tile=3)),
    ([64, 112, 64], Tiles(vector=1, vector_tile=4, register=2, register_tile=8)),
    ([3, 13, 13], None),  # no axis but the innermost divides into vectors of 4
])
def test_narrow_vectors_run_over_channels(extents, tiles):
    assert plan_channel_tiles(extents, 4, 16) == tiles


def test_a_narrow_vector_reduction_accumulates_channels_contiguously():
    """128-bit vectors (SSE here, NEON on a board): conv2d's vector loop runs over output
    channels, and its accumulator holds those channels innermost. (On squeezenet's convs,
    one core: 110.0 ms -> 39.6 ms in all, against vectors over the width; resnet50's
    383.6 -> 248.8 ms.)"""
    func = default_schedule(KERNELS["conv2d_bias_relu"](), ONE_CORE)
    reductions = [(b, v, a) for b, v, a in block_nests(func.body)
                  if any(iv.iter_type == tirx.IterVar.CommReduce for iv in b.iter_vars)]
    block, values, around = reductions[0]
    assert around[-1].kind == tirx.ForKind.VECTORIZED and around[-1].extent == 4
    channel = block.iter_vars[0]  # the block's first spatial iterator: output channels
    assert _uses(values[0], around[-1])
    accumulator = block.writes[0].source
    assert accumulator.scope() == "local" and int(accumulator.shape[-1]) == 32  # channels
    assert channel.iter_type == tirx.IterVar.DataPar


@pytest.mark.parametrize("extents, lanes, tiles", [
    # AVX2: 13 floats take 8 + 4 + 1 lanes (54% used): channels, the width in registers
    ([1000, 13, 13], 8, Tiles(vector=0, vector_tile=8, register=2, register_tile=13)),
    ([128, 27, 27], 8, Tiles(vector=0, vector_tile=8, register=2, register_tile=9)),
    # 111 = 3 x 37: 3 columns in registers, and 3 rows above them (9 accumulators)
    ([64, 111, 111], 8, Tiles(vector=0, vector_tile=8, register=2, register_tile=3,
                              row=1, row_tile=3)),
    ([64, 56, 56], 8, Tiles(vector=2, vector_tile=8, register=0, register_tile=8)),
    ([64, 14, 14], 8, Tiles(vector=2, vector_tile=7, register=0, register_tile=8)),
    ([4, 13, 13], 8, Tiles(vector=2, vector_tile=13, register=0, register_tile=4)),
    # AVX-512: 13 floats fit one register; 27 (9 of 16 lanes), 55 and 111 (no vector tile)
    # run over channels: 16 a vector while that leaves 4 vectors of them, else 8
    ([1000, 13, 13], 16, Tiles(vector=2, vector_tile=13, register=0, register_tile=8)),
    ([128, 27, 27], 16, Tiles(vector=0, vector_tile=16, register=2, register_tile=9)),
    ([32, 27, 27], 16, Tiles(vector=0, vector_tile=8, register=2, register_tile=9)),
    ([16, 55, 55], 16, Tiles(vector=0, vector_tile=8, register=2, register_tile=11)),
    ([64, 111, 111], 16, Tiles(vector=0, vector_tile=16, register=2, register_tile=3,
                               row=1, row_tile=3)),
    # SSE: channels, the register tile up to 8
    ([1000, 13, 13], 4, Tiles(vector=0, vector_tile=4)),
])
def test_a_width_that_fills_its_registers_badly_gives_way_to_channels(extents, lanes, tiles):
    assert plan_reduction_tiles(extents, lanes, 32 if lanes == 16 else 16) == tiles


#: squeezenet's first conv: 111 wide (3 x 37), no vector tile of 4 to 16 over its width
FIRST_CONV = lambda: legalized_kernel(  # noqa: E731
    lambda x, w: relax.op.nn.conv2d(x, w, strides=2), (1, 3, 224, 224), (64, 3, 3, 3))
AVX2 = tvm.target.Target({"kind": "llvm", "num-cores": 2, "mcpu": "x86-64-v3"})


def _update(func: tirx.PrimFunc):
    """The block of ``func``'s one reduction that accumulates, its binding values and the
    loops around it."""
    ((block, values, around),) = [(b, v, a) for b, v, a in block_nests(func.body)
                                  if b.name_hint.endswith("_update")]
    return block, values, around


def _packed_weight(block: s_tir.SBlock, lanes: int):
    """The buffer ``block`` reads its weights from when they are packed: not a parameter,
    its last dimension ``lanes`` channels (None when it reads none such)."""
    found = [r.source for r in block.reads if r.source.scope() == "global"
             and "intermediate" not in r.source.name and int(r.source.shape[-1]) == lanes
             and len(r.source.shape) == 5]
    return found[0] if found else None


def test_a_width_without_vector_tiles_runs_over_channels_in_a_tile_of_rows_and_columns():
    """AVX2 and AVX-512: the 111-wide conv's vectors (8 or 16) run over its 64 output channels,
    with 3 rows x 3 columns of them in registers, reading its weights from a copy where each
    vector's channels are contiguous (squeezenet's first conv on two cores: the module
    docstring's figures)."""
    for target, lanes in [(AVX2, 8), (AVX512, 16)]:
        block, values, around = _update(default_schedule(FIRST_CONV(), target))
        assert [(f.kind, int(f.extent)) for f in around[-3:]] == [
            (tirx.ForKind.UNROLLED, 3), (tirx.ForKind.UNROLLED, 3),
            (tirx.ForKind.VECTORIZED, lanes)]
        assert _uses(values[0], around[-1])  # the vector loop indexes output channels
        assert _packed_weight(block, lanes) is not None
    func = default_schedule(FIRST_CONV(), AVX2)
    np.testing.assert_allclose(_run(func, AVX2), _run(FIRST_CONV()), rtol=1e-4, atol=1e-5)


def test_a_13_wide_conv_on_avx2_holds_its_width_in_registers_and_computes_the_same():
    """Squeezenet's last convs (13 wide): vectors over 8 output channels, the 13 columns
    an unrolled register tile, on AVX2, the weights read packed (a vector's 8 channels
    contiguous); the outputs unchanged."""
    conv = lambda: legalized_kernel(relax.op.nn.conv2d, (1, 32, 13, 13), (64, 32, 1, 1))  # noqa: E731
    func = default_schedule(conv(), AVX2)
    block, _, around = _update(func)
    assert around[-1].kind == tirx.ForKind.VECTORIZED and int(around[-1].extent) == 8
    assert around[-2].kind == tirx.ForKind.UNROLLED and int(around[-2].extent) == 13
    weight = _packed_weight(block, 8)  # 64 channels: 8 vectors, each 8 after 32 inputs
    assert weight is not None and [int(d) for d in weight.shape] == [8, 32, 1, 1, 8]
    np.testing.assert_allclose(_run(func, AVX2), _run(conv()), rtol=1e-4, atol=1e-5)


def test_a_gpu_kernel_gets_thread_bindings_and_compiles_for_cuda():
    for name in ["conv2d_bias_relu", "max_pool2d", "elementwise"]:
        func = default_schedule(KERNELS[name](), CUDA)
        tags = {f.thread_binding.thread_tag for f in _loops(func)
                if f.thread_binding is not None}
        assert {"blockIdx.x", "threadIdx.x"} <= tags, name
        tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}),
                    target=CUDA)


def test_parallel_outer_runs_the_outer_spatial_loops_of_each_nest_in_parallel():
    func = _conv_like()
    par = parallel_outer(func)
    parallel = [f for f in _loops(par) if f.kind == tirx.ForKind.PARALLEL]
    # one per nest (pad, conv), each fusing the fewest outer loops with enough iterations:
    # n*c*h = 128 (pad), n*k*h = 192 (conv); the innermost spatial loop stays serial
    assert sorted(int(f.extent) for f in parallel) == [128, 192]
    assert all(int(f.extent) >= MIN_PARALLEL for f in parallel)
    serial_inner = [f for f in _loops(par) if f.kind == tirx.ForKind.SERIAL]
    assert sorted(int(f.extent) for f in serial_inner) == [3, 3, 8, 12, 16]
    np.testing.assert_array_equal(_run(par), _run(func))


def test_parallel_outer_leaves_a_full_reduction_serial():
    par = parallel_outer(_total())
    assert tirx.ForKind.PARALLEL not in _kinds(par)


@pytest.mark.parametrize("name, threads", [("host", 2), ("soc", 1), ("biglittle", 2)])
def test_the_runtime_pool_has_as_many_threads_as_the_widest_unit(name, threads, monkeypatch):
    monkeypatch.setattr("os.sched_getaffinity", lambda _: {0, 1})  # a 2-CPU machine
    assert threads_for(load_profile(name)) == threads  # biglittle's 4 cores: capped at 2


@pytest.mark.parametrize("strides, lanes, over", [(2, 16, "channels"), (1, 14, "width")])
def test_a_strided_conv_runs_its_vectors_over_channels(strides, lanes, over):
    """A 1x1 conv onto a 28-wide output (resnet50's projections): of stride 1, 14-lane
    vectors over the width; of stride 2, where such a vector would read every other input,
    16 output channels (AVX-512) instead."""
    func = default_schedule(legalized_kernel(lambda x, w: relax.op.nn.conv2d(x, w, strides=strides),
                                       (1, 32, 28 * strides, 28 * strides), (64, 32, 1, 1)),
                            AVX512)
    block, values, around = [(b, v, a) for b, v, a in block_nests(func.body) if any(
        iv.iter_type == tirx.IterVar.CommReduce for iv in b.iter_vars)][0]
    assert around[-1].kind == tirx.ForKind.VECTORIZED and int(around[-1].extent) == lanes
    channel, width = values[0], values[2]  # (channels, rows, width, reductions: batch 1)
    assert _uses(channel if over == "channels" else width, around[-1])


@pytest.mark.parametrize("shapes, first", [
    (((1, 32, 28, 28), (512, 32, 1, 1)), True),  # 100 KB of input: resnet50's expansions
    (((1, 256, 56, 56), (64, 256, 1, 1)), False)])  # 3.2 MB: its reductions
def test_a_conv_over_the_width_runs_its_output_channels_outermost_on_a_small_input(shapes,
                                                                                   first):
    """A 1x1 conv vectorised over the width: its output channels' block loop is the
    outermost (parallel) loop when its input fits :data:`REREAD_BYTES`, each block reading
    it all; the rows' and the width's loops are, when it does not; the outputs the same."""
    conv = lambda: legalized_kernel(relax.op.nn.conv2d, *shapes)  # noqa: E731
    func = default_schedule(conv(), AVX512)
    _, values, around = [(b, v, a) for b, v, a in block_nests(func.body) if any(
        iv.iter_type == tirx.IterVar.CommReduce for iv in b.iter_vars)][0]
    assert around[0].kind == tirx.ForKind.PARALLEL
    assert _uses(values[2], around[-1])  # (a vector over the width: the plan asked for)
    assert (_uses(values[0], around[0]), _uses(values[1], around[0])) == (first, not first)
    here = default_schedule(conv(), TWO_CORES)
    np.testing.assert_allclose(_run(here, TWO_CORES), _run(conv()), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("tiles, n_spatial, nbytes, first", [
    (Tiles(vector=2, vector_tile=14, register=0, register_tile=8), 3, REREAD_BYTES, True),
    (Tiles(vector=2, vector_tile=14, register=0, register_tile=8), 3, REREAD_BYTES + 1, False),
    (Tiles(vector=2, vector_tile=14), 3, 0, False),  # no register axis to put first
    (Tiles(vector=0, vector_tile=16, register=2, register_tile=13), 3, 0, False),  # channels
    (Tiles(vector=2, vector_tile=8, register=0, register_tile=3, row=1, row_tile=3), 3, 0,
     False)])
def test_channels_go_outermost_only_over_the_width_of_a_small_input(tiles, n_spatial, nbytes,
                                                                    first):
    assert channels_outermost(tiles, n_spatial, nbytes) is first


@pytest.mark.parametrize("extents, strided, vector", [
    ([512, 28, 28], False, 2), ([512, 28, 28], True, 0),
    # resnet50's first conv: channels would put the vector over its rows (read with the
    # same stride), so it keeps the width's
    ([64, 112, 112], True, 2)])
def test_a_strided_reduction_is_planned_over_channels(extents, strided, vector):
    assert plan_reduction_tiles(extents, 16, 32, strided=strided).vector == vector


def test_a_strided_depthwise_conv_keeps_its_vectors_over_the_width():
    """A depthwise conv of stride 2 reads its input by output channel: over channels a
    vector would read 16 planes, so it stays over the width (as at stride 1)."""
    func = default_schedule(legalized_kernel(
        lambda x, w: relax.op.nn.conv2d(x, w, strides=2, padding=1, groups=64),
        (1, 64, 56, 56), (64, 1, 3, 3)), AVX512)
    block, values, around = [(b, v, a) for b, v, a in block_nests(func.body) if any(
        iv.iter_type == tirx.IterVar.CommReduce for iv in b.iter_vars)][0]
    assert around[-1].kind == tirx.ForKind.VECTORIZED
    assert _uses(values[2], around[-1]) and not _uses(values[0], around[-1])


@pytest.mark.parametrize("group, vector, tile", [
    (None, 0, 16), (136, 0, 8),  # 8 lanes divide a group of 136; 16 would straddle two
    (34, 2, 7)])  # 2 would: too narrow, so over the width (7 of its 16 lanes)
def test_a_grouped_convs_channel_vectors_stay_within_a_group(group, vector, tile):
    tiles = plan_reduction_tiles([544, 7, 7], 16, 32, group=group)
    assert (tiles.vector, tiles.vector_tile) == (vector, tile)


def test_a_grouped_conv_reads_its_packed_weights_in_vectors_within_a_group():
    """shufflenet's 1x1 conv of 4 groups of 136 channels onto 7 x 7 (AVX-512): a vector of
    16 channels would cross a group (each lane reading its own group's input: 1.7 ms, 4
    GFLOP/s); it takes 8, and its weight, which the vector's channels index (the input it
    indexes by group), is packed for them."""
    func = default_schedule(KERNELS["grouped_conv2d"](), AVX512)
    block, values, around = [(b, v, a) for b, v, a in block_nests(func.body) if any(
        iv.iter_type == tirx.IterVar.CommReduce for iv in b.iter_vars)][0]
    assert around[-1].kind == tirx.ForKind.VECTORIZED and int(around[-1].extent) == 8
    assert _uses(values[0], around[-1])
    packed = [r.source for r in block.reads if len(r.source.shape) == 5]
    assert [[int(d) for d in b.shape] for b in packed] == [[68, 136, 1, 1, 8]]


@pytest.mark.parametrize("extents, lanes, registers, tiles", [
    # AVX-512: the block's 16 channels a vector, the width in up to 14 accumulators
    ([12, 13, 13, 16], 16, 32, Tiles(vector=3, vector_tile=16, register=2, register_tile=13)),
    # ... and up to 4 channel blocks in up to 24, when that holds more accumulators
    ([4, 55, 55, 16], 16, 32, Tiles(vector=3, vector_tile=16, register=2, register_tile=11,
                                    row=0, row_tile=2)),
    ([4, 111, 111, 16], 16, 32, Tiles(vector=3, vector_tile=16, register=2, register_tile=3,
                                      row=0, row_tile=4)),
    ([63, 13, 13, 16], 16, 32, Tiles(vector=3, vector_tile=16, register=2, register_tile=13)),
    ([125, 13, 13, 8], 16, 32, Tiles(vector=3, vector_tile=8, register=2, register_tile=13)),
    # ... of as many accumulators, the most rows: 2 x 7 of a width of 14, not 1 x 14
    ([64, 14, 14, 16], 16, 32, Tiles(vector=3, vector_tile=16, register=2, register_tile=7,
                                     row=0, row_tile=2)),
    ([4, 56, 56, 16], 16, 32, Tiles(vector=3, vector_tile=16, register=2, register_tile=4,
                                    row=0, row_tile=4)),
    # AVX2: half a block a vector, up to 6 accumulators of the width
    ([4, 56, 56, 16], 8, 16, Tiles(vector=3, vector_tile=8, register=2, register_tile=4)),
])
def test_a_reduction_onto_channel_blocks_vectorises_the_block(extents, lanes, registers,
                                                               tiles):
    assert plan_block_tiles(extents, lanes, registers) == tiles


def test_a_conv_onto_channel_blocks_holds_the_width_in_registers_and_reads_packed_weights():
    """squeezenet's 48 -> 192 1x1 conv onto 13 x 13 as the runtime holds it (NCHW16c in and
    out): a vector of the block's 16 channels, 13 of them in registers along the width,
    the weight packed with the block's channels innermost; it computes what it did."""
    mod, graph = load_module("squeezenet")
    program = runtime_program(mod, graph, load_profile("host"))
    name = "fused_conv2d10_add6_relu6"
    func = kernel_func(program, name)
    scheduled = default_schedule(func, AVX512)
    block, values, around = [(b, v, a) for b, v, a in block_nests(scheduled.body) if any(
        iv.iter_type == tirx.IterVar.CommReduce for iv in b.iter_vars)][0]
    assert around[-1].kind == tirx.ForKind.VECTORIZED and int(around[-1].extent) == 16
    assert around[-2].kind == tirx.ForKind.UNROLLED and int(around[-2].extent) == 13
    packed = [r.source for r in block.reads if r.source.name.endswith("_global")]
    # (48 input channels as 3 blocks of 16, in the order the loops read them:
    # deploy.weight_order)
    assert [[int(d) for d in b.shape] for b in packed] == [[12, 3, 16, 1, 1, 16]]
    np.testing.assert_allclose(_run(default_schedule(func, TWO_CORES), TWO_CORES), _run(func),
                               rtol=1e-5, atol=1e-5)


def test_a_conv_onto_channel_blocks_holds_four_blocks_of_a_narrow_width_in_registers():
    """squeezenet's first conv (3 -> 64 channels, stride 2, onto 111 x 111: 3 x 37) as the
    runtime holds it (NCHW16c out): with AVX-512's 32 registers, its 4 channel blocks by 3
    columns of the width accumulate in registers (12 vectors, not the width's 3 alone); it
    computes what it did (scheduled for AVX-512, run on this CPU, whose LLVM splits wider
    vectors)."""
    mod, graph = load_module("squeezenet")
    program = runtime_program(mod, graph, load_profile("host"))
    func = kernel_func(program, "fused_conv2d_add_relu")
    scheduled = default_schedule(func, AVX512)
    block, values, around = [(b, v, a) for b, v, a in block_nests(scheduled.body) if any(
        iv.iter_type == tirx.IterVar.CommReduce for iv in b.iter_vars)][0]
    assert [(loop.kind, int(loop.extent)) for loop in around[-3:]] == [
        (tirx.ForKind.UNROLLED, 4), (tirx.ForKind.UNROLLED, 3), (tirx.ForKind.VECTORIZED, 16)]
    here = tvm.target.Target({"kind": "llvm", "num-cores": 2})
    np.testing.assert_allclose(_run(scheduled, here), _run(func), rtol=1e-5, atol=1e-5)
