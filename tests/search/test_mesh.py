"""The mesh pipeline search in the one tuning loop: the Python entry point and the plan
space's genomes (the pipeline moves are in the strategy contract suite,
tests/search/test_strategies.py; the stream measurer in the measurer contract suite,
tests/measure/test_contract.py)."""

from __future__ import annotations

import pytest

from autoplace.hardware.load import load_profile
from autoplace.measure.limits import Limits
from autoplace.measure.objective import objective_named
from autoplace.models import load_graph
from autoplace.pipeline import evaluate
from autoplace.pipeline.stream_measurer import StreamMeasurer
from autoplace.records.front import front
from autoplace.records.tuning_log import TuningLog, read
from autoplace.search import TuneConfig, tune
from autoplace.search.mesh import mesh_config, plan_space, tune_mesh

CRITERIA = objective_named("throughput,energy").criteria


@pytest.fixture(scope="module")
def space():
    return plan_space(load_graph("squeezenet"), load_profile("mesh"))


def test_python_plans_and_tunes_a_mesh(space, tmp_path):
    """The docs' example: the DP's plans first, then the search; the best record's plan is
    the best streamed one of the log, and the log holds what the result says."""
    with TuningLog(tmp_path / "mesh.jsonl") as log:
        result = tune_mesh(space, log, mesh_config(trials=30, seed=0))
    records = read(tmp_path / "mesh.jsonl")
    assert [r.trial for r in records] == list(range(len(space.starts) + 30))
    assert list(result.records) == records and result.measured == len(records)
    assert sorted(result.baselines) == ["dp", "dp-2"][:len(space.starts)]
    plan = space.candidate_of(result.best.pipeline, result.best.placement)
    best = min(r.result.period_s for r in records if r.result.period_s is not None)
    assert result.best.result.period_s == best and evaluate(plan, space.costs).fits
    assert plan in {space.candidate_of(r.pipeline, r.placement) for r in records}


def test_a_plan_space_is_tuned_for_throughput_without_descent(space, tmp_path):
    with TuningLog(tmp_path / "x.jsonl") as log:
        with pytest.raises(ValueError, match="a plan space is tuned for throughput"):
            tune(space, StreamMeasurer(space.costs), log, TuneConfig(trials=5))
    assert not (tmp_path / "x.jsonl").exists() or not read(tmp_path / "x.jsonl")


def test_a_plans_genome_is_its_text_and_its_key(space):
    choice, mode = space.encode(list(space.starts))
    assert mode.shape == (len(space.starts), 0)
    texts = [space.format_genome(c, m) for c, m in zip(choice, mode)]
    assert [space.decode(*space.parse_genome(t)) for t in texts] == list(space.starts)
    assert space.keys(choice, mode) == [t.encode() for t in texts]
    assert space.log10_size > 4  # at least the ways to cut 41 ops and share 16 PEs


def _job(space, path, limits=None, trials=64):
    with TuningLog(path) as log:
        return tune_mesh(space, log, mesh_config(trials=trials, seed=0,
                                                 **({"limits": limits} if limits else {})))


@pytest.fixture(scope="module")
def free(space, tmp_path_factory):
    """The throughput job without limits (64 trials, seed 0)."""
    return _job(space, tmp_path_factory.mktemp("free") / "t.jsonl")


def test_a_throughput_search_within_an_energy_bound_keeps_it(space, free, tmp_path):
    """Within 0.999 of the energy of the unbounded job's best plan (which therefore does
    not keep it): the best keeps the bound and streams more inferences per second than
    every start plan (the DP's) that keeps it."""
    bound = Limits(energy_j=0.999 * free.best.result.energy_j)
    assert not bound.admits(free.best.result)
    result = _job(space, tmp_path / "t.jsonl", bound)
    assert result.best is not None and bound.admits(result.best.result)
    kept = [r for r in result.baselines.values() if bound.admits(r.result)]
    assert kept and result.best.result.period_s < min(r.result.period_s for r in kept)
    within = [r.result.period_s for r in result.records if bound.admits(r.result)]
    assert result.best.result.period_s == min(within)


