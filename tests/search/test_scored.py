"""What the proposer keeps per genome: rows that grow without copying the past each time,
and features computed once per genome while it is remembered."""

from __future__ import annotations

import functools

import numpy as np

from autoplace.cost_model import Featurizer
from autoplace.hardware.load import load_profile
from autoplace.measure.batch import fitting
from autoplace.models import load_graph
from autoplace.search.scored import Growing, Scored
from autoplace.space import SearchSpace


def test_growing_rows_are_the_rows_appended_and_copied_a_logarithmic_number_of_times():
    rows, buffers = Growing(np.zeros((0, 3), dtype=np.int64)), set()
    want = []
    for k in range(300):
        block = np.full((k % 7, 3), k, dtype=np.int64)
        rows.extend(block)
        want.append(block)
        buffers.add(id(rows.rows.base))
    np.testing.assert_array_equal(rows.rows, np.concatenate(want))
    assert len(rows) == sum(len(b) for b in want) == 897
    assert len(buffers) <= 6  # 64, 128, ..., 1024: not one buffer per round


def test_a_genome_is_featurized_once_and_its_figures_do_not_depend_on_its_batch():
    space = SearchSpace(load_graph("squeezenet"), load_profile("mesh"))
    featurizer, fits = Featurizer(space), functools.partial(fitting, space)
    seen = []

    def rows(X):  # (any duplicate key does; the proposer's rounds the features)
        return [r.tobytes() for r in X]

    def featurize(choice, mode, plan):
        seen.append(len(choice))
        X, out = featurizer.features(choice, mode, plan)
        return X, rows(X), fits(out)

    scored = Scored(space.keys, featurize)
    c, m = space.canonical(*space.random_genomes(40, np.random.default_rng(3)))
    X1, dup1, fit1 = scored(c[:30], m[:30])
    X2, dup2, fit2 = scored(c[20:], m[20:])  # 10 known, 10 new
    assert seen == [30, 10]
    X, out = featurizer.features(c, m)
    np.testing.assert_array_equal(np.concatenate([X1, X2[10:]]), X)
    np.testing.assert_array_equal(X2[:10], X1[20:])
    assert dup2[:10] == dup1[20:] and dup1 + dup2[10:] == rows(X)
    assert np.concatenate([fit1, fit2[10:]]).tolist() == fits(out).tolist()
    assert 0 < fit1.sum() < len(fit1)  # both kinds (the mesh's PE memories overflow)
