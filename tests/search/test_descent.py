"""One-op local descent: the moves of a genome, descent in the simulator, and a tuning run
whose final best is a one-op local optimum under the simulator (its measurer)."""

from __future__ import annotations

import warnings
from collections import Counter

import numpy as np
import pytest

from autoplace.baselines.heft import heft_genome
from autoplace.hardware.load import load_profile
from autoplace.measure.simulator import Simulator
from autoplace.models import load_graph
from autoplace.records.tuning_log import TuningLog, best, read
from autoplace.search import TuneConfig, tune
from autoplace.search.config import FREE_BATCH
from autoplace.search.descent import Descent, moves, predicted
from autoplace.space import SearchSpace


@pytest.fixture(scope="module")
def space():
    return SearchSpace(load_graph("squeezenet"), load_profile("soc"))


def test_moves_are_every_genome_one_change_away(space):
    c, m = heft_genome(space)
    m = space.normalize(c[None, :], m[None, :])[0]
    C, M = moves(space, c, m)
    keys = space.keys(C, M)
    assert len(set(keys)) == len(keys) and space.keys(c[None, :], m[None, :])[0] not in keys
    changed_ops = (C != c).sum(axis=1)
    assert set(changed_ops.tolist()) <= {0, 1}
    op_moves = C[changed_ops == 1]
    # every other choice of every op, once (a choice change may repair modes: not counted)
    assert len(op_moves) == int((space.n_choices - 1).sum())
    for i in range(space.n_ops):
        got = sorted(op_moves[op_moves[:, i] != c[i], i].tolist())
        assert got == [k for k in range(space.n_choices[i]) if k != c[i]]
    flips = M[changed_ops == 0]  # a copy's mode, the ops as they were
    assert len(flips) and ((flips != m).sum(axis=1) == 1).all()


def test_moves_of_a_big_space_are_capped(space):
    c, m = heft_genome(space)
    C, _ = moves(space, c, m, limit=50)
    assert 0 < len(C) <= 50


def normalized_heft(space):
    """HEFT's genome, its modes normalised: a descent start."""
    c, m = heft_genome(space)
    return c, space.normalize(c[None, :], m[None, :])[0]


def counting(space):
    """A simulator prediction that notes how many rows each call ranks (the list)."""
    rows: list[int] = []

    def counted(C, M):
        rows.append(len(C))
        return predicted(space, C, M)

    return rows, counted


def test_a_stable_model_ranks_a_starts_moves_once_and_proposes_the_same(space):
    """Rounds that descend from the same best reuse its ranked moves when the model gives a
    genome the same figure every time (the simulator); a learning model ranks them anew."""
    (c, m), (rows, counted) = normalized_heft(space), counting(space)
    out = {}
    for stable in (True, False):
        rows.clear()
        d = Descent(space, predict=counted, stable=stable)
        first = d.propose(c, m, 8, set())
        n_first = sum(rows)
        second = d.propose(c, m, 8, {space.keys(first[0][:1], first[1][:1])[0]})
        out[stable] = second, sum(rows) - n_first
    n_moves = len(moves(space, c, m)[0])
    assert out[False][1] >= n_moves + 1 and out[True][1] < out[False][1] - n_moves
    assert all(np.array_equal(x, y) for x, y in zip(out[True][0], out[False][0]))


def test_a_stable_model_keeps_the_ranking_that_ended_a_descent(space):
    """The round after a descent usually starts where it ended (then the best): with the
    simulator, the full ranking that ended the descent is that round's, not made again;
    the proposals are a learning model's (none: the end is a local optimum)."""
    (c, m), (rows, counted) = normalized_heft(space), counting(space)
    out = {}
    for stable in (True, False):
        d = Descent(space, predict=counted, stable=stable)
        first = d.propose(c, m, 8, set())
        end = first[0][0], first[1][0]
        rows.clear()
        again = d.propose(*end, 8, set(space.keys(*first)))
        out[stable] = again, sum(rows)
    n_moves = len(moves(space, *end)[0])
    assert out[True][1] == 0 and out[False][1] >= n_moves + 1
    assert len(out[False][0][0]) == 0
    assert all(np.array_equal(x, y) for x, y in zip(out[True][0], out[False][0]))


