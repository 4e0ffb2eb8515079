"""The copy plan's route lookup: a table of every scope pair, or a branch-free binary search
over the known route keys (a mesh of thousands of scopes)."""

from __future__ import annotations

import numpy as np
import pytest

from autoplace.space.copyplan import find_key


@pytest.mark.parametrize("size", [0, 1, 2, 3, 7, 12, 64, 545])
def test_find_gives_the_position_of_a_present_key_and_minus_one_otherwise(size):
    rng = np.random.default_rng(size)
    keys = np.unique(rng.integers(0, 4 * size + 2, size) * 2)[:size]  # even keys only
    for key in range(-3, 8 * size + 8):
        want = int(np.searchsorted(keys, key))
        want = want if want < len(keys) and keys[want] == key else -1
        assert find_key(keys, key) == want, (keys, key)


@pytest.mark.parametrize("hw", ["soc", "biglittle", "mesh"])
def test_the_dense_route_table_plans_what_the_searched_keys_plan(hw, monkeypatch):
    """A profile of few scopes looks routes up in a table of every scope pair; one of
    thousands (a mesh) searches the keys it knows: both give every row the same copies."""
    from autoplace.hardware.load import load_profile
    from autoplace.models import load_graph
    from autoplace.space import SearchSpace, routes

    graph, profile = load_graph("squeezenet"), load_profile(hw)
    dense = SearchSpace(graph, profile)
    monkeypatch.setattr(routes, "DENSE_SCOPES", 0)
    searched = SearchSpace(graph, profile)
    assert len(dense.routes.table) == 2 * len(profile.scopes) ** 2
    assert len(searched.routes.table) == 0
    c, m = dense.random_genomes(64, np.random.default_rng(1))
    for want, got in zip(searched.copy_plan(c, m), dense.copy_plan(c, m)):
        np.testing.assert_array_equal(got, want)
    table, r = dense.routes.table, dense.routes
    np.testing.assert_array_equal(table[r.keys], r.key_ids)  # what is known, and only that
    assert (table >= 0).sum() == len(r.keys) > 0
