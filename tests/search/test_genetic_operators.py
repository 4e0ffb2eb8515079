"""Genome operations: decoding agrees with the space, mutations stay valid, evolution ranks."""

from __future__ import annotations

import numpy as np
from factories import chain_graph, tiny_profile

from autoplace.hardware.load import load_profile
from autoplace.models import load_graph
from autoplace.search.genetic_operators import OPERATORS, Genomes, evolve
from autoplace.space import SearchSpace


def genomes_of(model="squeezenet", hw="mesh"):
    space = SearchSpace(load_graph(model), load_profile(hw))
    return space, Genomes(space)


def test_normalised_modes_are_what_decoding_uses():
    space, g = genomes_of()
    rng = np.random.default_rng(0)
    choice, mode = space.random_genomes(200, rng)
    norm = space.normalize(choice, mode)
    placements = [space.decode(c, m) for c, m in zip(choice, mode)]
    enc_choice, enc_mode = space.encode(placements)
    assert np.array_equal(enc_choice, choice)
    assert np.array_equal(enc_mode, norm)  # no copy -> 0 (sync), repaired modes as decoded
    assert [space.decode(c, m) for c, m in zip(choice, norm)] == placements


def test_every_operator_keeps_genomes_valid():
    space, g = genomes_of()
    rng = np.random.default_rng(1)
    parents = space.random_genomes(16, rng)
    kids, modes = g.mutate(*parents, rng.integers(0, 16, 4000), rng)
    assert ((kids >= 0) & (kids < space.n_choices)).all()
    assert set(np.unique(modes)) <= {0, 1}
    changed = (kids != parents[0][0]).any(axis=1)
    assert changed.mean() > 0.3  # most children differ from parent 0 (random parents)
    assert abs(sum(OPERATORS.values()) - 1) < 1e-12


def test_follow_copies_a_neighbours_unit_and_scope():
    space = SearchSpace(chain_graph(), tiny_profile())
    g = Genomes(space)
    # choices cpu@dram (0), acc@dram (1), acc@sram (2); X 0, Y 2, Z 1. A "follow" child moves
    # one op onto a neighbour's (unit, scope): X->Y's, Y->X's or Z's, Z->Y's, or (padding)
    # nothing
    c, m = np.array([[0, 2, 1]]), np.zeros((1, 2), dtype=np.int64)
    rng = np.random.default_rng(2)
    kids = c.repeat(300, axis=0)
    g._follow(kids, m.repeat(300, axis=0), np.arange(300), rng)
    assert {tuple(k) for k in kids} == {(0, 2, 1), (2, 2, 1), (0, 0, 1), (0, 1, 1), (0, 2, 2)}


def test_evolve_returns_distinct_unexcluded_genomes_best_first():
    space, g = genomes_of("seed_te", "soc")
    rng = np.random.default_rng(3)
    start = space.random_genomes(8, rng)

    def score(c, m, plan=None):  # prefer choice 0 everywhere
        return c.sum(axis=1).astype(float), space.keys(c, m)

    exclude = set(space.keys(start[0][:1], space.normalize(*start)[:1]))
    c, m, s = evolve(g, *start, score, children=64, generations=4, keep=16, rng=rng,
                     exclude=exclude)
    keys = space.keys(c, m)
    assert len(set(keys)) == len(keys) and not set(keys) & exclude
    assert (np.diff(s) >= 0).all() and s[0] < score(*start)[0].min()


def test_unique_keeps_the_best_of_each_key_in_score_order_without_excluded_ones():
    """Against the plain loop it replaced, on random scores (with ties) and keys."""
    from autoplace.search.genetic_operators import unique_best

    def plain(s, keys, exclude):
        seen, keep = set(exclude), []
        for idx in np.argsort(s, kind="stable"):
            if keys[idx] not in seen:
                seen.add(keys[idx])
                keep.append(int(idx))
        return keep

    rng = np.random.default_rng(0)
    for case in range(200):
        n = int(rng.integers(0, 300))
        s = rng.integers(0, 20, n).astype(float)
        keys = [bytes([int(x)]) for x in rng.integers(0, 60, n)]
        exclude = {bytes([int(x)]) for x in rng.integers(0, 60, 10)} if case % 2 else set()
        rows = np.arange(n)[:, None]
        c, m, score, got_keys = unique_best(rows, rows, s, keys, exclude)
        want = plain(s, keys, exclude)
        assert c[:, 0].tolist() == want and got_keys == [keys[i] for i in want]
        assert (np.diff(score) >= 0).all() and not set(got_keys) & exclude


def test_mutations_pick_a_used_unit_of_a_class_or_a_new_one_equally():
    """Parents use one accelerator of four interchangeable ones: a point mutation onto the
    class lands on it or on a new one about equally often (a unit id would make "new" 3 in
    4), and children are canonical (a new accelerator is the second)."""
    from autoplace.frontend.tarnawski import load_instance

    space = SearchSpace(*load_instance("ops-bert_l-3"))
    cpu, fpga0 = space.profile.unit_index["cpu"], space.profile.unit_index["fpga0"]
    ops = np.arange(space.n_ops)
    choice = space.choice_index(ops, [cpu] * space.n_ops, [0] * space.n_ops)[None, :]
    choice[0, :40] = space.choice_index(ops[:40], [fpga0] * 40,
                                        [space.profile.scope_index["mem0"]] * 40)
    choice = space.canonical_choice(choice)
    mode = np.zeros((1, space.n_edges), dtype=np.int64)
    genomes, rng = Genomes(space), np.random.default_rng(0)
    c, m = choice.repeat(4000, axis=0), mode.repeat(4000, axis=0)
    genomes._point(c, m, np.arange(4000), rng)
    c = space.canonical_choice(c)
    units = space.c_unit[ops, c]
    changed = (c != choice).any(axis=1)
    new = (units == fpga0 + 1).any(axis=1)
    onto_class = changed & ((units != cpu) & (space.c_unit[ops, choice] == cpu)).any(axis=1)
    assert not (units > fpga0 + 1).any()  # canonical: no third accelerator
    share = new[onto_class].mean()
    assert 0.4 < share < 0.6, share