def test_descent_in_the_simulator_ends_at_a_local_optimum(space):
    c, m = heft_genome(space)
    start = predicted(space, c[None, :], m[None, :])[0]
    d = Descent(space)
    ec, em = d.descend(c, m, start)
    end = predicted(space, ec[None, :], em[None, :])[0]
    assert end < start
    C, M = moves(space, ec, em)
    assert (predicted(space, C, M) >= end).all()  # no move is faster
    assert not len(d.propose(ec, em, 8, set())[0])  # so descent proposes nothing
    again = d.propose(c, m, 8, set())
    assert np.array_equal(again[0][0], ec)  # the endpoint first, and the same every time
    assert all(np.array_equal(x, y) for x, y in zip(again, d.propose(c, m, 8, set())))


@pytest.mark.parametrize("share", [0.125, 0.0])
def test_a_tuning_run_ends_at_a_one_op_local_optimum(tmp_path, share):
    sp = SearchSpace(load_graph("inception_v2"), load_profile("biglittle"))
    log = tmp_path / "t.jsonl"
    with TuningLog(log) as tl:
        tune(sp, Simulator(sp), tl, TuneConfig(trials=128, seed=1, descent=share))
    records = read(log)
    assert len(records) - 3 == 128  # descent's candidates count against --trials
    top = best(records)
    c, m = sp.encode([top.placement])
    C, M = moves(sp, c[0], m[0])
    faster = int((predicted(sp, C, M) < top.result.latency_s).sum())
    if share:
        assert faster == 0, "the best is a one-op local optimum"
        assert any(r.strategy == "descent" for r in records)
    else:  # without descent this run's best is not (what the test above would catch)
        assert faster > 0 and not any(r.strategy == "descent" for r in records)


def test_descent_proposes_distinct_unmeasured_genomes(space):
    c, m = heft_genome(space)
    d = Descent(space)
    choice, mode = d.propose(c, m, 8, set())
    keys = space.keys(choice, space.normalize(choice, mode))
    assert 1 < len(keys) <= 8 and len(set(keys)) == len(keys)
    again, again_mode = d.propose(c, m, 8, set(keys[:1]))  # the endpoint measured: not again
    assert keys[0] not in space.keys(again, space.normalize(again, again_mode))


class _DriesUp:
    """A strategy that proposes one round, then nothing (a space the strategy exhausts)."""

    def __init__(self, inner):
        self.inner, self.rounds = inner, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def propose(self, n):
        self.rounds += 1
        proposal = self.inner.propose(n)
        return proposal if self.rounds == 1 else proposal.take([])


def test_a_kick_from_a_local_optimum_ends_unmeasured_and_ranked_below_it(space):
    """Iterated local search. Within 6.03 mJ on soc, one-op descent from HEFT's placement
    toward the bound ends 0.2% beyond it; random one-op moves out of that basin, then
    descent, end closer (from HEFT's placement without a bound no kick of 64 does)."""
    from autoplace.measure.limits import Limits
    from autoplace.measure.objective import LATENCY
    from autoplace.search.fit_repair import BEYOND, toward_fitting

    bounded = LATENCY.bounded(Limits(energy_j=6.03e-3))
    rank = toward_fitting(space, bounded, lambda c, m: predicted(space, c, m, bounded))
    c, m = heft_genome(space)
    d = Descent(space, predict=rank)
    ec, em = d.descend(c, m, rank(c[None, :], m[None, :])[0])
    end = rank(ec[None, :], em[None, :])[0]
    assert BEYOND < end < np.inf and (rank(*moves(space, ec, em)) >= end).all()
    here = space.keys(ec[None, :], em[None, :])[0]
    kc, km = d.kick(ec, em, {here}, np.random.default_rng(0))
    assert kc.shape == (1, space.n_ops) and km.shape == (1, space.n_edges)
    assert rank(kc, km)[0] < end and space.keys(kc, km)[0] != here
    again = d.kick(ec, em, {here}, np.random.default_rng(0))
    assert space.keys(*again) == space.keys(kc, km)  # seeded: the same kick
    none = d.kick(ec, em, {here}, np.random.default_rng(0), tries=0)
    assert none[0].shape == (0, space.n_ops) and none[1].shape == (0, space.n_edges)


