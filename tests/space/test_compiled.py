"""Search space: choices, size, hand-written placements, validation, JSON round trip."""

from __future__ import annotations

import math

import numpy as np
import pytest
from factories import chain_graph, fork_graph, tiny_profile

from autoplace.graph import Edge, Op, OpGraph
from autoplace.hardware.profile import ProfileError
from autoplace.space import ErrorKind, Placement, PlacementError, Problem, SearchSpace


@pytest.fixture
def space():
    return SearchSpace(chain_graph(), tiny_profile())


def test_choices_follow_capability_and_access(space):
    assert space.op_choices[0] == [("cpu", "dram", "streamed"), ("acc", "dram", "streamed"),
                                   ("acc", "sram", "streamed")]  # no weights: one choice each
    assert space.edge_modes == [["sync", "async"], ["sync", "async"]]
    # 3 ops x 3 choices, 2 edges x 2 modes
    assert space.log10_size == pytest.approx(3 * math.log10(3) + 2 * math.log10(2))


def test_a_kind_only_the_cpu_accepts_narrows_the_choices():
    g = OpGraph(name="g", ops=(Op(name="a", kind="conv2d", flops=1, bytes_read=1,
                                   output_bytes=1),), edges=())
    assert SearchSpace(g, tiny_profile()).op_choices == [[("cpu", "dram", "streamed")]]


def test_an_op_no_unit_accepts_is_a_profile_error():
    prof = tiny_profile()
    cpu_only_ew = type(prof.units[0])(**{**prof.units[0].__dict__,
                                         "accepts": frozenset({"elementwise"})})
    prof = type(prof)(**{**prof.__dict__, "units": (cpu_only_ew, prof.units[1])})
    g = OpGraph(name="g", ops=(Op(name="k", kind="conv2d", flops=1, bytes_read=1,
                                   output_bytes=1),), edges=())
    with pytest.raises(ProfileError, match="no unit accepts op 'k' of kind 'conv2d'"):
        SearchSpace(g, prof)


def test_hand_written_placement_fills_defaults(space):
    p = space.from_user({"X": "cpu", "Y": {"unit": "acc", "scope": "sram"}})
    assert p.ops == {"X": ("cpu", "dram"), "Y": ("acc", "sram"), "Z": ("cpu", "dram")}
    assert p.copies == {"X->Y": "async", "Y->Z": "async"}  # async where the route allows
    p2 = space.from_user({"ops": {"Y": {"unit": "acc", "scope": "sram"}},
                          "copies": {"X->Y": "sync"}})
    assert p2.copies == {"X->Y": "sync", "Y->Z": "async"}


@pytest.mark.parametrize("spec, message", [
    ({"X": "gpu"}, "op 'X': unknown unit 'gpu'"),
    ({"X": {"unit": "cpu", "scope": "sram"}}, "op 'X': unit 'cpu' cannot write scope 'sram'"),
    ({"Q": "cpu"}, "has no op 'Q'"),
    ({"ops": {"Y": {"unit": "acc", "scope": "sram"}}, "copies": {"X->Y": "dma"}},
     "edge 'X->Y': copy dram->sram supports ['sync', 'async'], got 'dma'"),
    ({"ops": {"X": "cpu"}, "copies": {"X->Y": "sync"}}, "edge 'X->Y' needs no copy"),
])
def test_bad_hand_written_placements_name_the_problem(space, spec, message):
    with pytest.raises(PlacementError) as err:
        space.from_user(spec)
    assert message in str(err.value)


def test_check_returns_the_kind_as_a_value_not_in_the_text(space):
    good = space.from_user({"X": "cpu"})
    unknown = Placement(ops={**good.ops, "X": ("gpu", "dram")}, copies=good.copies)
    assert space.check(unknown) == Problem(
        kind=ErrorKind.INVALID, detail="op 'X': unknown unit 'gpu' (profile has ['cpu', 'acc'])")
    # a detail that reads like another kind does not make it that kind
    stray = Placement(ops={**good.ops, "no copy path": ("cpu", "dram")}, copies=good.copies)
    assert space.check(stray).kind is ErrorKind.INVALID
    assert str(space.check(stray)) == "op 'no copy path' is not in the graph"
    one_way = tiny_profile(modes=("sync",))
    one_way = type(one_way)(**{**one_way.__dict__, "copies": one_way.copies[:1]})  # dram->sram
    narrow = SearchSpace(chain_graph(), one_way)
    back = narrow.decode([2, 2, 0], [0, 0])  # Y in sram, Z in dram: sram->dram has no path
    assert narrow.check(back).kind is ErrorKind.NO_COPY_PATH
    no_mode = Placement(ops={"X": ("cpu", "dram"), "Y": ("acc", "sram"), "Z": ("acc", "sram")},
                        copies={})
    assert narrow.check(no_mode) == Problem(
        kind=ErrorKind.INVALID, detail="edge 'X->Y': copy dram->sram needs a mode, one of ['sync']")


