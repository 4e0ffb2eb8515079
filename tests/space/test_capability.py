"""A unit's pattern table in the space: it is offered only the ops a match of its patterns
covers, it runs them at that pattern's rate, and a composite over several ops runs on it
whole or not at all."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from factories import op, tiny_profile

from autoplace.graph import Edge, Match, OpGraph
from autoplace.hardware.profile import Unit
from autoplace.space import SearchSpace
from autoplace.space.placement import Placement

NPU_GFLOPS = {"conv2d_bias_relu": 40.0, "conv2d": 20.0, "attention": 30.0}


def npu_profile(*patterns: str):
    """tiny_profile (cpu at 1 GFLOP/s, acc) plus ``npu``, with the pattern table given,
    reading and writing dram."""
    p = tiny_profile()
    npu = Unit(name="npu", target={"kind": "llvm"}, accepts=frozenset(),
               patterns=frozenset(patterns),
               gflops={k: v for k, v in NPU_GFLOPS.items() if k in patterns},
               launch_overhead_s=5e-6)
    dram = dataclasses.replace(p.scopes[0], access=p.scopes[0].access | {"npu"})
    return dataclasses.replace(p, units=(*p.units, npu), scopes=(dram, *p.scopes[1:]))


def conv_graph(matches) -> OpGraph:
    """Two conv2d kernels (compute-bound: 1 GFLOP over 1 KB each), then a softmax."""
    ops = (op("conv_bias_relu", 1e9, 1000, 1000, ext=1000, kind="conv2d"),
           op("bare_conv", 1e9, 1000, 1000, kind="conv2d"),
           op("softmax", 1e6, 1000, 1000, kind="softmax"))
    return OpGraph(name="convs", ops=ops, edges=(Edge(src=0, dst=1, nbytes=1000),
                                                 Edge(src=1, dst=2, nbytes=1000)),
                   matches=tuple(matches))


def units_offered(space: SearchSpace, i: int) -> set[str]:
    return {space.units[u] for u in space.c_unit[i, :space.n_choices[i]]}


def test_a_table_with_conv2d_bias_relu_but_no_bare_conv2d_is_offered_only_the_match():
    g = conv_graph([Match(pattern="conv2d", ops=(1,)),
                    Match(pattern="conv2d_bias_relu", ops=(0,))])
    space = SearchSpace(g, npu_profile("conv2d_bias_relu"))
    assert units_offered(space, 0) == {"cpu", "npu"}
    assert units_offered(space, 1) == {"cpu"}  # a bare conv2d: not in the table
    assert units_offered(space, 2) == {"cpu"}
    assert "none of which matches it" in space.check(Placement(
        ops={"conv_bias_relu": ("cpu", "dram"), "bare_conv": ("npu", "dram"),
             "softmax": ("cpu", "dram")}, copies={})).detail


def test_a_match_runs_at_its_pattern_rate_the_best_where_two_match():
    g = conv_graph([Match(pattern="conv2d", ops=(0,)),
                    Match(pattern="conv2d_bias_relu", ops=(0,)),
                    Match(pattern="conv2d", ops=(1,))])
    space = SearchSpace(g, npu_profile("conv2d_bias_relu", "conv2d"))
    seconds = {i: space.c_dur[i, space.choice_of(i, "npu", "dram")] for i in (0, 1)}
    # compute-bound: launch + flops / rate (op 0: the faster of its two patterns)
    assert seconds[0] == pytest.approx(5e-6 + 1e9 / 40e9)
    assert seconds[1] == pytest.approx(5e-6 + 1e9 / 20e9)
    cpu = space.c_dur[0, space.choice_of(0, "cpu", "dram")]
    assert cpu == pytest.approx(1e9 / 1e9)


def attention_graph() -> OpGraph:
    """q@k (matmul), softmax, @v (matmul): one attention match over three ops, then a
    layer norm the npu's table lacks."""
    ops = (op("scores", 1e8, 1000, 1000, ext=1000, kind="matmul"),
           op("softmax", 1e6, 1000, 1000, kind="softmax"),
           op("context", 1e8, 1000, 1000, kind="matmul"),
           op("norm", 1e6, 1000, 1000, kind="norm"))
    edges = tuple(Edge(src=i, dst=i + 1, nbytes=1000) for i in range(3))
    return OpGraph(name="attn", ops=ops, edges=edges,
                   matches=(Match(pattern="attention", ops=(0, 1, 2)),))


def test_a_composite_over_several_ops_is_moved_whole():
    space = SearchSpace(attention_graph(), npu_profile("attention"))
    assert all(units_offered(space, i) == {"cpu", "npu"} for i in (0, 1, 2))
    rows = [("npu", "cpu", "cpu"), ("cpu", "npu", "cpu"), ("cpu", "cpu", "npu"),
            ("npu", "npu", "npu"), ("cpu", "cpu", "cpu")]
    choice = np.array([[space.choice_of(i, u, "dram") for i, u in enumerate(r)]
                       + [space.choice_of(3, "cpu", "dram")] for r in rows])
    units = space.c_unit[np.arange(4), space.canonical_choice(choice)]
    got = [tuple(space.units[u] for u in row[:3]) for row in units]
    # the first op decides where it is on the npu; another op alone there joins the first
    assert got == [("npu",) * 3, ("cpu",) * 3, ("cpu",) * 3, ("npu",) * 3, ("cpu",) * 3]


def test_a_split_composite_is_refused_by_check():
    space = SearchSpace(attention_graph(), npu_profile("attention"))
    split = Placement(ops={"scores": ("npu", "dram"), "softmax": ("cpu", "dram"),
                           "context": ("npu", "dram"), "norm": ("cpu", "dram")}, copies={})
    detail = space.check(split).detail
    assert "'scores' (on npu) and 'softmax' (on cpu) are one 'attention'" in detail
    whole = Placement(ops={**split.ops, "softmax": ("npu", "dram")}, copies={})
    assert space.check(whole) is None
