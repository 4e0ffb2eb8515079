"""Routes: found on demand; a mesh's by formula, at Dijkstra's cost over every path."""

from __future__ import annotations

import re

import numpy as np
import pytest

from autoplace.hardware.load import bundled_profiles, load_profile
from autoplace.hardware.profile import COPY_MODES
from autoplace.models import load_graph
from autoplace.space import SearchSpace
from autoplace.space.routes import GraphRoutes, MeshRoutes, Routes, path_cost


def mesh_profile(tmp_path, rows: int, cols: int, **edits):
    """The bundled mesh profile on a ``rows`` x ``cols`` grid (``edits``: key = "value"
    lines replaced in its text)."""
    text = bundled_profiles()["mesh"].read_text()
    text = re.sub(r"(?m)^rows = \d+", f"rows = {rows}", text)
    text = re.sub(r"(?m)^cols = \d+", f"cols = {cols}", text)
    for old, new in edits.items():
        text = text.replace(old, new)
    path = tmp_path / f"mesh{rows}x{cols}.toml"
    path.write_text(text)
    return load_profile(path)


def cost(route) -> float:
    return sum(map(path_cost, route)) if route else np.inf


@pytest.mark.parametrize("link_bw", ["4.0", "40.0"])  # links cheaper than the DRAM only nearby
def test_mesh_routes_cost_what_dijkstra_over_every_path_costs(tmp_path, link_bw):
    prof = mesh_profile(tmp_path, 6, 7, **{"bandwidth_gbps = 4.0": f"bandwidth_gbps = {link_bw}"})
    mesh = MeshRoutes(prof, prof.mesh)
    every = GraphRoutes([s.name for s in prof.scopes], list(prof.copies))
    rng = np.random.default_rng(0)
    names = [s.name for s in prof.scopes]
    hops = set()
    for a, b in rng.integers(0, len(names), (300, 2)):
        for m in range(len(COPY_MODES)):
            got, want = mesh.route(names[a], names[b], m), every.route(names[a], names[b], m)
            assert cost(got) == pytest.approx(cost(want), rel=1e-12)
            if got:
                assert got[0].src == names[a] and got[-1].dst == names[b]
                assert all(x.dst == y.src for x, y in zip(got, got[1:]))  # a connected route
                hops.add(len(got))
    assert max(hops) > 2 if link_bw == "40.0" else max(hops) <= 4  # both regimes were seen


def test_a_mesh_route_goes_along_the_row_first(tmp_path):
    prof = mesh_profile(tmp_path, 3, 3, **{"bandwidth_gbps = 4.0": "bandwidth_gbps = 40.0"})
    route = MeshRoutes(prof, prof.mesh).route("pe0.mem", "pe8.mem", COPY_MODES.index("async"))
    assert [p.dst for p in route] == ["pe1.mem", "pe2.mem", "pe5.mem", "pe8.mem"]
    assert [p.engine for p in route] == ["pe0.dma", "pe1.dma", "pe2.dma", "pe5.dma"]


def test_only_the_routes_asked_for_are_kept(tmp_path):
    prof = mesh_profile(tmp_path, 32, 32)
    space = SearchSpace(load_graph("squeezenet"), prof)
    assert isinstance(space.routes.finder, MeshRoutes)
    assert len(space.routes.routes) == 1  # none yet (route 0 is "none")
    c, m = space.random_genomes(4, np.random.default_rng(0))
    space.normalize(c, m)
    crossing = (space.c_scope[np.arange(space.n_ops), c][:, space.src]
                != space.c_scope[np.arange(space.n_ops), c][:, space.dst]).sum()
    assert 0 < len(space.routes.keys) <= 2 * crossing  # two modes per crossing copy


def test_route_ids_are_stable_as_routes_are_learned():
    prof = load_profile("soc")
    routes = Routes(prof, {e: i for i, e in enumerate(sorted({c.engine for c in prof.copies}))},
                    host=0)
    idx = prof.scope_index
    first = routes.id(idx["dram"], idx["sram1"], 1)
    routes.ids(np.array([idx["sram1"], idx["sram2"]]), np.array([idx["sram2"], idx["dram"]]),
               np.array([0, 1]))
    assert routes.id(idx["dram"], idx["sram1"], 1) == first > 0
    via = routes.routes[routes.id(idx["sram1"], idx["sram2"], 1)]  # async: through the DRAM
    assert [(p.src, p.dst, p.engine) for p in via] == [("sram1", "dram", "dma0"),
                                                       ("dram", "sram2", "dma1")]
    assert routes.id(idx["dram"], idx["dram"], 0) == 0  # no copy within a scope
    r = routes.id(idx["sram1"], idx["sram2"], 0)
    assert routes.length[r] == 1 and routes.hop_res[r, 0] == 0  # the host does sync copies


def test_an_explicit_copy_into_the_mesh_falls_back_to_dijkstra(tmp_path):
    mesh_profile(tmp_path, 2, 2)
    diagonal = '\n[[copies]]\nsrc = "pe0.mem"\ndst = "pe3.mem"\nbandwidth_gbps = 50.0\n'
    (tmp_path / "x.toml").write_text((tmp_path / "mesh2x2.toml").read_text() + diagonal)
    space = SearchSpace(load_graph("seed_te"), load_profile(tmp_path / "x.toml"))
    assert isinstance(space.routes.finder, GraphRoutes)
    assert [p.dst for p in space.route("pe0.mem", "pe3.mem", "sync")] == ["pe3.mem"]