def test_unit_rejecting_a_kind_is_named():
    g = OpGraph(name="g", ops=(Op(name="c", kind="conv2d", flops=1, bytes_read=1,
                                   output_bytes=1),), edges=())
    space = SearchSpace(g, tiny_profile())
    with pytest.raises(PlacementError, match="unit 'acc' does not accept kind 'conv2d'"):
        space.from_user({"c": "acc"})


def test_placement_json_round_trip(space):
    p = space.from_user({"X": "cpu", "Y": {"unit": "acc", "scope": "sram"}})
    q = Placement.from_json(p.to_json())
    assert q == p
    assert space.check(q) is None
    with pytest.raises(PlacementError, match="not JSON"):
        Placement.from_json("{oops")
    with pytest.raises(PlacementError, match="missing or malformed"):
        Placement.from_dict({"ops": {"X": {"scope": "dram"}}})


def test_decode_repairs_an_unsupported_mode():
    prof = tiny_profile(modes=("sync",))
    space = SearchSpace(fork_graph(), prof)
    p = space.decode([0, 2, 0, 0], [1, 0, 0, 0])  # S->L needs dram->sram, sync only
    assert p.copies == {"S->L": "sync", "L->J": "sync"}
    assert space.check(p) is None


def test_uniform_placements(space):
    assert space.uniform("cpu").ops == {k: ("cpu", "dram") for k in "XYZ"}
    g = OpGraph(name="g", ops=(Op(name="c", kind="conv2d", flops=1, bytes_read=1,
                                   output_bytes=1),), edges=())
    assert SearchSpace(g, tiny_profile()).uniform("acc") is None


def test_routes_take_the_cheapest_multi_hop_path():
    from autoplace.hardware.profile import CopyPath, Scope

    prof = tiny_profile()
    far = Scope(name="far", capacity_bytes=1 << 20, bandwidth_bps=1e9, access=frozenset({"acc"}))
    hop = CopyPath(src="sram", dst="far", bandwidth_bps=1e9, latency_s=0.0,
                   modes=("async",), engine="dma1")
    prof = type(prof)(**{**prof.__dict__, "scopes": prof.scopes + (far,),
                         "copies": prof.copies + (hop,)})
    g = OpGraph(name="g", ops=(Op(name="a", kind="elementwise", flops=1, bytes_read=1,
                                   output_bytes=1),
                                Op(name="b", kind="elementwise", flops=1, bytes_read=1,
                                   output_bytes=1)),
                edges=(Edge(src=0, dst=1, nbytes=1),))
    space = SearchSpace(g, prof)
    assert [(c.src, c.dst) for c in space.route("dram", "far", "async")] == [
        ("dram", "sram"), ("sram", "far")]
    assert space.modes_between("dram", "far") == ["async"]


@pytest.mark.parametrize("model,hw", [("densenet121", "soc"), ("resnet50", "mesh")])
def test_decode_rows_round_trips_through_encode(model, hw):
    from autoplace.hardware.load import load_profile
    from autoplace.models import load_graph

    space = SearchSpace(load_graph(model), load_profile(hw))
    choice, mode = space.random_genomes(100, np.random.default_rng(7))
    placements = space.decode_rows(choice, mode)
    assert placements == [space.decode(c, m) for c, m in zip(choice, mode)]
    assert any(p.weights for p in placements) and any(p.copies for p in placements)
    back_c, back_m = space.encode(placements)
    assert (back_c == choice).all()
    assert (space.normalize(back_c, back_m) == space.normalize(choice, mode)).all()
    pairs = [pair for p in placements for pair in p.ops.values()]
    assert len({id(pair) for pair in pairs}) == len(set(pairs))  # one tuple per pair, shared


def test_a_key_gives_back_its_genome(space):
    choice, mode = space.random_genomes(5, np.random.default_rng(3))
    mode = space.normalize(choice, mode)
    for key, c, m in zip(space.keys(choice, mode), choice, mode):
        back_c, back_m = space.from_key(key)
        assert np.array_equal(back_c, c) and np.array_equal(back_m, m)


@pytest.mark.parametrize("dense", [0, 1 << 16])
def test_choice_index_finds_each_choice_and_no_other(monkeypatch, dense):
    """Choices are looked up in a table of every key (a small space) or by binary search
    (a mesh): both find each op's choice of a (unit, scope, weights), its choice with the
    other weight placement where it has none, and -1 where it has neither."""
    from autoplace.hardware.load import load_profile
    from autoplace.models import load_graph
    from autoplace.space import tables

    monkeypatch.setattr(tables, "DENSE_CHOICE_KEYS", dense)
    space = SearchSpace(load_graph("squeezenet"), load_profile("soc"))
    grid = np.array(np.meshgrid(np.arange(space.n_ops), np.arange(len(space.units)),
                                np.arange(len(space.scopes)), [0, 1])).reshape(4, -1)
    want = []
    for i, u, s, w in grid.T.tolist():
        own = {(int(a), int(b), int(c)): j for j, (a, b, c) in enumerate(zip(
            space.c_unit[i], space.c_scope[i], space.c_resident[i])) if j < space.n_choices[i]}
        want.append(own.get((u, s, w), own.get((u, s, 1 - w), -1)))
    assert space.choice_index(*grid).tolist() == want
    assert 0 < want.count(-1) < len(want)