@pytest.mark.parametrize("share", [0.125, 0.0])
def test_descent_takes_over_when_the_strategy_runs_dry(tmp_path, monkeypatch, share):
    """A strategy that proposes one round: descent from the best takes over, then kicks;
    once neither finds anything new, the job wanders (:meth:`LocalSearch.wander`: descents
    from measured genomes after longer kicks, better or not) and spends its whole budget
    (it used to stop there, "no unmeasured candidate left to propose")."""
    from autoplace.search import job
    from autoplace.search.local_search import WANDER

    made = job.make_strategy
    monkeypatch.setattr(job, "make_strategy", lambda *a, **k: _DriesUp(made(*a, **k)))
    sp = SearchSpace(load_graph("inception_v1"), load_profile("soc"))
    log = tmp_path / "t.jsonl"
    with TuningLog(log) as tl, warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        tune(sp, Simulator(sp), tl, TuneConfig(trials=120, seed=0, descent=share))
    records, stopped = read(log), [w for w in said if "search stopped" in str(w.message)]
    by = Counter(r.strategy for r in records)
    faster = _faster_moves(sp, best(records))
    if share:  # the strategy's one round, then descent, kicks and wandering
        assert not stopped and len(records) == 3 + 120
        assert by["descent"] > 0 and by["kick"] > 0 and by[WANDER] > 0
        first = min(r.trial for r in records if r.strategy == WANDER)
        assert all(r.trial < first for r in records if r.strategy == "evolve")
        assert faster == 0, "the best is a one-op local optimum"
    else:  # without descent the job just stops after the one round
        one_round = 3 + FREE_BATCH  # the baselines and the strategy's round
        assert stopped and by["descent"] == by[WANDER] == 0 and len(records) == one_round
        assert faster > 0


class _Interrupts(Simulator):
    """The simulator, with Ctrl-C pressed during its ``at``-th batches (1-based)."""

    def __init__(self, space, at):
        super().__init__(space)
        self.at, self.calls = set(at), 0

    def measure_encoded(self, choice, mode, placements):
        self.calls += 1
        if self.calls in self.at:
            raise KeyboardInterrupt
        return super().measure_encoded(choice, mode, placements)


def _faster_moves(sp, record) -> int:
    c, m = sp.encode([record.placement])
    C, M = moves(sp, c[0], m[0])
    return int((predicted(sp, C, M) < record.result.latency_s).sum())


def test_an_interrupted_run_first_makes_its_best_a_local_optimum(tmp_path):
    sp = SearchSpace(load_graph("inception_v2"), load_profile("biglittle"))
    log = tmp_path / "t.jsonl"
    with TuningLog(log) as tl:
        result = tune(sp, _Interrupts(sp, at=[6]), tl, TuneConfig(trials=1000, seed=1))
    records = read(log)
    assert result.interrupted and result.polished and len(records) < 1000
    assert records[-1].strategy == "descent" and _faster_moves(sp, best(records)) == 0
    assert len({r.trial for r in records}) == len(records) == result.measured


def test_a_second_interrupt_stops_at_once(tmp_path):
    sp = SearchSpace(load_graph("inception_v2"), load_profile("biglittle"))
    log = tmp_path / "t.jsonl"
    with TuningLog(log) as tl:
        result = tune(sp, _Interrupts(sp, at=[6, 7]), tl, TuneConfig(trials=1000, seed=1))
    records = read(log)
    assert result.interrupted and not result.polished
    assert not any(r.strategy == "descent" for r in records)
    # baselines, then four rounds before the interrupt
    assert len(records) == 3 + 4 * FREE_BATCH