def test_where_no_start_plan_keeps_a_latency_bound_the_moves_go_toward_it(space, free,
                                                                          tmp_path):
    """Within 0.9 of the latency of the unbounded job's best plan, below the latency of
    every plan that job measured: no start plan keeps it; the moves go from the plans least
    beyond it (by their analytic figures) and reach plans that keep it."""
    bound = Limits(latency_s=0.9 * free.best.result.latency_s)
    assert not any(bound.admits(r.result) for r in free.records)
    result = _job(space, tmp_path / "t.jsonl", bound)
    assert not any(bound.admits(r.result) for r in result.baselines.values())
    assert result.best is not None and bound.admits(result.best.result)


def test_a_plan_beyond_the_limits_bounds_no_other(space, free):
    """The stream measurer bounds a plan by the best known throughput (once the job told it
    its best): with limits, only by plans that keep them. The unbounded job's best, measured
    first within a bound it does not keep, leaves a plan whose analytic throughput is below
    its streamed one streamed (without the bound, that plan is bounded: not streamed)."""
    fast = space.candidate_of(free.best.pipeline, free.best.placement)
    slow = next(p for p in (space.candidate_of(r.pipeline, r.placement) for r in free.records)
                if p.replicas / evaluate(p, space.costs).period_s
                < 0.999 / free.best.result.period_s)
    bound = Limits(energy_j=free.best.result.energy_j * (1 - 1e-9))
    for limits, streamed in ((None, False), (bound, True)):
        m = StreamMeasurer(space.costs, limits=limits)
        m.set_incumbent(None)
        first, second = m.measure([fast, slow])
        assert first.period_s == free.best.result.period_s
        assert (second.period_s is not None) == streamed


def test_plan_limits_are_on_latency_and_energy(space, tmp_path):
    for objective in ("throughput", "throughput,energy"):
        config = mesh_config(trials=5, objective=objective,
                             limits=Limits(memory={"sram": 1e6}))
        with TuningLog(tmp_path / "x.jsonl") as log, pytest.raises(
                ValueError, match="--max-memory: a pipeline plan's memory is its PEs' local"):
            tune_mesh(space, log, config)
        assert not (tmp_path / "x.jsonl").exists() or not read(tmp_path / "x.jsonl")


def _front_job(space, path, limits=None, trials=64, seed=0):
    config = mesh_config(trials=trials, seed=seed, objective="throughput,energy",
                         **({"limits": limits} if limits else {}))
    with TuningLog(path) as log:
        return tune_mesh(space, log, config)


def test_a_front_within_limits_is_of_plans_that_keep_them(space, tmp_path):
    """The front of throughput and energy within an energy bound that no start plan keeps
    (below the least energy of the unbounded front job's first 16 plans): its points keep
    it, and are the front of the records that do; the moves go from the plans least beyond
    it (by their analytic figures) and reach them."""
    loose = _front_job(space, tmp_path / "loose.jsonl", trials=16)
    least = min(r.result.energy_j for r in loose.records if r.result.energy_j)
    bound = Limits(energy_j=0.997 * least)
    result = _front_job(space, tmp_path / "t.jsonl", bound)
    assert not any(bound.admits(r.result) for r in result.baselines.values())
    kept = [r for r in result.records if bound.admits(r.result)]
    assert result.front and all(bound.admits(r.result) for r in result.front)
    assert [r.trial for r in result.front] == [r.trial for r in front(kept, CRITERIA)]
    assert any(not bound.admits(r.result) and r.result.energy_j for r in result.records)


def test_limits_every_plan_keeps_change_no_proposal(space, tmp_path):
    """A front job within limits that every plan it measures keeps proposes what the job
    without them does (the ranking and the walks are the same)."""
    free = _front_job(space, tmp_path / "free.jsonl", trials=32)
    bound = Limits(latency_s=1.0, energy_j=1.0)
    assert all(bound.admits(r.result) for r in free.records if r.result.period_s)
    bounded = _front_job(space, tmp_path / "bounded.jsonl", bound, trials=32)
    assert [(r.pipeline, r.strategy) for r in bounded.records] == \
        [(r.pipeline, r.strategy) for r in free.records]
