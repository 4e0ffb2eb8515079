"""GuidedProposer: batches of unmeasured genomes; rows that do not fit are never proposed."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import warnings

import numpy as np
import pytest

from autoplace.hardware.load import load_profile
from autoplace.measure.batch import fits, fitting
from autoplace.measure.simulator import Simulator
from autoplace.models import load_graph
from autoplace.search.guided_proposer import NOT_FITTING, GuidedProposer, make_model
from autoplace.space import SearchSpace


def space_of(model: str = "squeezenet", hw: str = "soc") -> SearchSpace:
    return SearchSpace(load_graph(model), load_profile(hw))


def placements(space, choice, mode):
    return [space.decode(c, m) for c, m in zip(choice, mode)]


def test_fits_agrees_with_the_simulator_on_random_genomes():
    space = space_of(hw="mesh")  # 2 MiB PE memories: most random placements overflow
    sim = Simulator(space)
    c, m = space.random_genomes(200, np.random.default_rng(0))
    m = space.normalize(c, m)
    ok = [r.ok for r in sim.measure(placements(space, c, m))]
    assert fits(space, c, m).tolist() == ok
    assert 0 < sum(ok) < len(ok)  # both kinds are in the sample


@pytest.fixture(scope="module")
def mesh_rounds():
    """Six rounds of 8 proposals on the 4x4 mesh, from 64 random genomes (most of which
    overflow a PE's memory), each measured and observed: the start and (batch, results)
    per round."""
    space = space_of(hw="mesh")
    sim = Simulator(space)
    p = GuidedProposer(space, model=make_model("xgb", seed=0),
                       candidates=256, seed=0, feasible=functools.partial(fitting, space))
    start = space.random_genomes(64, np.random.default_rng(1))
    p.seed_population(*start)
    rounds = []
    for _ in range(6):
        p.fit()
        batch = p.propose(8)
        results = sim.measure(placements(space, batch.choice, batch.mode))
        p.observe(batch.choice, batch.mode, np.array([r.latency_s for r in results]))
        rounds.append((batch, results))
    return space, start, rounds


def test_rows_that_do_not_fit_are_never_proposed(mesh_rounds):
    space, start, rounds = mesh_rounds
    assert not fits(space, *start).all()  # evolution starts among overflows
    for _, results in rounds:
        assert 0 < len(results) <= 8 and all(r.ok for r in results)


def test_rows_that_do_not_fit_score_after_every_row_that_fits():
    """Evolution selects by this score: a row over a PE's memory must not outrank one that
    fits (a search breeding from overflows measures only what is left over)."""
    space = space_of(hw="mesh")
    c, m = space.canonical(*space.random_genomes(200, np.random.default_rng(0)))
    ok = fits(space, c, m)
    plain = GuidedProposer(space, model=make_model("xgb", seed=0), candidates=8, seed=0)
    judged = GuidedProposer(space, model=make_model("xgb", seed=0), candidates=8, seed=0,
                            feasible=functools.partial(fitting, space))
    a, b = plain.score(c, m)[0], judged.score(c, m)[0]
    assert 0 < ok.sum() < len(ok)
    assert b[ok].max() < b[~ok].min()
    np.testing.assert_array_equal(b[ok], a[ok])  # among themselves: as the model ranks
    np.testing.assert_allclose(b[~ok], a[~ok] + NOT_FITTING)


def test_where_most_candidates_overflow_the_batches_are_the_models_top_ranks(mesh_rounds):
    """On the 4x4 mesh, where most placements overflow a PE's memory, the batches are the
    best-ranked candidates that fit ("evolve"), not rows topped up from far down the
    ranking because the top ones did not fit (when the model alone ranked overflows, all
    46 proposals of these rounds were such top-ups)."""
    labels = [x for batch, _ in mesh_rounds[2] for x in batch.strategy]
    assert len(labels) >= 40 and labels.count("evolve") >= 0.75 * len(labels)


def test_batch_quality_rho_is_spearmans_on_finite_pairs_none_when_undefined():
    """Ties ranked by their mean (a hand-worked value); a constant side, or fewer than three
    finite pairs: None, and no warning printed (the warnings filter turns one into a failure)."""
    from autoplace.search.guided_proposer import spearman_rho

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # ranks (1, 2.5, 2.5, 4) and (1, 3, 2, 4): rho = 4.5 / sqrt(4.5 * 5)
        assert spearman_rho(np.array([1.0, 2, 2, 5]), np.array([0.1, 0.3, 0.2, 0.9])) == \
            pytest.approx(4.5 / np.sqrt(4.5 * 5))
        assert spearman_rho(np.array([1.0, 1, 1, 1]), np.array([1.0, 2, 3, 4])) is None
        assert spearman_rho(np.array([1.0, 2, np.inf, np.nan]), np.array([1.0, 2, 3, 4])) is None
        rho = spearman_rho(np.array([3.0, 1, 2, np.inf]), np.array([30.0, 10, 20, 0]))
        assert rho == pytest.approx(1.0) and isinstance(rho, float)


@pytest.mark.parametrize("seed", range(8))
def test_batch_quality_rho_is_scipys_spearmanr(seed):
    """The same figure as scipy.stats.spearmanr, on random batches with many ties, and on
    equal sides (the simulator as the measurer), which it gives without ranking."""
    from scipy.stats import spearmanr

    from autoplace.search.guided_proposer import spearman_rho

    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 60))
    a, b = rng.integers(0, 6, n).astype(float), rng.normal(size=n).round(1)
    for x, y in ((a, b), (b, b.copy()), (a, a.copy())):
        want, got = spearmanr(x, y).statistic, spearman_rho(x, y)
        assert (got is None) if not np.isfinite(want) else got == pytest.approx(want, abs=1e-12)
    assert spearman_rho(b, b.copy()) == 1.0


def test_a_simulator_measured_tune_does_not_import_scipy_stats(tmp_path):
    """Its model predicts what the simulator measures: rho is 1 without ranking, and the job
    does not pay scipy.stats' 0.3 s import (checked in a fresh interpreter)."""
    code = ("import sys; from autoplace.cli.main import main; "
            "rc = main(['tune', 'squeezenet', '--hw', 'soc', '--trials', '64', '--log', "
            "'t.jsonl', '--no-progress']); print(rc, 'scipy.stats' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=tmp_path)
    assert out.stdout.strip().splitlines()[-1] == "0 False", out.stdout + out.stderr
    rhos = [json.loads(line)["spearman"] for line in open(tmp_path / "t.model.jsonl")]
    assert 1.0 in rhos and set(rhos) <= {1.0, None}
