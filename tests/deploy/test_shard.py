"""Kernels split along their output channels by TVM's sharding passes (autoplace.deploy.shard),
on alexnet with random weights: which are, how, and which are refused."""

from __future__ import annotations

import pytest
from references import randomized_onnx

from autoplace.deploy.shard import Shards, is_kernel_call, shard_kernel, shard_ways
from autoplace.models import load_module


@pytest.fixture(scope="module")
def alexnet(tmp_path_factory):
    mod, graph = load_module(randomized_onnx("alexnet", tmp_path_factory.mktemp("m") / "a.onnx"))
    main = mod["main"]
    calls = [b.value for blk in main.body.blocks for b in blk.bindings if is_kernel_call(b.value)]
    return mod, dict(zip((op.name for op in graph.ops), calls))


def shard(alexnet, name: str, ways: int) -> Shards | None:
    mod, calls = alexnet
    call = calls[name]
    return shard_kernel(mod[call.args[0]], list(call.args[1].fields), call.ty, ways)


def test_a_conv_splits_its_weights_and_bias_and_reads_all_its_input(alexnet):
    s = shard(alexnet, "fused_conv2d_add_relu", 4)
    assert (s.ways, s.axis, s.arg_axes) == (4, 1, (None, 0, 1))
    assert [int(d) for d in s.out_type.shape.values] == [1, 24, 54, 54]  # 96 channels / 4


def test_a_matmul_splits_along_its_last_axis(alexnet):
    s = shard(alexnet, "fused_matmul2_add7", 4)
    assert (s.ways, s.axis, s.arg_axes) == (4, 1, (None, 1, 0))


def test_ways_that_do_not_divide_the_channels_fall_to_the_most_that_do(alexnet):
    assert shard(alexnet, "fused_conv2d_add_relu", 5).ways == 4  # 96 channels
    assert (shard_ways(64, 3), shard_ways(96, 4), shard_ways(7, 4), shard_ways(5, 1)) == \
        (2, 4, 1, 1)
    assert shard(alexnet, "fused_conv2d_add_relu", 1) is None


def test_a_grouped_conv_splits_only_where_its_shards_are_right(alexnet):
    """alexnet's second conv has two groups: TVM shards its input's channels as its output's;
    split as many ways as its groups that is right, split four ways it is not (the shards,
    run on random inputs, differ from the kernel), so it runs whole."""
    two = shard(alexnet, "fused_conv2d1_add2_relu1", 2)
    assert two is not None and two.arg_axes[0] == 1  # each shard reads its group's inputs
    assert shard(alexnet, "fused_conv2d1_add2_relu1", 4) is None


def test_a_kernel_giving_a_tuple_runs_whole(alexnet):
    assert shard(alexnet, "fused_matmul_add6_relu4_dropout", 4) is None