class _Costly(Simulator):
    """A measurer unlike the profile's simulator: the simulator of another profile (the
    LITTLE cores' convolutions 3x slower), and not free."""

    free = False

    def __init__(self, space):
        import dataclasses

        profile = space.profile
        little = profile.unit("little")
        slow = dataclasses.replace(little, gflops={**little.gflops,
                                                   "conv2d": little.gflops["conv2d"] / 3})
        units = tuple(slow if u.name == "little" else u for u in profile.units)
        super().__init__(SearchSpace(space.graph, dataclasses.replace(profile, units=units)))


def test_with_a_costly_measurer_descent_ranks_moves_by_the_learned_model(tmp_path):
    from autoplace.search.job import make_tuner

    sp = SearchSpace(load_graph("squeezenet"), load_profile("biglittle"))
    measurer = _Costly(sp)
    tuner = make_tuner(sp, measurer, TuningLog(tmp_path / "t.jsonl"),
                       TuneConfig(trials=128, seed=0))
    tuner.run_baselines()
    tuner.run_search(lambda n: None)
    c, m = sp.encode([best(tuner.records).placement])
    C, M = moves(sp, c[0], m[0])
    simulated, ranked = predicted(sp, C, M), tuner.predict(C, M)
    truth = predicted(measurer.space, C, M)
    fits = np.isfinite(simulated)
    assert np.array_equal(np.isinf(ranked), ~fits)
    off = fits & (simulated != truth)  # moves the profile's simulator gets wrong
    err_sim = np.mean(np.abs(np.log(simulated[off] / truth[off])))
    err_ranked = np.mean(np.abs(np.log(ranked[off] / truth[off])))
    assert err_ranked < 0.8 * err_sim  # the learned residual: closer to the measurer
    free = make_tuner(sp, Simulator(sp), TuningLog(tmp_path / "f.jsonl"),
                      TuneConfig(trials=64, seed=0))
    assert np.array_equal(free.predict(C, M), simulated)  # the simulator measures: itself


def test_wandering_proposes_new_genomes_that_fit_better_or_not():
    """:meth:`LocalSearch.wander` on squeezenet over biglittle, from where descent from
    every op on ``big`` ends, a one-op local optimum (61% of the genomes 1 to 8 random moves
    from every op on ``big`` do not fit): distinct genomes, none measured, each fitting, not
    all better; the same for the same measurements; none without a measured genome that
    fits."""
    from autoplace.search.local_search import LocalSearch

    sp = SearchSpace(load_graph("squeezenet"), load_profile("biglittle"))
    local = LocalSearch(sp, predict=lambda c, m: predicted(sp, c, m))
    c, m = sp.encode([sp.uniform("big")])
    c, m = local.descent.descend(c[0], m[0], predicted(sp, c, m)[0])
    c, m = sp.canonical(c[None, :], m[None, :])
    start = sp.keys(c, m)[0]
    seen = {start: float(predicted(sp, c, m)[0])}
    got = local.wander(6, seen)
    C, M = sp.canonical(got.choice, got.mode)
    keys = sp.keys(C, M)
    assert len(set(keys)) == len(keys) == 6 and start not in keys
    assert np.isfinite(predicted(sp, C, M)).all() and set(got.labels) == {"wander"}
    assert not (predicted(sp, C, M) < seen[start]).all()  # better or not
    again = local.wander(6, dict(seen))
    assert sp.keys(*sp.canonical(again.choice, again.mode)) == keys  # seeded
    assert local.wander(6, {start: None}) is None  # (a failure is no start)


def test_of_equal_bests_descent_starts_from_the_first_measured(space):
    """Two genomes of the same figure: the descent starts from the one measured first, the
    log's best (``best``: the lowest trial of equals), whatever their keys' order."""
    from autoplace.search.local_search import LocalSearch

    local = LocalSearch(space, predict=lambda c, m: predicted(space, c, m))
    C, M = space.canonical(*space.encode([space.uniform(u) for u in space.units[:2]]))
    keys = space.keys(C, M)
    for first, second in (keys, keys[::-1]):
        seen = {first: 1e-3, second: 1e-3}
        assert next(iter(local.starts(seen)))[0] == first
